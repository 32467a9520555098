"""Scale-out on the in-memory API server: placeholders asked for after a plan (as many as it
wants, none for a dry run), a node that joins is kept from consolidation, its placeholder
goes and the plan lays it out, then the node is released; a request nobody answers is
withdrawn and not repeated within the timeout."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from test_reconciler import (
    POOL,
    RESOURCE,
    Clock,
    agents_apply,
    plan_body,
    reasons,
    report,
    rollout,
    status,
)

from migplan.operator.controller.reconciler import PlanController
from migplan.operator.controller.scale_out import ARRIVED_FOR, DO_NOT_DISRUPT
from migplan.operator.sim.api_server import InMemoryCluster
from migplan.planner.api.group import PLANS
from migplan.planner.hardware.catalog import default_catalog

NAMESPACE = "migplan-system"
LABELS = {"nvidia.com/mig.capable": "true", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
OFFER = {
    "name": "h100-8x",
    "gpuModel": "H100-80GB",
    "gpusPerNode": 8,
    "maxNodes": 2,
    "nodeSelector": {"karpenter.sh/nodepool": "gpu", POOL: "a"},
    "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
}


@pytest.fixture
def cluster() -> InMemoryCluster:
    """One empty H100 in pool a and four pods pending on 3g.40gb: two fit."""
    cluster = InMemoryCluster()
    cluster.add_namespace("ml")
    cluster.add_namespace(NAMESPACE)
    cluster.add_node("a-0", labels={**LABELS, POOL: "a"})
    report(cluster, "a-0", "-", {})
    for n in range(4):
        cluster.add_pod("ml", f"want-{n}", requests={RESOURCE + "3g.40gb": "1"})
    return cluster


def controller(cluster: InMemoryCluster, clock: Clock) -> PlanController:
    events: list[tuple[str, str, str]] = []
    found = PlanController(
        api=cluster,
        catalog=default_catalog(),
        events=lambda body, kind, reason, message: events.append((kind, reason, message)),
        clock=clock,
    )
    found.posted = events  # type: ignore[attr-defined]
    return found


def placeholders(cluster: InMemoryCluster) -> list[Any]:
    return cluster.core.list_pods(namespace=NAMESPACE, label_selector="migplan.io/plan=p")


def settle(cluster: InMemoryCluster, plans: PlanController, clock: Clock, ticks: int = 12) -> None:
    for _ in range(ticks):
        plans.tick("p")
        agents_apply(cluster)
        clock.now += timedelta(seconds=5)


def planned_then_joined(
    cluster: InMemoryCluster, plans: PlanController, clock: Clock, **labels: str
) -> None:
    """Plan p (a-0 laid out for two pods, one node asked for), then the node `new-1` joins
    (with the offer's labels and `labels`) and the placeholder is bound to it; its agent has
    not reported yet."""
    cluster.store.create(PLANS, plan_body("p", scaleOut={"offers": [OFFER]}))
    plans.spec_changed("p")
    settle(cluster, plans, clock)
    (pod,) = placeholders(cluster)
    cluster.add_node("new-1", labels={**LABELS, **OFFER["nodeSelector"], **labels})
    cluster.store.patch(
        "pods", pod.metadata.name, {"spec": {"nodeName": "new-1"}}, namespace=NAMESPACE
    )


def test_a_plan_asks_for_the_nodes_it_wants_once(
    cluster: InMemoryCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    plans = controller(cluster, clock)
    cluster.store.create(PLANS, plan_body("p", scaleOut={"offers": [OFFER]}))
    plans.spec_changed("p")
    settle(cluster, plans, clock)  # a-0 laid out
    plans.tick("p")
    with monkeypatch.context() as patched:
        written: list[dict[str, Any]] = []
        patched.setattr(cluster.plans, "patch_plan_status", lambda **call: written.append(call))
        plans.tick("p")  # the same moment, a placeholder still waiting: nothing to write
    assert written == []
    (pod,) = placeholders(cluster)
    assert pod.spec.node_selector == OFFER["nodeSelector"]
    assert pod.spec.containers[0].resources.requests == {"nvidia.com/gpu": "8"}
    assert pod.spec.priority_class_name == "migplan-placeholder"
    assert pod.spec.tolerations[0].key == "gpu"
    owner = pod.metadata.owner_references[0]
    assert (owner.kind, owner.name) == ("GPUPartitionPlan", "p")
    found = status(cluster, "p")["scaleOut"]
    assert found["wanted"] == {"h100-8x": 1}
    assert found["message"] == "waiting for 1 x h100-8x"
    assert "ScaleOutRequested" in reasons(plans)
    plans.spec_changed("p")  # planned again: the same request, not a second one
    assert len(placeholders(cluster)) == 1


def test_a_dry_run_asks_for_nothing(cluster: InMemoryCluster) -> None:
    plans = controller(cluster, Clock())
    cluster.store.create(PLANS, plan_body("p", scaleOut={"offers": [OFFER]}, dryRun=True))
    plans.spec_changed("p")
    assert placeholders(cluster) == []
    assert status(cluster, "p")["scaleOut"]["wanted"] == {}


@pytest.mark.parametrize("used", [True, False], ids=["used", "unused"])
def test_a_node_that_joins_is_laid_out_then_released(cluster: InMemoryCluster, used: bool) -> None:
    clock = Clock()
    plans = controller(cluster, clock)
    planned_then_joined(cluster, plans, clock)
    plans.tick("p")  # bound, but its agent has not reported: still waiting
    assert len(placeholders(cluster)) == 1
    report(cluster, "new-1", "-", {})
    plans.tick("p")
    assert placeholders(cluster) == []
    annotations = cluster.core.get_node(name="new-1").metadata.annotations
    assert annotations[DO_NOT_DISRUPT] == "true"
    assert annotations[ARRIVED_FOR] == "p"
    found = status(cluster, "p")
    assert found["scaleOut"]["arrived"] == ["new-1"]
    assert "new-1" in rollout(cluster, "p")
    assert "ScaleOutArrived" in reasons(plans)
    settle(cluster, plans, clock)
    assert status(cluster, "p")["scaleOut"]["arrived"] == []
    annotations = cluster.core.get_node(name="new-1").metadata.annotations or {}
    assert DO_NOT_DISRUPT not in annotations
    assert "ScaleOutLaidOut" in reasons(plans)
    assert placeholders(cluster) == [], status(cluster, "p")
    assert "new-1" in status(cluster, "p")["scaleOut"]["released"]
    plans.spec_changed("p")  # planned again: the node is still watched
    assert "new-1" in status(cluster, "p")["scaleOut"]["released"]
    if used:
        cluster.add_pod("ml", "on-new", node="new-1", requests={RESOURCE + "3g.40gb": "1"})
    clock.now += timedelta(minutes=16)
    plans.tick("p")
    assert status(cluster, "p")["scaleOut"]["released"] == {}
    assert ("ScaleOutUnused" in reasons(plans)) is not used


def test_a_request_nobody_answers_is_withdrawn_and_not_repeated_at_once(
    cluster: InMemoryCluster,
) -> None:
    clock = Clock()
    plans = controller(cluster, clock)
    spec = {"offers": [OFFER], "timeout": "10m"}
    cluster.store.create(PLANS, plan_body("p", scaleOut=spec))
    plans.spec_changed("p")
    settle(cluster, plans, clock)  # a-0 laid out: nothing in hand defers a re-plan
    assert len(placeholders(cluster)) == 1
    clock.now += timedelta(minutes=11)
    plans.tick("p")
    assert placeholders(cluster) == []
    assert "ScaleOutTimedOut" in reasons(plans)
    plans.spec_changed("p")
    assert placeholders(cluster) == []
    assert "last request timed out" in status(cluster, "p")["scaleOut"]["message"]
    clock.now += timedelta(minutes=11)
    plans.spec_changed("p")
    assert len(placeholders(cluster)) == 1


def test_a_plan_deleted_while_its_new_node_waits_lets_the_node_go(
    cluster: InMemoryCluster,
) -> None:
    clock = Clock()
    plans = controller(cluster, clock)
    planned_then_joined(cluster, plans, clock)
    report(cluster, "new-1", "-", {})
    plans.tick("p")
    assert DO_NOT_DISRUPT in cluster.core.get_node(name="new-1").metadata.annotations
    plans.forget("p")
    assert DO_NOT_DISRUPT not in (cluster.core.get_node(name="new-1").metadata.annotations or {})


def test_a_node_kept_for_a_plan_that_is_gone_is_let_go(cluster: InMemoryCluster) -> None:
    plans = controller(cluster, Clock())
    kept = {DO_NOT_DISRUPT: "true", ARRIVED_FOR: "gone"}
    cluster.add_node("new-1", labels=LABELS)
    cluster.core.patch_node(name="new-1", body={"metadata": {"annotations": kept}})
    cluster.store.create(PLANS, plan_body("here"))
    assert not plans.scaler.let_go_if_orphaned(node="new-1", annotations={ARRIVED_FOR: "here"})
    assert plans.scaler.let_go_if_orphaned(node="new-1", annotations=kept)
    assert DO_NOT_DISRUPT not in (cluster.core.get_node(name="new-1").metadata.annotations or {})


def test_a_node_the_plan_leaves_out_on_arrival_is_kept_and_planned_again(
    cluster: InMemoryCluster,
) -> None:
    """The node joins before the GPU Operator has labelled it for the mixed strategy
    (preflight refuses it): it stays kept from consolidation, and a re-plan after the
    labels change lays it out."""
    clock = Clock()
    plans = controller(cluster, clock)
    planned_then_joined(cluster, plans, clock, **{"nvidia.com/mig.strategy": "single"})
    report(cluster, "new-1", "-", {})
    plans.tick("p")
    found = status(cluster, "p")
    assert "new-1" in found["plan"]["leftOut"]
    plans.tick("p")  # left out: kept, not released
    assert status(cluster, "p")["scaleOut"]["arrived"] == ["new-1"]
    assert DO_NOT_DISRUPT in cluster.core.get_node(name="new-1").metadata.annotations
    cluster.core.patch_node(
        name="new-1", body={"metadata": {"labels": {"nvidia.com/mig.strategy": "mixed"}}}
    )
    settle(cluster, plans, clock)
    assert "new-1" in status(cluster, "p")["scaleOut"]["released"]
    assert DO_NOT_DISRUPT not in (cluster.core.get_node(name="new-1").metadata.annotations or {})
