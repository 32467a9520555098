"""kopf handlers for GPUPartitionPlan (cluster-scoped, migplan.io/v1alpha1).

They only route: the decisions live in `reconciler.PlanController`, which re-reads the plan
and writes status itself (so each rollout step is recorded before it is taken). What they
route to is one `Runtime`, made by `configure` and handed to kopf as its memo.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass
from typing import Any

import kopf
import structlog
from kubernetes import client

from migplan.operator.cluster_inventory import MIG_CAPABLE, MIG_CAPABLE_LABEL
from migplan.operator.controller.cordons import CordonIndex
from migplan.operator.controller.events import EventRecorder
from migplan.operator.controller.partitions import PartitionBootstrap
from migplan.operator.controller.reconciler import PlanController
from migplan.operator.controller.rollout import CORDONED_BY, Boundary, no_boundary
from migplan.operator.controller.scale_out_settings import ScaleOutSettings
from migplan.operator.controller.selection import EVERY_PLAN, PlanSelector
from migplan.operator.controller.ticker import PlanTicker
from migplan.operator.dra.helper import CelUnavailable, evaluator
from migplan.operator.gpu_operator import GpuOperatorSettings
from migplan.operator.kube.connect import connect
from migplan.operator.kube.informers import ClusterCache
from migplan.operator.kube.leader import Leadership
from migplan.operator.kube.leader import identity as leader_identity
from migplan.planner.api.group import GROUP, PLANS, VERSION
from migplan.planner.api.spec import Actuator
from migplan.planner.hardware.catalog import default_catalog

log = structlog.get_logger("migplan.operator")


@dataclass
class Runtime:
    """Everything the handlers act through: made once by `configure`, kopf's memo."""

    controller: PlanController
    connection: client.ApiClient
    """The raw connection, for leader election."""
    partitions: PartitionBootstrap
    cordons: CordonIndex
    ticker: PlanTicker
    priority: int = 0
    leader: Leadership | None = None
    selector: PlanSelector = EVERY_PLAN
    """The plans this operator acts on (`--plan-selector`)."""
    node_cache: ClusterCache | None = None
    """Where node events come from with informers (else from kopf's own node watch)."""

    def acting(self) -> bool:
        """Whether this replica acts: no election, or it holds the lease."""
        return self.leader is None or self.leader.leading.is_set()

    def memo(self) -> kopf.Memo:
        """The memo to run kopf with (`kopf.run(memo=...)`)."""
        return kopf.Memo(runtime=self)


def _runtime(memo: kopf.Memo) -> Runtime:
    found = memo.get("runtime")
    if not isinstance(found, Runtime):
        raise RuntimeError("kopf was started without migplan's runtime as its memo")
    return found


def configure(
    *,
    kubeconfig: str | None,
    tick: float,
    agent_timeout: float,
    priority: int,
    mig_config_map: tuple[str, str],
    default_actuator: Actuator = Actuator.AGENT,
    gpu_operator: GpuOperatorSettings | None = None,
    mig_config_propagation: float = 90.0,
    boundary: Boundary = no_boundary,
    selector: PlanSelector = EVERY_PLAN,
    scale_out: ScaleOutSettings | None = None,
    informers: bool = True,
) -> Runtime:
    """Connect the controller and make the periodic tick (`tick` seconds apart), acting on
    the plans `selector` selects; `boundary` is called between each node's rollout steps
    (tests stop the operator there). With `informers`, a planning pass's whole-cluster
    lists come from watch-fed caches."""
    api = connect(kubeconfig=kubeconfig)
    gpu_operator = gpu_operator or GpuOperatorSettings()
    if informers:
        components = gpu_operator.components().values()
        api = api.cached(pod_sets=frozenset((gpu_operator.namespace, s) for s in components))
    recorder = EventRecorder(api)
    controller = PlanController(
        api=api,
        catalog=default_catalog(),
        events=recorder.post,
        node_events=recorder.on_node,
        agent_timeout=agent_timeout,
        mig_config_map=mig_config_map,
        default_actuator=default_actuator,
        gpu_operator=gpu_operator,
        mig_config_propagation=mig_config_propagation,
        boundary=boundary,
        scale_out=scale_out or ScaleOutSettings(),
    )
    cordons = CordonIndex()
    if not informers:
        # Without informers kopf watches the nodes; with them the node informer hands its
        # events over (`startup`): a second watch would decode every node update twice,
        # and kopf's event loop, handling them (5,000 kwok nodes: 84 a second), was busy a
        # fifth of a core.
        kopf.on.event("", "v1", "nodes", labels={MIG_CAPABLE_LABEL: "true"})(on_gpu_node)
    return Runtime(
        controller=controller,
        connection=api.connection,
        partitions=PartitionBootstrap(api),
        cordons=cordons,
        ticker=PlanTicker(controller, interval=tick, cordons=cordons, selector=selector),
        priority=priority,
        selector=selector,
        node_cache=api.cache,
    )


def elect_leader(runtime: Runtime, *, namespace: str, name: str = "migplan-operator") -> None:
    """Run as one of several replicas: act only while holding the Lease `namespace/name`."""
    runtime.leader = Leadership(
        runtime.connection,
        namespace=namespace,
        name=name,
        identity=leader_identity(),
        on_lead=functools.partial(_lead, runtime),
    )


