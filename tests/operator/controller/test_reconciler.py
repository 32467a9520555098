"""The PlanController on the in-memory API server: planning on a spec change, the plans it
refuses (invalid, suspended, overlapping), deferral while a rollout runs, and ticks that take
a rollout to Ready."""

from __future__ import annotations

import gc
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from migplan.operator.controller import planning
from migplan.operator.controller.reconciler import REBALANCE, PlanController
from migplan.operator.controller.rollout import NodeStepper
from migplan.operator.controller.rollout_book import read_records
from migplan.operator.sim.api_server import InMemoryCluster
from migplan.planner import pipeline
from migplan.planner.api.group import API_VERSION, PLANS
from migplan.planner.api.nodepartition import NodePhase
from migplan.planner.hardware.catalog import default_catalog
from migplan.planner.rollout.records import NodeRollout, NodeStep

POOL = "migplan.io/pool"
ALWAYS_OPEN = {"start": "* * * * *", "duration": "1h"}
RESOURCE = "nvidia.com/mig-"


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 26, 3, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def plan_body(name: str, pool: str = "a", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "GPUPartitionPlan",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"matchLabels": {POOL: pool}},
            "demand": {
                "fromPendingPods": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ml"}},
                    "priority": 10,
                }
            },
            "policy": {"disruption": "evict"},
            "window": ALWAYS_OPEN,
            "rollout": {"maxUnavailable": 1, "drainTimeout": "20s"},
            **spec,
        },
    }


def report(cluster: InMemoryCluster, node: str, layout: str, in_use: dict[str, str]) -> None:
    """The node's agent: its GPU as NVML has it, and the device plugin's resources."""
    found = cluster.plans.get_node_partition(name=node)
    if found is None:
        cluster.add_node_partition(node)
        found = cluster.plans.get_node_partition(name=node)
    cluster.plans.patch_node_partition_status(
        name=node,
        status={
            "phase": NodePhase.APPLIED,
            "appliedGeneration": found["metadata"]["generation"],
            "gpuCount": 1,
            "gpus": [
                {
                    "index": 0,
                    "model": "H100-80GB",
                    "migEnabled": True,
                    "layout": layout,
                    "inUse": in_use,
                }
            ],
        },
    )
    counts: dict[str, int] = {}
    for instance in filter(None, layout.replace("-", "").split("+")):
        key = RESOURCE + instance.split("@")[0]
        counts[key] = counts.get(key, 0) + 1
    current = cluster.core.get_node(name=node).status.allocatable or {}
    resources = {
        **{k: None for k in current if k.startswith(RESOURCE)},
        **{k: str(v) for k, v in counts.items()},
    }
    cluster.core.patch_node_status(name=node, status={"allocatable": resources})


def agents_apply(cluster: InMemoryCluster) -> None:
    """Every agent applies its NodePartition's spec."""
    for partition in cluster.plans.list_node_partitions():
        gpus = partition["spec"].get("gpus")
        if gpus:
            report(cluster, partition["metadata"]["name"], gpus[0]["layout"], {})


@pytest.fixture
def cluster() -> InMemoryCluster:
    """Two H100 nodes in pool a, each with one 1g.10gb instance held by a pod (at slices 0
    and 6), and three pods pending on 3g.40gb: only one pod moving makes room for all."""
    cluster = InMemoryCluster()
    cluster.add_namespace("ml")
    held = {"a-0": ("1g.10gb@0", "frag"), "a-1": ("1g.10gb@6", "small")}
    for node, (layout, pod) in held.items():
        cluster.add_node(
            node,
            labels={
                "nvidia.com/mig.capable": "true",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                POOL: "a",
            },
        )
        report(cluster, node, layout, {layout: f"ml/{pod}"})
        cluster.add_pod("ml", pod, node=node, requests={RESOURCE + "1g.10gb": "1"})
    for n in range(3):
        cluster.add_pod("ml", f"want-{n}", requests={RESOURCE + "3g.40gb": "1"})
    return cluster


def controller(cluster: InMemoryCluster, clock: Clock | None = None) -> PlanController:
    events: list[tuple[str, str, str]] = []
    found = PlanController(
        api=cluster,
        catalog=default_catalog(),
        events=lambda body, kind, reason, message: events.append((kind, reason, message)),
        clock=clock or Clock(),
    )
    found.posted = events  # type: ignore[attr-defined]
    return found


def status(cluster: InMemoryCluster, name: str) -> dict[str, Any]:
    found = cluster.plans.get_plan(name=name)
    assert found is not None
    return dict(found.get("status") or {})


