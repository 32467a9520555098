"""`migplan agent`: the node agent (one per GPU node, run by the DaemonSet)."""

from __future__ import annotations

import signal
import threading
from typing import Annotated

import typer

from migplan.operator.agent import IDLE_INTERVAL_S
from migplan.operator.cli import gpu_operator_options as gpu
from migplan.operator.cli.context import KubeconfigOpt, state
from migplan.operator.gpu_operator import (
    DRA_PLUGIN_NAMESPACE,
    DRA_PLUGIN_SELECTOR,
    GpuOperatorSettings,
)
from migplan.planner.errors import MigplanInputError


def agent(
    ctx: typer.Context,
    node: Annotated[
        str,
        typer.Option(
            "--node", envvar="NODE_NAME", help="This node's name (the DaemonSet sets NODE_NAME)."
        ),
    ],
    kubeconfig: KubeconfigOpt = None,
    simulate: Annotated[
        str | None,
        typer.Option(
            "--simulate",
            metavar="MODEL[,MODEL...]",
            help="Emulated GPUs (MIG on) and a simulated device plugin instead of NVML and the "
            "kubelet: for demos and tests.",
        ),
    ] = None,
    interval: Annotated[
        float, typer.Option(help="Seconds between passes without changes.", min=1)
    ] = IDLE_INTERVAL_S,
    once: Annotated[bool, typer.Option("--once", help="One pass, then exit.")] = False,
    liveness: Annotated[
        str | None,
        typer.Option(help="Serve a liveness endpoint, e.g. http://0.0.0.0:8081/healthz."),
    ] = None,
    metrics_port: Annotated[
        int,
        typer.Option(
            min=0,
            max=65535,
            help="Serve Prometheus metrics (NVML call latency and errors, passes, instances by "
            "profile, last apply) on this port; 0: none.",
        ),
    ] = 0,
    gpu_operator_namespace: gpu.NamespaceOpt = gpu.DEFAULT_NAMESPACE,
    device_plugin_selector: gpu.DevicePluginOpt = gpu.DEFAULT_DEVICE_PLUGIN,
    gfd_selector: gpu.FeatureDiscoveryOpt = gpu.DEFAULT_FEATURE_DISCOVERY,
    dcgm_exporter_selector: gpu.DcgmExporterOpt = gpu.DEFAULT_DCGM_EXPORTER,
    dra_plugin_namespace: Annotated[
        str,
        typer.Option(
            envvar="MIGPLAN_DRA_PLUGIN_NAMESPACE",
            help="Namespace of NVIDIA's DRA driver: its kubelet plugin is restarted after a "
            "change on nodes a dra.mode static plan lays out.",
            rich_help_panel=gpu.PANEL,
        ),
    ] = DRA_PLUGIN_NAMESPACE,
    dra_plugin_selector: Annotated[
        str,
        typer.Option(
            envvar="MIGPLAN_DRA_PLUGIN_SELECTOR",
            help="Label selector of the DRA kubelet plugin's pods.",
            rich_help_panel=gpu.PANEL,
        ),
    ] = DRA_PLUGIN_SELECTOR,
    cdi_command: Annotated[
        str | None,
        typer.Option(
            envvar="MIGPLAN_CDI_COMMAND",
            metavar="COMMAND",
            help="Regenerates the CDI spec after a change, before the device plugin restarts "
            "(where the NVIDIA container toolkit runs in CDI mode), e.g. 'nvidia-ctk cdi "
            "generate --output=/var/run/cdi/nvidia.yaml'. A non-zero exit fails the pass "
            "(status Failed); the next pass tries again.",
            rich_help_panel=gpu.PANEL,
        ),
    ] = None,
) -> None:
    """Run the node agent: make this node's GPUs match its NodePartition.

    It reads the truth from NVML, destroys only instances that no process uses and no pod
    holds (unless the operator evicted that pod), creates instances at exact placements,
    restarts the device plugin, GPU feature discovery and dcgm-exporter (after regenerating
    the CDI spec, if --cdi-command says how), checks the node's allocatable resources and GFD's
    labels, and reports status. For a plan with dra.mode static it restarts NVIDIA's DRA
    kubelet plugin instead and checks the node's ResourceSlices.
    """
    # Lazy (PLC0415): every `migplan` command loads this module, and the agent's imports
    # (the Kubernetes client, gRPC) add ~0.4 s to each (python -X importtime).
    from migplan.operator.agent.components import (  # noqa: PLC0415
        DraPluginRestarter,
        GpuOperatorComponents,
    )
    from migplan.operator.agent.loop import Health, run, serve_liveness  # noqa: PLC0415
    from migplan.operator.agent.node import NodeAgent  # noqa: PLC0415
    from migplan.operator.agent.podresources import PodResourcesBindings  # noqa: PLC0415
    from migplan.operator.kube.connect import connect  # noqa: PLC0415
    from migplan.operator.metrics_server import serve_metrics  # noqa: PLC0415
    from migplan.operator.nvml.adapter import default_nvml  # noqa: PLC0415
    from migplan.operator.nvml.emulator import FakeNvml  # noqa: PLC0415
    from migplan.operator.sim.device_plugin import SimulatedDevicePlugin  # noqa: PLC0415

    catalog = state(ctx).catalog
    api = connect(kubeconfig=kubeconfig)
    before_pass = None
    if simulate:
        models = [m.strip() for m in simulate.split(",") if m.strip()]
        if not models:
            raise MigplanInputError("--simulate needs at least one GPU model")
        fake = FakeNvml([catalog.model(m) for m in models], mig=True)
        plugin = SimulatedDevicePlugin(api=api, nodes={node: fake})
        plugin.publish(node)
        worker = NodeAgent(
            api=api,
            node=node,
            nvml=lambda: fake.pynvml,
            catalog=catalog,
            bindings=plugin,
            device_plugin=plugin,
        )
        before_pass = lambda: plugin.sync(node)  # noqa: E731
    else:
        nvml = default_nvml()
        worker = NodeAgent(
            api=api,
            node=node,
            nvml=lambda: nvml,
            catalog=catalog,
            bindings=PodResourcesBindings(nvml=nvml, catalog=catalog, api=api),
            device_plugin=GpuOperatorComponents(
                api=api,
                settings=GpuOperatorSettings(
                    namespace=gpu_operator_namespace,
                    device_plugin=device_plugin_selector,
                    feature_discovery=gfd_selector,
                    dcgm_exporter=dcgm_exporter_selector,
                ),
                cdi_command=cdi_command,
            ),
            dra_plugin=DraPluginRestarter(
                api=api, namespace=dra_plugin_namespace, selector=dra_plugin_selector
            ),
        )
    if once:
        if before_pass:
            before_pass()
        status = worker.run_once()
        typer.echo(f"{node}: {status.phase if status else 'no NodePartition'}")
        return
    health = Health(interval)
    if liveness:
        serve_liveness(liveness, health)
    if metrics_port:
        serve_metrics(port=metrics_port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    run(worker, stop=stop, interval=interval, health=health, before_pass=before_pass)