def _lead(runtime: Runtime) -> None:
    """Just became leader: catch up on plans changed while following, then tick."""
    controller = runtime.controller
    for plan in runtime.selector.plans(controller.api.plans.list_plans()):
        try:
            controller.resumed(str(plan["metadata"]["name"]))
        except Exception as exc:  # the ticker retries; one plan must not block the rest
            log.error(
                "resume failed", plan=plan["metadata"]["name"], error=repr(exc), exc_info=True
            )
    runtime.ticker.start()


@kopf.on.startup()
def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    """Peering priority, and events only for what a person should see; then tick, or
    campaign for the lease and tick once leading."""
    runtime = _runtime(memo)
    settings.peering.priority = runtime.priority
    settings.posting.level = logging.WARNING  # kopf's own handler chatter stays in the logs
    _log_cel_helper()
    if runtime.node_cache is not None:
        runtime.node_cache.on_nodes(
            label_selector=MIG_CAPABLE, handler=functools.partial(_node_event, runtime)
        )
    if runtime.leader is None:
        runtime.ticker.start()
    else:
        runtime.leader.start()


def _log_cel_helper() -> None:
    """Say which CEL the DRA selectors will be evaluated with, or that they cannot be (the
    claims with selectors are then skipped with a note, and planning goes on)."""
    try:
        versions = evaluator().versions()
    except CelUnavailable as exc:
        log.warning("cel_helper_unavailable", why=str(exc))
        return
    log.info("cel_helper", **{k.rsplit("/", 1)[-1]: v for k, v in versions.items()})


@kopf.on.probe(id="ticker")
def ticker_alive(memo: kopf.Memo, **_: Any) -> float:
    """Liveness: fails (kopf answers 500) once the ticker has not ticked for 3 intervals,
    so a wedged ticker thread gets the pod restarted; else seconds since its last tick."""
    ticker = _runtime(memo).ticker
    why = ticker.stalled()
    if why is not None:
        raise kopf.PermanentError(why)
    return round(time.monotonic() - ticker.last_tick, 1)


@kopf.on.cleanup()
def cleanup(memo: kopf.Memo, **_: Any) -> None:
    """Stop ticking before kopf exits (the step in hand is recorded first), then give the
    Lease up so that a follower need not wait for it to run out."""
    runtime = _runtime(memo)
    runtime.ticker.stop()
    if runtime.leader is not None:
        runtime.leader.step_down()


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """The pod's service account in a cluster, else the kubeconfig (KUBECONFIG)."""
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)


def _selected(memo: kopf.Memo, labels: Any = None, **_: Any) -> bool:
    """Whether the plan is this operator's (`--plan-selector`); kopf skips it otherwise."""
    return _runtime(memo).selector.selects(labels)


@kopf.on.create(GROUP, VERSION, PLANS, when=_selected)
@kopf.on.update(GROUP, VERSION, PLANS, field="spec", when=_selected)
def on_spec(name: str, memo: kopf.Memo, **_: Any) -> None:
    """A new or changed spec: plan it."""
    runtime = _runtime(memo)
    if runtime.acting():  # else the leader does it; a new leader resumes every plan
        runtime.controller.spec_changed(name)


@kopf.on.resume(GROUP, VERSION, PLANS, when=_selected)
def on_resume(name: str, memo: kopf.Memo, **_: Any) -> None:
    """The operator started: pick up where the plan's status says it was."""
    runtime = _runtime(memo)
    if runtime.acting():  # else the leader does it; a new leader resumes every plan
        runtime.controller.resumed(name)


@kopf.on.delete(GROUP, VERSION, PLANS, optional=True, when=_selected)
def on_delete(name: str, memo: kopf.Memo, **_: Any) -> None:
    """A plan deleted mid-rollout leaves no node cordoned. No finalizer: if the operator is
    away when a plan goes, the ticker uncordons its nodes when it comes back."""
    runtime = _runtime(memo)
    if runtime.acting():
        runtime.controller.forget(name)


def on_gpu_node(
    name: str,
    uid: str,
    type: str | None,
    memo: kopf.Memo,
    annotations: Any = None,
    **_: Any,
) -> None:
    """kopf's node event (`--no-informers` only: see `configure`)."""
    _node_changed(
        _runtime(memo), name=name, uid=uid, deleted=type == "DELETED", annotations=annotations
    )


def _node_event(runtime: Runtime, kind: str, node: Any) -> None:
    """The node informer's event (on its thread; the informer would swallow an error)."""
    meta = node.metadata
    try:
        _node_changed(
            runtime,
            name=str(meta.name),
            uid=str(meta.uid),
            deleted=kind == "DELETED",
            annotations=meta.annotations,
        )
    except Exception as exc:  # one node's trouble (the API away) must not stop the others'
        log.error("node event failed", node=meta.name, error=f"{type(exc).__name__}: {exc}")


def _node_changed(
    runtime: Runtime, *, name: str, uid: str, deleted: bool, annotations: Any
) -> None:
    """A MIG-capable node: make sure it has a NodePartition for its agent, note whether a
    plan holds it cordoned (the ticker reads that instead of listing nodes), and let it go
    where a plan that is gone kept it from consolidation (scale-out)."""
    if deleted:
        runtime.cordons.forget(name)
        runtime.partitions.forget(name)
    else:
        runtime.cordons.saw(name=name, annotations=annotations, owner_key=CORDONED_BY)
        runtime.partitions.ensure(node=name, uid=uid)
        if runtime.acting():
            runtime.controller.scaler.let_go_if_orphaned(node=name, annotations=annotations or {})
