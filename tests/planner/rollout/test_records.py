"""Rollout records from a plan, the order of nodes, who may start, and the plan's phase."""

from __future__ import annotations

import pytest

from migplan.planner.api.inventory import Inventory
from migplan.planner.api.spec import GPUPartitionPlan, PlanPhase
from migplan.planner.pipeline import plan_fleet
from migplan.planner.rollout.records import (
    NodeRollout,
    NodeStep,
    nodes_to_start,
    rollout_nodes,
    rollout_phase,
)
from migplan.planner.schema import parse_model


def plan_for(catalog, nodes: dict[str, tuple[str, dict[str, str]]], pending: int):
    inventory = Inventory.model_validate(
        {
            "namespaces": {"ml": {}},
            "nodes": [
                {
                    "name": name,
                    "gpus": [{"index": 0, "model": "H100-80GB", "layout": layout, "inUse": in_use}],
                }
                for name, (layout, in_use) in nodes.items()
            ],
            "pendingPods": [
                {"namespace": "ml", "name": f"p{i}", "requests": {"nvidia.com/mig-3g.40gb": 1}}
                for i in range(pending)
            ],
        }
    )
    manifest = parse_model(
        GPUPartitionPlan,
        {
            "apiVersion": "migplan.io/v1alpha1",
            "kind": "GPUPartitionPlan",
            "metadata": {"name": "p"},
            "spec": {
                "demand": {"fromPendingPods": {"priority": 10}},
                "policy": {"disruption": "evict"},
                "window": {"start": "0 2 * * *", "duration": "1h"},
            },
        },
        source="test",
    )
    return plan_fleet(manifest, inventory, catalog).plan


def test_records_cover_changed_nodes_with_their_whole_target(catalog) -> None:
    plan = plan_for(
        catalog,
        {
            "a": ("1g.10gb@0", {"1g.10gb@0": "ml/frag"}),
            "b": ("1g.10gb@6", {"1g.10gb@6": "ml/small"}),
            "c": ("7g.80gb@0", {"7g.80gb@0": "ml/big"}),
        },
        pending=3,
    )
    records = {r.node: r for r in rollout_nodes(plan)}
    assert set(records) == {"a", "b"}  # c is full and busy: untouched
    disruptive = [r for r in records.values() if r.disruptive]
    assert len(disruptive) == 1
    assert len(disruptive[0].evict) == 1
    for record in records.values():
        gpu = next(g for g in plan.gpus if g.node == record.node)
        assert [t.layout for t in record.gpus] == [gpu.after]
        assert [t.layout for t in record.before] == [gpu.before]
    # The node that evicts nobody goes first, so the evicted pod finds its new instance made
    # and no free instance it might take is destroyed after; then the one gaining two 3g.
    ordered = sorted(records.values(), key=lambda r: r.order)
    assert ordered[0].evict == ()
    assert ordered[1].benefit == 2
    assert ordered[1].evict


def record(node: str, order: int, step=NodeStep.PENDING, disruptive=True) -> NodeRollout:
    return NodeRollout(
        node=node,
        order=order,
        step=step,
        before=(),
        gpus=(),
        disruptive=disruptive,
    )


def test_at_most_max_unavailable_nodes_are_in_hand() -> None:
    records = [record("a", 0, NodeStep.EVICTING), record("b", 1), record("c", 2), record("d", 3)]
    assert nodes_to_start(
        records, max_unavailable=3, window_open=True, create_outside_window=True
    ) == ["b", "c"]
    assert (
        nodes_to_start(records, max_unavailable=1, window_open=True, create_outside_window=True)
        == []
    )


def test_outside_the_window_only_additions_start_and_only_if_allowed() -> None:
    records = [record("a", 0), record("b", 1, disruptive=False)]
    assert nodes_to_start(
        records, max_unavailable=2, window_open=False, create_outside_window=True
    ) == ["b"]
    assert (
        nodes_to_start(records, max_unavailable=2, window_open=False, create_outside_window=False)
        == []
    )


@pytest.mark.parametrize(
    ("steps", "phase"),
    [
        ([NodeStep.DONE, NodeStep.DONE], PlanPhase.READY),
        ([NodeStep.DONE, NodeStep.ROLLED_BACK], PlanPhase.DEGRADED),
        ([NodeStep.FAILED], PlanPhase.DEGRADED),
        ([NodeStep.DONE, NodeStep.VERIFYING], PlanPhase.PROGRESSING),
        ([NodeStep.DONE, NodeStep.PENDING], PlanPhase.WAITING),
        ([], PlanPhase.READY),
    ],
)
def test_phase_of_a_rollout(steps, phase) -> None:
    assert rollout_phase(record(str(n), n, s) for n, s in enumerate(steps)) is phase


