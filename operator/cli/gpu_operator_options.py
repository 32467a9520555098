"""The GPU Operator settings as command-line options (shared by `operator`, `agent`,
`doctor`, `preview` and `export`, each also read from a MIGPLAN_* environment variable for the
manifests)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any

import typer

from migplan.operator.gpu_operator import GpuOperatorSettings

_DEFAULTS = GpuOperatorSettings()
DEFAULT_SETTINGS = _DEFAULTS
"""What a command gets when none of the options is given."""
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


_OPTIONS = (
    ("gpu_operator_namespace", NamespaceOpt, DEFAULT_NAMESPACE, "namespace"),
    ("mig_strategy_label", StrategyLabelOpt, DEFAULT_STRATEGY_LABEL, "strategy_label"),
    ("device_plugin_selector", DevicePluginOpt, DEFAULT_DEVICE_PLUGIN, "device_plugin"),
    ("gfd_selector", FeatureDiscoveryOpt, DEFAULT_FEATURE_DISCOVERY, "feature_discovery"),
    ("dcgm_exporter_selector", DcgmExporterOpt, DEFAULT_DCGM_EXPORTER, "dcgm_exporter"),
    ("mig_manager_selector", MigManagerOpt, DEFAULT_MIG_MANAGER, "mig_manager"),
)
"""(parameter, option, default, GpuOperatorSettings field) of every GPU Operator option."""


def with_gpu_operator(command: Callable[..., None]) -> Callable[..., None]:
    """`command` with the GPU Operator options added to its command line: it declares
    `gpu_operator: GpuOperatorSettings` and gets the settings those options give. The
    commands that find the GPU Operator's pods (operator, doctor, preview, export) take the
    same options so, and judge nodes alike."""
    signature = inspect.signature(command, eval_str=True)
    kept = [p for p in signature.parameters.values() if p.name != "gpu_operator"]
    added = [
        inspect.Parameter(
            name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=option
        )
        for name, option, default, _ in _OPTIONS
    ]

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        values = {field: kwargs.pop(name) for name, _, _, field in _OPTIONS}
        command(*args, gpu_operator=GpuOperatorSettings(**values), **kwargs)

    parameters = [*kept, *added]
    wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
    return wrapper
