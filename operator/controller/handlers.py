"""kopf handlers for GPUPartitionPlan (cluster-scoped, migplan.io/v1alpha1).

They only route: the decisions live in `reconciler.PlanController`, which re-reads the plan
and writes status itself (so each rollout step is recorded before it is taken).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import kopf
import structlog

from migplan.operator.controller.cordons import CordonIndex
from migplan.operator.controller.partitions import PartitionBootstrap
from migplan.operator.controller.reconciler import PlanController
from migplan.operator.controller.rollout import CORDONED_BY, Boundary, no_boundary
from migplan.operator.controller.ticker import PlanTicker
from migplan.operator.dra.helper import CelUnavailable, evaluator
from migplan.operator.gpu_operator import GpuOperatorSettings
from migplan.operator.kube.connect import connect
from migplan.operator.kube.leader import Leadership
from migplan.operator.kube.leader import identity as leader_identity
from migplan.planner.api.group import GROUP, PLANS, VERSION
from migplan.planner.api.spec import Actuator
from migplan.planner.hardware.catalog import default_catalog

_state: dict[str, Any] = {}
log = structlog.get_logger("migplan.operator")


def _event(body: dict[str, Any], kind: str, reason: str, message: str) -> None:
    """Post an event on the plan; a failure to post is logged, never raised."""
    try:
        _state["controller"].api.core.create_event(
            obj=body, kind=kind, reason=reason, message=message
        )
    except Exception as exc:  # an event is worth less than the step that caused it
        log.warning("event not posted", reason=reason, error=repr(exc))


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
) -> None:
    """Connect the controller and register the periodic tick (`tick` seconds apart);
    `boundary` is called between each node's rollout steps (tests stop the operator there)."""
    _state["priority"] = priority
    api = connect(kubeconfig=kubeconfig)
    _state["connection"] = api.connection
    _state["controller"] = PlanController(
        api=api,
        catalog=default_catalog(),
        events=_event,
        agent_timeout=agent_timeout,
        mig_config_map=mig_config_map,
        default_actuator=default_actuator,
        gpu_operator=gpu_operator or GpuOperatorSettings(),
        mig_config_propagation=mig_config_propagation,
        boundary=boundary,
    )
    _state["partitions"] = PartitionBootstrap(_state["controller"].api)
    _state["cordons"] = CordonIndex()
    _state["ticker"] = PlanTicker(_state["controller"], interval=tick, cordons=_state["cordons"])


def elect_leader(*, namespace: str, name: str = "migplan-operator") -> None:
    """Run as one of several replicas: act only while holding the Lease `namespace/name`."""
    _state["leader"] = Leadership(
        _state["connection"],
        namespace=namespace,
        name=name,
        identity=leader_identity(),
        on_lead=_lead,
    )


def _lead() -> None:
    """Just became leader: catch up on plans changed while following, then tick."""
    controller: PlanController = _state["controller"]
    for plan in controller.api.plans.list_plans():
        try:
            controller.resumed(str(plan["metadata"]["name"]))
        except Exception as exc:  # the ticker retries; one plan must not block the rest
            log.error("resume failed", plan=plan["metadata"]["name"], error=repr(exc))
    _state["ticker"].start()


def _acting() -> bool:
    """Whether this replica acts: no election, or it holds the lease."""
    leader: Leadership | None = _state.get("leader")
    return leader is None or leader.leading.is_set()


@kopf.on.startup()
def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
    """Peering priority, and events only for what a person should see; then tick, or
    campaign for the lease and tick once leading."""
    settings.peering.priority = _state.get("priority", 0)
    settings.posting.level = logging.WARNING  # kopf's own handler chatter stays in the logs
    _log_cel_helper()
    leader: Leadership | None = _state.get("leader")
    if leader is None:
        _state["ticker"].start()
    else:
        leader.start()


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
def ticker_alive(**_: Any) -> float:
    """Liveness: fails (kopf answers 500) once the ticker has not ticked for 3 intervals,
    so a wedged ticker thread gets the pod restarted; else seconds since its last tick."""
    ticker: PlanTicker = _state["ticker"]
    why = ticker.stalled()
    if why is not None:
        raise kopf.PermanentError(why)
    return round(time.monotonic() - ticker.last_tick, 1)


@kopf.on.cleanup()
def cleanup(**_: Any) -> None:
    """Stop ticking before kopf exits (the step in hand is recorded first), then give the
    Lease up so that a follower need not wait for it to run out."""
    _state["ticker"].stop()
    leader: Leadership | None = _state.get("leader")
    if leader is not None:
        leader.step_down()


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """The pod's service account in a cluster, else the kubeconfig (KUBECONFIG)."""
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)


@kopf.on.create(GROUP, VERSION, PLANS)
@kopf.on.update(GROUP, VERSION, PLANS, field="spec")
def on_spec(name: str, **_: Any) -> None:
    """A new or changed spec: plan it."""
    if not _acting():
        return  # the leader does it; a new leader resumes every plan
    _state["controller"].spec_changed(name)


@kopf.on.resume(GROUP, VERSION, PLANS)
def on_resume(name: str, **_: Any) -> None:
    """The operator started: pick up where the plan's status says it was."""
    if not _acting():
        return  # the leader does it; a new leader resumes every plan
    _state["controller"].resumed(name)


@kopf.on.delete(GROUP, VERSION, PLANS, optional=True)
def on_delete(name: str, **_: Any) -> None:
    """A plan deleted mid-rollout leaves no node cordoned. No finalizer: if the operator is
    away when a plan goes, the ticker uncordons its nodes when it comes back."""
    if _acting():
        _state["controller"].forget(name)


@kopf.on.event("", "v1", "nodes", labels={"nvidia.com/mig.capable": "true"})
def on_gpu_node(name: str, uid: str, type: str | None, annotations: Any = None, **_: Any) -> None:
    """A MIG-capable node: make sure it has a NodePartition for its agent, and note whether
    a plan holds it cordoned (the ticker reads that instead of listing nodes)."""
    if type == "DELETED":
        _state["cordons"].forget(name)
        _state["partitions"].forget(name)
    else:
        _state["cordons"].saw(name=name, annotations=annotations, owner_key=CORDONED_BY)
        _state["partitions"].ensure(node=name, uid=uid)
