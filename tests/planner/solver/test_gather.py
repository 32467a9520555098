"""Gathering stranded instances onto one node for pods that need several there, on fleets
past EXACT_NODES (where the model counts such pods' instances fleet-wide)."""

from __future__ import annotations

import pytest

from migplan.planner.allocation import EXACT_NODES
from migplan.planner.api.spec import PolicySpec
from migplan.planner.assemble import demand_supply, gpu_key
from migplan.planner.hardware.layout import Layout
from migplan.planner.solver import plan
from migplan.planner.solver.gather import gather
from migplan.planner.validate import validate

WHOLE = "7g.40gb@0"
SPLIT = "4g.20gb@0+3g.20gb@4"


def fleet(gpu, *, split_pins: dict[str, str] | None = None) -> list:
    """Node a: two empty A100s and one split in two; node b: one empty A100; and EXACT_NODES
    nodes whose one A100 is in use whole, so the fleet is past EXACT_NODES."""
    gpus = [
        gpu("A100-40GB", node="a", index=0),
        gpu("A100-40GB", node="a", index=1),
        gpu("A100-40GB", SPLIT, node="a", index=2, pins=split_pins),
        gpu("A100-40GB", node="b", index=0),
    ]
    return gpus + [
        gpu("A100-40GB", WHOLE, node=f"busy-{n:02d}", pins={WHOLE: f"ns/busy-{n}"})
        for n in range(EXACT_NODES)
    ]


def spread(gpus: list) -> dict:
    """The empty GPUs made whole (two on a, one on b), the split one kept: three whole
    instances fleet-wide, but no node with three."""
    return {gpu_key(g): Layout.parse(WHOLE) if str(g.layout) == "-" else g.layout for g in gpus}


def demand_of(want, bundle) -> list:
    return [bundle(1, {"7g.40gb": 3}), want("4g.20gb", 1), want("3g.20gb", 1)]


def hosted(gpus, targets, demand) -> tuple[int, ...]:
    return demand_supply(demand, gpus, targets)[1].met


def test_the_plan_gets_a_pod_of_three_whole_gpus_a_node_with_three(gpu, want, bundle) -> None:
    gpus, demand = fleet(gpu), demand_of(want, bundle)
    assert hosted(gpus, spread(gpus), demand) == (0, 1, 1)  # the model's cheapest geometry
    result = plan(gpus, demand, PolicySpec())
    validate(result, gpus, demand, PolicySpec())
    assert [d.met for d in result.demand] == [1, 1, 1]
    assert result.solver.gap == 0
    # Best, but not proven: it changes 4 GPUs (a's three, b split), where the relaxation
    # (three whole instances anywhere) needed 3, so no stage after demand proves it.
    assert result.summary.gpus_changed == 4
    assert [s.value for s in result.solver.stages if s.name == "gpus changed"] == [3]
    assert result.solver.status == "FEASIBLE"
    whole = sorted(g.node for g in result.gpus if g.after == WHOLE and g.node in ("a", "b"))
    assert whole == ["a", "a", "a"]


def test_gathering_trades_targets_between_gpus_of_one_model(gpu, want, bundle) -> None:
    gpus, demand = fleet(gpu), demand_of(want, bundle)
    gathered = gather(gpus, spread(gpus), demand, PolicySpec())
    assert gathered is not None
    assert hosted(gpus, gathered, demand) == (1, 1, 1)
    by_node = {key: str(layout) for key, layout in gathered.items() if key[0] in ("a", "b")}
    assert by_node == {("a", 0): WHOLE, ("a", 1): WHOLE, ("a", 2): WHOLE, ("b", 0): SPLIT}


def test_no_trade_destroys_an_instance_in_use(gpu, want, bundle) -> None:
    gpus = fleet(gpu, split_pins={"3g.20gb@4": "ns/running"})
    assert gather(gpus, spread(gpus), demand_of(want, bundle), PolicySpec()) is None


@pytest.mark.parametrize(
    "policy",
    [
        PolicySpec(max_gpus_changed=10),
        PolicySpec(max_nodes_changed=10),
        PolicySpec(allowed_profiles={"A100-40GB": ("7g.40gb",)}),
    ],
    ids=["gpus-capped", "nodes-capped", "split-not-allowed-anew"],
)
def test_no_trade_the_policy_would_refuse(gpu, want, bundle, policy) -> None:
    # The split GPU is kept as it is: trading it changes one GPU more (where changes are
    # capped), and moving its split to node b's empty GPU creates 4g/3g instances anew.
    gpus = fleet(gpu)
    assert gather(gpus, spread(gpus), demand_of(want, bundle), policy) is None


def test_nothing_to_gather_where_every_bundle_is_hosted(gpu, want, bundle) -> None:
    gpus = fleet(gpu)
    demand = [bundle(1, {"7g.40gb": 2}), want("4g.20gb", 1)]
    assert gather(gpus, spread(gpus), demand, PolicySpec()) is None
