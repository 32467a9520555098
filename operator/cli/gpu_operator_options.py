"""The GPU Operator settings as command-line options (shared by `operator`, `agent` and
`doctor`, each also read from a MIGPLAN_* environment variable for the manifests)."""

from __future__ import annotations

from typing import Annotated

import typer

from migplan.operator.gpu_operator import GpuOperatorSettings

_DEFAULTS = GpuOperatorSettings()
PANEL = "NVIDIA GPU Operator"

NamespaceOpt = Annotated[
    str,
    typer.Option(
        "--gpu-operator-namespace",
        "--device-plugin-namespace",
        envvar="MIGPLAN_GPU_OPERATOR_NAMESPACE",
        help="Namespace of the GPU Operator's pods (device plugin, GFD, dcgm-exporter, "
        "mig-manager).",
        rich_help_panel=PANEL,
    ),
]
StrategyLabelOpt = Annotated[
    str,
    typer.Option(
        envvar="MIGPLAN_MIG_STRATEGY_LABEL",
        help="Node label that says the device plugin's MIG strategy (GFD sets it).",
        rich_help_panel=PANEL,
    ),
]
DevicePluginOpt = Annotated[
    str,
    typer.Option(
        envvar="MIGPLAN_DEVICE_PLUGIN_SELECTOR",
        help="Label selector of the NVIDIA device-plugin pods.",
        rich_help_panel=PANEL,
    ),
]
FeatureDiscoveryOpt = Annotated[
    str,
    typer.Option(
        envvar="MIGPLAN_GFD_SELECTOR",
        help="Label selector of the GPU feature discovery pods.",
        rich_help_panel=PANEL,
    ),
]
DcgmExporterOpt = Annotated[
    str,
    typer.Option(
        envvar="MIGPLAN_DCGM_EXPORTER_SELECTOR",
        help="Label selector of the dcgm-exporter pods.",
        rich_help_panel=PANEL,
    ),
]
MigManagerOpt = Annotated[
    str,
    typer.Option(
        envvar="MIGPLAN_MIG_MANAGER_SELECTOR",
        help="Label selector of the mig-manager pods.",
        rich_help_panel=PANEL,
    ),
]

DEFAULT_NAMESPACE = _DEFAULTS.namespace
DEFAULT_STRATEGY_LABEL = _DEFAULTS.strategy_label
DEFAULT_DEVICE_PLUGIN = _DEFAULTS.device_plugin
DEFAULT_FEATURE_DISCOVERY = _DEFAULTS.feature_discovery
DEFAULT_DCGM_EXPORTER = _DEFAULTS.dcgm_exporter
DEFAULT_MIG_MANAGER = _DEFAULTS.mig_manager


def settings(
    *,
    namespace: str,
    strategy_label: str,
    device_plugin: str,
    feature_discovery: str,
    dcgm_exporter: str,
    mig_manager: str,
) -> GpuOperatorSettings:
    """The settings the options above give (every command that takes them builds them so)."""
    return GpuOperatorSettings(
        namespace=namespace,
        strategy_label=strategy_label,
        device_plugin=device_plugin,
        feature_discovery=feature_discovery,
        dcgm_exporter=dcgm_exporter,
        mig_manager=mig_manager,
    )