def rollout(cluster: InMemoryCluster, name: str) -> dict[str, dict[str, Any]]:
    """The records of the plan's current rollout as its nodes' NodePartitions hold them
    (what a restarted operator reads), node -> record."""
    input_hash = status(cluster, name)["rollout"]["id"]
    found = read_records(cluster, plan=name, input_hash=input_hash)
    return {n: r.model_dump(mode="json", by_alias=True) for n, r in found.items()}


def reasons(plans: PlanController) -> list[str]:
    return [reason for _, reason, _ in plans.posted]  # type: ignore[attr-defined]


def test_a_new_plan_is_planned_with_a_rollout_and_an_event(cluster: InMemoryCluster) -> None:
    plans = controller(cluster)
    cluster.store.create(PLANS, plan_body("p"))
    plans.spec_changed("p")
    found = status(cluster, "p")
    assert found["phase"] == "Pending"
    assert found["observedGeneration"] == 1
    records = rollout(cluster, "p")
    assert records
    assert found["rollout"]["total"] == len(records)
    assert found["rollout"]["steps"]["Pending"] == len(records)
    assert set(records) <= {"a-0", "a-1"}
    assert all(r["step"] == NodeStep.PENDING for r in records.values())
    assert "Planned" in reasons(plans)
    assert not cluster.core.get_node(name="a-0").spec.unschedulable  # nothing taken yet


def test_ticks_in_an_open_window_take_the_rollout_to_ready(cluster: InMemoryCluster) -> None:
    clock = Clock()
    plans = controller(cluster, clock)
    cluster.store.create(PLANS, plan_body("p"))
    plans.spec_changed("p")
    roll_out(cluster, plans, clock)
    found = status(cluster, "p")
    records = rollout(cluster, "p")
    assert {r["step"] for r in records.values()} == {NodeStep.DONE}
    assert found["rollout"]["steps"]["Done"] == len(records)
    assert found["rollout"]["inHand"] == []
    assert not any(n.spec.unschedulable for n in cluster.core.list_nodes(label_selector=POOL))
    planned = [p for r in records.values() for p in r["evict"]]
    assert len(planned) == 1
    evicted = [f"ml/{w[2]}" for w in cluster.store.writes if w[:2] == ("delete", "pods")]
    assert evicted == planned
    layouts = [
        cluster.plans.get_node_partition(name=node)["status"]["gpus"][0]["layout"]
        for node in ("a-0", "a-1")
    ]
    assert sum(layout.count("3g.40gb") for layout in layouts) == 3
    assert reasons(plans).count("NodeDone") == len(records)


def test_an_invalid_spec_is_marked_invalid_with_a_warning(cluster: InMemoryCluster) -> None:
    plans = controller(cluster)
    cluster.store.create(PLANS, plan_body("p", rollout={"maxUnavailable": -1}))
    plans.spec_changed("p")
    assert status(cluster, "p")["phase"] == "Invalid"
    kind, reason, message = plans.posted[-1]  # type: ignore[attr-defined]
    assert (kind, reason) == ("Warning", "Invalid")
    assert "maxUnavailable" in message
    assert not cluster.plans.get_node_partition(name="a-0")["spec"].get("gpus")


def test_a_suspended_plan_plans_nothing(cluster: InMemoryCluster) -> None:
    plans = controller(cluster)
    cluster.store.create(PLANS, plan_body("p", suspend=True))
    plans.spec_changed("p")
    assert status(cluster, "p") == {"phase": "Suspended", "observedGeneration": 1}


def test_a_plan_over_nodes_another_plan_has_is_a_conflict(cluster: InMemoryCluster) -> None:
    plans = controller(cluster)
    cluster.store.create(PLANS, plan_body("first"))
    plans.spec_changed("first")
    cluster.store.create(PLANS, plan_body("second"))
    plans.spec_changed("second")
    found = status(cluster, "second")
    assert found["phase"] == "Conflict"
    conflict = next(c for c in found["conditions"] if c["type"] == "Conflict")
    assert conflict["status"] == "True"
    assert "first" in conflict["message"]
    assert status(cluster, "first")["phase"] == "Pending"


def test_a_spec_change_mid_rollout_is_deferred(cluster: InMemoryCluster) -> None:
    plans = controller(cluster)
    cluster.store.create(PLANS, plan_body("p"))
    plans.spec_changed("p")
    plans.tick("p")  # a node is in hand now
    assert any(
        r["step"] not in (NodeStep.PENDING, NodeStep.DONE) for r in rollout(cluster, "p").values()
    )
    assert status(cluster, "p")["rollout"]["inHand"]
    cluster.store.patch(PLANS, "p", {"spec": {"rollout": {"drainTimeout": "30s"}}})
    plans.spec_changed("p")
    found = status(cluster, "p")
    assert found["replanPending"] is True
    assert found["replanReason"] == "SpecChanged"
    assert "ReplanDeferred" in reasons(plans)