def test_nodes_go_in_order_evicting_last_then_by_benefit_evictions_and_name(catalog) -> None:
    # #35: ordering by least benefit first, or evicting first, went unnoticed.
    from migplan.planner.plan import GpuPlan, Operation, OperationKind

    base = plan_for(catalog, {"n": ("-", {})}, pending=2)

    def changed(node: str, after: str, evict: tuple[str, ...] = ()) -> GpuPlan:
        ops = tuple(
            Operation(kind=OperationKind(kind), instance=i)
            for i in after.split("+")
            for kind in ("create-gi", "create-ci")
        )
        return GpuPlan(
            node=node,
            gpu=0,
            model="H100-80GB",
            before="-",
            after=after,
            operations=ops,
            evict=evict,
        )

    gpus = (
        changed("e1", "3g.40gb@0", ("ml/x", "ml/y")),
        changed("e2", "3g.40gb@0", ("ml/z",)),
        changed("b3", "3g.40gb@0+3g.40gb@4"),
        changed("a3", "3g.40gb@0+3g.40gb@4"),
        changed("a1", "3g.40gb@0"),  # less benefit than a3 and b3, though first by name
        changed("d0", "1g.10gb@0"),  # nothing the demand wants
        GpuPlan(node="z", gpu=0, model="H100-80GB", before="-", after="-"),
    )
    records = rollout_nodes(base.model_copy(update={"gpus": gpus}))
    assert [(r.node, r.order, r.benefit) for r in records] == [
        ("a3", 0, 2),
        ("b3", 1, 2),
        ("a1", 2, 1),
        ("d0", 3, 0),
        ("e2", 4, 1),
        ("e1", 5, 1),
    ]


def test_the_nodes_in_hand_are_taken_from_max_unavailable() -> None:
    records = [record("a", 0, NodeStep.VERIFYING), record("b", 1), record("c", 2)]
    assert nodes_to_start(
        records, max_unavailable=2, window_open=True, create_outside_window=False
    ) == ["b"]


def test_more_in_hand_than_max_unavailable_starts_nothing() -> None:
    """maxUnavailable lowered mid-rollout: the nodes in hand finish, none start."""
    records = [
        record("a", 0, NodeStep.EVICTING),
        record("b", 1, NodeStep.PARTITIONING),
        record("c", 2),
        record("d", 3),
    ]
    assert (
        nodes_to_start(records, max_unavailable=1, window_open=True, create_outside_window=True)
        == []
    )


def test_what_makes_a_node_disruptive(catalog) -> None:
    """An eviction or a destroyed GPU instance needs the window; enabling MIG on an idle GPU
    and creating instances do not."""
    from migplan.planner.plan import GpuPlan, Operation, OperationKind

    base = plan_for(catalog, {"n": ("-", {})}, pending=1)

    def gpu(node: str, kinds: tuple[str, ...], evict: tuple[str, ...] = ()) -> GpuPlan:
        ops = tuple(Operation(kind=OperationKind(k), instance="3g.40gb@0") for k in kinds)
        return GpuPlan(
            node=node,
            gpu=0,
            model="H100-80GB",
            before="-",
            after="3g.40gb@0",
            operations=ops,
            evict=evict,
        )

    gpus = (
        gpu("enable", ("enable-mig", "create-gi", "create-ci")),
        gpu("whole", ("enable-mig", "create-gi", "create-ci"), ("ml/whole",)),
        gpu("destroy", ("destroy-ci", "destroy-gi", "create-gi", "create-ci")),
        gpu("create", ("create-gi", "create-ci")),
    )
    records = rollout_nodes(base.model_copy(update={"gpus": gpus}))
    assert {r.node: r.disruptive for r in records} == {
        "enable": False,
        "whole": True,
        "destroy": True,
        "create": False,
    }
    assert not any(r.stale for r in records)


def test_a_record_from_an_older_status_reads_as_first_without_benefit_not_stale() -> None:
    old = NodeRollout.model_validate({"node": "a", "before": [], "gpus": [], "disruptive": True})
    assert (old.order, old.benefit, old.stale, old.step) == (0, 0, False, NodeStep.PENDING)
    with pytest.raises(ValueError, match="order"):
        NodeRollout.model_validate(
            {"node": "a", "before": [], "gpus": [], "disruptive": True, "order": -1}
        )


def test_an_unchanged_node_listed_first_does_not_hide_the_rest(catalog) -> None:
    from migplan.planner.plan import GpuPlan, Operation, OperationKind

    base = plan_for(catalog, {"n": ("-", {})}, pending=1)
    create = tuple(
        Operation(kind=OperationKind(k), instance="3g.40gb@0") for k in ("create-gi", "create-ci")
    )
    gpus = (
        GpuPlan(node="a", gpu=0, model="H100-80GB", before="-", after="-"),
        GpuPlan(
            node="b", gpu=0, model="H100-80GB", before="-", after="3g.40gb@0", operations=create
        ),
    )
    records = rollout_nodes(base.model_copy(update={"gpus": gpus}))
    assert [r.node for r in records] == ["b"]
    assert [
        r.node for r in rollout_nodes(base.model_copy(update={"gpus": gpus}), every_node=True)
    ] == [
        "b",
        "a",
    ]
