"""Reasons for unmet demand, whole: the numbers in them are the point (#35: tests checked
substrings, so a reason that ignored instances in use went unnoticed)."""

from __future__ import annotations

from migplan.planner.solver import plan
from migplan.planner.spec import PolicySpec


def reasons(gpus, demand, policy=None) -> list[str | None]:
    return [r.reason for r in plan(gpus, demand, policy or PolicySpec()).demand]


def test_free_demand_counts_out_the_instances_in_use(gpu, want) -> None:
    gpus = [gpu("H100-80GB", "3g.40gb@0+3g.40gb@4", pins={"3g.40gb@0": "ns/a"})]
    assert reasons(gpus, [want("3g.40gb", 2)]) == [
        "1 x 3g.40gb: at most 1 free instances of 3g.40gb fit on the covered H100-80GB GPUs"
    ]


def test_total_demand_counts_the_instances_in_use(gpu, want) -> None:
    gpus = [gpu("H100-80GB", "3g.40gb@0+3g.40gb@4", pins={"3g.40gb@0": "ns/a"})]
    assert reasons(gpus, [want("3g.40gb", 3, kind="total")]) == [
        "1 x 3g.40gb: at most 2 instances of 3g.40gb fit on the covered H100-80GB GPUs"
    ]


def test_pods_kept_in_place_are_named_as_the_limit(gpu, want) -> None:
    gpus = [gpu("H100-80GB", "1g.10gb@3", pins={"1g.10gb@3": "ns/a"})]
    assert reasons(gpus, [want("7g.80gb", 1)]) == [
        "1 x 7g.80gb: at most 0 free instances of 7g.80gb fit on the covered H100-80GB GPUs "
        "with in-use instances kept in place (policy disruption: none)"
    ]


def test_equal_weight_contention_and_the_limit_reached(gpu, want) -> None:
    gpus = [gpu("H100-80GB", node="a"), gpu("H100-80GB", node="b")]
    demand = [want("7g.80gb", 2), want("3g.40gb", 2, priority=2)]
    found = reasons(gpus, demand, PolicySpec(max_gpus_changed=1))
    assert found == [
        "2 x 7g.80gb: the slices it needs go to other demand of equal or higher weight "
        "(priority x compute slices); the plan is at policy limit maxGpusChanged=1",
        None,
    ]