def test_a_failing_tick_is_recorded_on_the_plan(
    cluster: InMemoryCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    plans = controller(cluster)
    cluster.store.create(PLANS, plan_body("p"))
    plans.spec_changed("p")

    def refused(**_: Any) -> None:
        raise RuntimeError("the API server is away")

    monkeypatch.setattr(cluster.plans, "get_node_partition", refused)
    with pytest.raises(RuntimeError):
        plans.tick("p")
    failed = next(c for c in status(cluster, "p")["conditions"] if c["type"] == "TickFailed")
    assert failed["status"] == "True"
    assert "the API server is away" in failed["message"]
    assert "TickFailed" in reasons(plans)


def roll_out(cluster: InMemoryCluster, plans: PlanController, clock: Clock) -> None:
    """Tick (the agents applying what they are given) until the plan is Ready."""
    for _ in range(10):
        plans.tick("p")
        agents_apply(cluster)
        clock.now += timedelta(seconds=5)
        if status(cluster, "p")["phase"] == "Ready":
            return
    raise AssertionError(status(cluster, "p"))


def test_a_new_plan_replaces_the_nodes_the_last_one_listed(cluster: InMemoryCluster) -> None:
    clock = Clock()
    plans = controller(cluster, clock)
    cluster.store.create(PLANS, plan_body("p"))
    plans.spec_changed("p")
    assert status(cluster, "p")["plan"]["nodes"]
    roll_out(cluster, plans, clock)
    cluster.plans.annotate_plan(name="p", annotations={REBALANCE: "2026-11-26T03:05:00Z"})
    plans.tick("p")
    found = status(cluster, "p")
    assert found["rebalanceHandled"] == "2026-11-26T03:05:00Z"
    assert found["nodes"] == 0
    assert found["plan"]["nodes"] == {}  # a merge patch would have kept the last plan's
    assert found["rollout"]["total"] == 0


def test_the_plan_lists_at_most_so_many_nodes(
    cluster: InMemoryCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(planning, "NODES_LISTED", 1)
    plans = controller(cluster)
    cluster.store.create(PLANS, plan_body("p"))
    plans.spec_changed("p")
    found = status(cluster, "p")
    assert found["nodes"] == 2
    assert list(found["plan"]["nodes"]) == ["a-0"]
    assert found["plan"]["nodesNotListed"] == 1
    assert set(rollout(cluster, "p")) == {"a-0", "a-1"}


def test_records_an_older_operator_kept_in_the_plan_are_taken_over(
    cluster: InMemoryCluster,
) -> None:
    clock = Clock()
    plans = controller(cluster, clock)
    cluster.store.create(PLANS, plan_body("p"))
    plans.spec_changed("p")
    records = rollout(cluster, "p")
    for node in records:  # as an operator before the NodePartitions kept them
        cluster.plans.annotate_node_partition(
            name=node, labels={}, annotations={"migplan.io/rollout": None}
        )
    cluster.plans.patch_plan_status(name="p", status={"rollout": {"nodes": records}})
    restarted = controller(cluster, clock)
    roll_out(cluster, restarted, clock)
    found = status(cluster, "p")
    assert "nodes" not in found["rollout"]
    assert {r["step"] for r in rollout(cluster, "p").values()} == {NodeStep.DONE}
    assert set(rollout(cluster, "p")) == set(records)


def test_nodes_in_hand_together_are_stepped_together(
    cluster: InMemoryCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    both_in_a_step = threading.Barrier(2, timeout=5)
    advance = NodeStepper.advance

    def meeting(self: NodeStepper, record: NodeRollout) -> NodeRollout:
        both_in_a_step.wait()  # one node stepped after the other never meets the second
        return advance(self, record)

    monkeypatch.setattr(NodeStepper, "advance", meeting)
    clock = Clock()
    plans = controller(cluster, clock)
    rollout_spec = {"maxUnavailable": 2, "drainTimeout": "20s"}
    cluster.store.create(PLANS, plan_body("p", rollout=rollout_spec))
    plans.spec_changed("p")
    assert len(rollout(cluster, "p")) == 2
    plans.tick("p")
    assert len(status(cluster, "p")["rollout"]["inHand"]) == 2  # both started in one tick
    monkeypatch.undo()
    roll_out(cluster, plans, clock)
    records = rollout(cluster, "p")
    assert {r["step"] for r in records.values()} == {NodeStep.DONE}
    assert not any(n.spec.unschedulable for n in cluster.core.list_nodes(label_selector=POOL))


def test_a_replan_keeps_the_last_plan_where_it_is_still_as_good() -> None:
    # Two empty H100s, one pod pending on 7g.80gb: either GPU will do. Whichever the last
    # plan chose (here: the one the first pass did not), a re-plan keeps it.
    cluster = InMemoryCluster()
    cluster.add_namespace("ml")
    for node in ("b-0", "b-1"):
        cluster.add_node(
            node,
            labels={
                "nvidia.com/mig.capable": "true",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                POOL: "b",
            },
        )
        report(cluster, node, "-", {})
    cluster.add_pod("ml", "big", requests={RESOURCE + "7g.80gb": "1"})
    plans = controller(cluster)
    cluster.store.create(PLANS, plan_body("p", pool="b", dryRun=True))
    plans.spec_changed("p")
    [first] = status(cluster, "p")["plan"]["nodes"]
    [other] = {"b-0", "b-1"} - {first}
    change = {"gpu": 0, "before": "-", "after": "7g.80gb@0", "evict": []}
    written = status(cluster, "p")["plan"]
    cluster.plans.patch_plan_status(
        name="p", status={"plan": {**written, "nodes": {first: None, other: [change]}}}
    )
    cluster.plans.annotate_plan(name="p", annotations={REBALANCE: "2026-11-26T03:05:00Z"})
    plans.tick("p")
    found = status(cluster, "p")
    assert found["rebalanceHandled"] == "2026-11-26T03:05:00Z"
    assert found["plan"]["nodes"] == {other: [change]}


def test_a_rebalance_of_an_unchanged_fleet_keeps_the_plan_without_solving(
    cluster: InMemoryCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prometheus_client import REGISTRY

    plans = controller(cluster)
    cluster.store.create(PLANS, plan_body("same", dryRun=True))
    plans.spec_changed("same")
    before = status(cluster, "same")

    def no_solve(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("solved though nothing changed")

    monkeypatch.setattr(pipeline, "solve", no_solve)
    cluster.plans.annotate_plan(name="same", annotations={REBALANCE: "2026-11-26T03:05:00Z"})
    plans.tick("same")
    after = status(cluster, "same")
    assert after["rebalanceHandled"] == "2026-11-26T03:05:00Z"
    assert after["inputHash"] == before["inputHash"]
    assert after["plan"]["nodes"] == before["plan"]["nodes"]
    [planned] = [c for c in after["conditions"] if c["type"] == "Planned"]
    assert "unchanged" in planned["message"]
    assert REGISTRY.get_sample_value("migplan_plans_kept_total", {"plan": "same"}) == 1
    planned_events = [m for _, r, m in plans.posted if r == "Planned"]  # type: ignore[attr-defined]
    assert "the last plan stands" in planned_events[-1]
    assert "the last plan stands" not in planned_events[0]


def test_previous_layouts_pass_over_entries_edited_out_of_shape() -> None:
    found = planning.previous_layouts(
        {
            "plan": {
                "nodes": {
                    "a": [{"gpu": 0, "after": "7g.80gb@0"}, {"gpu": "1", "after": "-"}, "x"],
                    "b": None,
                    "c": {"gpu": 0},
                    "d": [{"gpu": 2, "after": 5}, {"gpu": 3, "after": "-"}],
                }
            }
        }
    )
    assert found == {("a", 0): "7g.80gb@0", ("d", 3): "-"}
    assert planning.previous_layouts({}) == {}
    assert planning.previous_layouts({"plan": "x"}) == {}
    assert planning.previous_layouts({"plan": {"nodes": ["a"]}}) == {}


def test_a_planning_pass_is_timed_in_wall_cpu_and_read_seconds(cluster: InMemoryCluster) -> None:
    from prometheus_client import REGISTRY

    def observed(name: str) -> tuple[float, float]:
        def value(sample: str) -> float:
            return REGISTRY.get_sample_value(sample, {"plan": "timed"}) or 0.0

        return value(f"{name}_count"), value(f"{name}_sum")

    plans = controller(cluster)
    cluster.store.create(PLANS, plan_body("timed"))
    plans.spec_changed("timed")
    wall, cpu = observed("migplan_planner_seconds"), observed("migplan_planner_cpu_seconds")
    read = observed("migplan_planner_read_seconds")
    assert wall[0] == cpu[0] == read[0] == 1
    assert 0 < cpu[1] <= wall[1] + 0.05
    assert 0 < read[1] < wall[1]


def test_the_collector_stays_paused_until_the_plan_is_written(
    cluster: InMemoryCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    plans = controller(cluster)
    collecting_at_write: list[bool] = []
    patch = plans.api.plans.patch_plan_status

    def patch_status(**kwargs: Any) -> None:
        collecting_at_write.append(gc.isenabled())
        patch(**kwargs)

    monkeypatch.setattr(plans.api.plans, "patch_plan_status", patch_status)
    cluster.store.create(PLANS, plan_body("paused"))
    try:
        plans.spec_changed("paused")
        assert collecting_at_write
        assert not any(collecting_at_write)
        assert gc.isenabled()
    finally:
        gc.unfreeze()
