"""kopf handlers for GPUPartitionPlan (cluster-scoped, migplan.io/v1alpha1).

They only route: the decisions live in `reconciler.PlanController`, which re-reads the plan
and writes status itself (so each rollout step is recorded before it is taken).
"""

from __future__ import annotations

import logging
from typing import Any, cast

import kopf

from migplan.operator.controller.partitions import PartitionBootstrap
from migplan.operator.controller.reconciler import PlanController
from migplan.operator.kube import client as kube
from migplan.planner.catalog import default_catalog

GROUP, VERSION, PLURAL = "migplan.io", "v1alpha1", "gpupartitionplans"
_state: dict[str, Any] = {}


def _event(body: dict[str, Any], kind: str, reason: str, message: str) -> None:
    kopf.event(cast(kopf.Body, body), type=kind, reason=reason, message=message[:1000])


def configure(
    *,
    kubeconfig: str | None,
    tick: float,
    agent_timeout: float,
    priority: int,
    mig_config_map: tuple[str, str],
) -> None:
    """Connect the controller and register the periodic tick (`tick` seconds apart)."""
    _state["priority"] = priority
    _state["controller"] = PlanController(
        api=kube.connect(kubeconfig=kubeconfig),
        catalog=default_catalog(),
        events=_event,
        agent_timeout=agent_timeout,
        mig_config_map=mig_config_map,
    )
    _state["partitions"] = PartitionBootstrap(_state["controller"].api)
    kopf.timer(GROUP, VERSION, PLURAL, interval=tick, initial_delay=min(tick, 1.0))(on_tick)


@kopf.on.startup()
def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
    """Peering priority, and events only for what a person should see."""
    settings.peering.priority = _state.get("priority", 0)
    settings.posting.level = logging.WARNING  # kopf's own handler chatter stays in the logs


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """The pod's service account in a cluster, else the kubeconfig (KUBECONFIG)."""
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)


@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
def on_spec(name: str, **_: Any) -> None:
    """A new or changed spec: plan it."""
    _state["controller"].spec_changed(name)


@kopf.on.resume(GROUP, VERSION, PLURAL)
def on_resume(name: str, **_: Any) -> None:
    """The operator started: pick up where the plan's status says it was."""
    _state["controller"].resumed(name)


@kopf.on.delete(GROUP, VERSION, PLURAL)
def on_delete(name: str, **_: Any) -> None:
    """A plan deleted mid-rollout leaves no node cordoned (kopf's finalizer waits for this)."""
    _state["controller"].forget(name)


def on_tick(name: str, **_: Any) -> None:
    """Re-plan when due, then advance the rollout."""
    _state["controller"].tick(name)


@kopf.on.event("", "v1", "nodes", labels={"nvidia.com/mig.capable": "true"})
def on_gpu_node(name: str, uid: str, type: str | None, **_: Any) -> None:
    """A MIG-capable node: make sure it has a NodePartition for its agent."""
    if type == "DELETED":
        _state["partitions"].forget(name)
    else:
        _state["partitions"].ensure(node=name, uid=uid)
