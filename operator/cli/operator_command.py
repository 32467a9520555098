"""`migplan operator`: the GPUPartitionPlan controller (kopf)."""

from __future__ import annotations

import contextlib
import faulthandler
import logging
import os
import sys
from enum import StrEnum
from typing import Annotated, NoReturn

import typer

from migplan.operator.cli import gpu_operator_options as gpu
from migplan.operator.cli.context import KubeconfigOpt
from migplan.operator.controller.scale_out_settings import PAUSE_IMAGE, ScaleOutSettings
from migplan.operator.gpu_operator import GpuOperatorSettings
from migplan.planner.api.spec import Actuator
from migplan.planner.errors import MigplanInputError

PEERING = "migplan"


class MetricsAuth(StrEnum):
    """Who may read the metrics endpoint."""

    none = "none"
    kubernetes = "kubernetes"


@gpu.with_gpu_operator
def operator(
    kubeconfig: KubeconfigOpt = None,
    liveness: Annotated[
        str | None, typer.Option(help="kopf's liveness endpoint, e.g. http://0.0.0.0:8080/healthz.")
    ] = None,
    standalone: Annotated[
        bool, typer.Option(help="Run without peering (a single replica).")
    ] = False,
    leader_elect: Annotated[
        bool,
        typer.Option(
            help="Run as one of several replicas: only the holder of the Lease "
            "--leader-election-name (in --leader-election-namespace) plans and rolls out; a "
            "follower takes over within about 12 s of the leader's last renewal, and a leader "
            "that cannot renew exits. Replaces kopf peering."
        ),
    ] = False,
    leader_election_namespace: Annotated[
        str,
        typer.Option(envvar="POD_NAMESPACE", help="Namespace of the leader-election Lease."),
    ] = "migplan-system",
    leader_election_name: Annotated[
        str,
        typer.Option(help="Name of the leader-election Lease (one per operator deployment)."),
    ] = "migplan-operator",
    metrics_port: Annotated[
        int, typer.Option(min=0, max=65535, help="Prometheus metrics port (0: none).")
    ] = 9090,
    metrics_auth: Annotated[
        MetricsAuth,
        typer.Option(
            case_sensitive=False,
            help="Who may scrape /metrics. none: anyone who can reach the port (limit it with "
            "the NetworkPolicy deploy/ ships). kubernetes: callers whose bearer token the API "
            "server accepts (TokenReview) and whom RBAC lets get the non-resource URL /metrics "
            "(SubjectAccessReview); needs the system:auth-delegator role "
            "(deploy/ and the chart run this way by default).",
        ),
    ] = MetricsAuth.none,
    tick: Annotated[
        float,
        typer.Option(min=0.2, help="Seconds between rollout steps and rebalance checks per plan."),
    ] = 10.0,
    priority: Annotated[
        int,
        typer.Option(
            help="Peering priority: an operator with a higher one makes this one pause "
            "(equal priorities all pause, so run one replica)."
        ),
    ] = 0,
    mig_manager_config: Annotated[
        str,
        typer.Option(
            metavar="NAMESPACE/NAME",
            help="ConfigMap the GPU Operator's mig-manager reads (plans with actuator "
            "mig-manager); point the ClusterPolicy's migManager.config.name at it.",
        ),
    ] = "gpu-operator/migplan-mig-parted-config",
    default_actuator: Annotated[
        Actuator,
        typer.Option(
            envvar="MIGPLAN_DEFAULT_ACTUATOR",
            help="Who changes the GPUs of plans whose spec names no actuator: the node agent, "
            "or NVIDIA's mig-manager (on GPU Operator clusters that keep it).",
        ),
    ] = Actuator.AGENT,
    agent_timeout: Annotated[
        float,
        typer.Option(min=1, help="Seconds a node's agent may take to apply its partition."),
    ] = 600.0,
    mig_config_propagation: Annotated[
        float,
        typer.Option(
            min=0,
            help="Seconds kubelet may take to put a change of mig-manager's ConfigMap into the "
            "file mig-manager reads (its sync period, 60 s by default, plus its cache). Plans "
            "with actuator mig-manager write their entries when planned and point a node's "
            "label at them no sooner; after a `failed`, the one retry waits as long again.",
        ),
    ] = 90.0,
    plan_selector: Annotated[
        str,
        typer.Option(
            envvar="MIGPLAN_PLAN_SELECTOR",
            metavar="KEY=VALUE[,KEY=VALUE...]",
            help="Act only on the GPUPartitionPlans with these labels (default: every plan), "
            "so two operators (two chart releases) can share a cluster: each acts on its own "
            "plans, while conflicts between plans and nodes cordoned by plans are judged over "
            "all of them.",
        ),
    ] = "",
    scale_out_namespace: Annotated[
        str,
        typer.Option(
            envvar="POD_NAMESPACE",
            help="Namespace of the placeholder pods that ask the cluster autoscaler for the "
            "nodes of plans with spec.scaleOut (the operator's own).",
        ),
    ] = "migplan-system",
    scale_out_priority_class: Annotated[
        str,
        typer.Option(
            help="PriorityClass of those placeholders: below every real workload, so real "
            "pods preempt them (the chart's migplan-placeholder: value -10, never preempts)."
        ),
    ] = "migplan-placeholder",
    scale_out_image: Annotated[
        str, typer.Option(help="Image the placeholders run (they only sleep).")
    ] = PAUSE_IMAGE,
    informers: Annotated[
        bool,
        typer.Option(
            help="Keep what a planning pass lists (MIG-capable nodes, pending pods, "
            "namespaces, the GPU Operator's component pods, NodePartitions, DRA's, Kueue's "
            "and PodGroup objects) in watch-fed "
            "caches, so a pass costs the API server its changes, not a list of the cluster; "
            "--no-informers lists them every pass (less memory on a small cluster).",
        ),
    ] = True,
    gpu_operator: GpuOperatorSettings = gpu.DEFAULT_SETTINGS,
) -> None:
    """Run the operator: plan every GPUPartitionPlan, and roll non-dry-run plans out.

    On each plan's create or spec change it reads the cluster, plans, validates and writes
    status. Every --tick it re-plans when the rebalance schedule (or `migplan rebalance`) says
    so, and advances the rollout inside the maintenance window: at most maxUnavailable nodes
    at a time, each cordoned only if something must go, drained through the Eviction API,
    reconfigured by its agent, checked and uncordoned. Each step is recorded in status
    before it is taken, so a restarted operator carries on where it stopped.
    """
    # Lazy (PLC0415): the Kubernetes client (and kopf) add ~0.5 s to every command.
    import kopf  # noqa: PLC0415

    from migplan.operator.controller import handlers  # noqa: PLC0415
    from migplan.operator.controller.selection import PlanSelector  # noqa: PLC0415
    from migplan.operator.kube.connect import connect  # noqa: PLC0415
    from migplan.operator.logs import stdlib_formatter  # noqa: PLC0415
    from migplan.operator.metrics_server import KubernetesAuthorizer, serve_metrics  # noqa: PLC0415

    if kubeconfig:
        os.environ["KUBECONFIG"] = kubeconfig  # kopf's login handler reads it
    namespace, _, config_map = mig_manager_config.partition("/")
    if not namespace or not config_map:
        raise MigplanInputError(
            f"--mig-manager-config: {mig_manager_config!r} is not NAMESPACE/NAME"
        )
    selector = PlanSelector.parse(plan_selector)
    runtime = handlers.configure(
        kubeconfig=kubeconfig,
        informers=informers,
        selector=selector,
        tick=tick,
        agent_timeout=agent_timeout,
        default_actuator=default_actuator,
        priority=priority,
        mig_config_map=(namespace, config_map),
        mig_config_propagation=mig_config_propagation,
        gpu_operator=gpu_operator,
        scale_out=ScaleOutSettings(
            namespace=scale_out_namespace,
            priority_class=scale_out_priority_class,
            image=scale_out_image,
        ),
    )
    if leader_elect:
        handlers.elect_leader(
            runtime, namespace=leader_election_namespace, name=leader_election_name
        )
        standalone = True  # the Lease decides who acts; kopf's peering would only pause us
    if metrics_port:
        authorize = None
        if metrics_auth is MetricsAuth.kubernetes:
            authorize = KubernetesAuthorizer(api=connect(kubeconfig=kubeconfig))
        serve_metrics(port=metrics_port, authorize=authorize)
    if not standalone:
        connect(kubeconfig=kubeconfig).core.ensure_cluster_object(
            group="kopf.dev",
            version="v1",
            plural="clusterkopfpeerings",
            body={
                "apiVersion": "kopf.dev/v1",
                "kind": "ClusterKopfPeering",
                "metadata": {"name": PEERING},
            },
        )
    verbose = bool(os.environ.get("MIGPLAN_KOPF_VERBOSE"))
    kopf.configure(log_format=kopf.LogFormat.JSON, log_refkey="object", verbose=verbose)
    # kopf's records (its handler on the root logger among them) in migplan's own shape.
    for handler in logging.getLogger().handlers:
        handler.setFormatter(stdlib_formatter())
    if not verbose:
        # kopf logs every handler and timer run at info; keep its warnings and errors only.
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    # A peering name makes peering mandatory in kopf, so only name it when peering is wanted.
    faulthandler.enable()  # a crash in native code (solver, TLS) says where, thread by thread
    kopf.run(
        clusterwide=True,
        standalone=standalone,
        liveness_endpoint=liveness,
        peering_name=None if standalone else PEERING,
        memo=runtime.memo(),
    )
    end_process()


def end_process() -> NoReturn:
    """Exit 0 once kopf has stopped and cleaned up: flush the logs, then end the process
    without interpreter finalization. Daemon threads (lease renewal, metrics, the liveness
    server) are still running then, and finalizing under a thread that is writing a log
    line or returning from native code can abort the process (SIGABRT, exit -6) instead
    of exiting cleanly."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(0)
