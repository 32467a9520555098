"""Reasons for unmet demand, whole: the numbers in them are the point (#35: tests checked
substrings, so a reason that ignored instances in use went unnoticed)."""

from __future__ import annotations

from migplan.planner.api.spec import PolicySpec
from migplan.planner.solver import plan


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


# ---- what the first four did not pin down (scripts/mutation, #35) ---------------------------


def test_capacity_counts_every_gpu_of_a_model_and_pins_only_where_they_block(gpu, want) -> None:
    blocked = gpu(
        "H100-80GB",
        "1g.10gb@3+1g.10gb@6",
        node="a",
        pins={"1g.10gb@3": "ns/p", "1g.10gb@6": "ns/q"},
    )
    gpus = [blocked, gpu("H100-80GB", node="b")]
    assert reasons(gpus, [want("3g.40gb", 3)]) == [
        "1 x 3g.40gb: at most 2 free instances of 3g.40gb fit on the covered H100-80GB GPUs "
        "with in-use instances kept in place (policy disruption: none)"
    ]


def test_a_large_fleet_without_pins_names_no_pins(gpu, want) -> None:
    gpus = [gpu("H100-80GB", node=f"n{i:02}") for i in range(40)]
    assert reasons(gpus, [want("1g.10gb", 300)]) == [
        "20 x 1g.10gb: at most 280 free instances of 1g.10gb fit on the covered H100-80GB GPUs"
    ]


def test_in_use_counts_only_the_profile_asked_for(gpu, want) -> None:
    gpus = [
        gpu(
            "H100-80GB",
            "1g.10gb@0+2g.20gb@2+3g.40gb@4",
            pins={"1g.10gb@0": "ns/a", "2g.20gb@2": "ns/b", "3g.40gb@4": "ns/c"},
        )
    ]
    assert reasons(gpus, [want("2g.20gb", 3)]) == [
        "3 x 2g.20gb: at most 0 free instances of 2g.20gb fit on the covered H100-80GB GPUs "
        "with in-use instances kept in place (policy disruption: none)"
    ]


def test_room_enough_but_taken_by_heavier_demand_is_contention(gpu, want) -> None:
    gpus = [gpu("H100-80GB", node="a"), gpu("H100-80GB", node="b")]
    demand = [want("7g.80gb", 1), want("3g.40gb", 4, priority=2)]
    assert reasons(gpus, demand) == [
        "1 x 7g.80gb: the slices it needs go to other demand of equal or higher weight "
        "(priority x compute slices)",
        None,
    ]


def test_an_alternative_no_covered_gpu_has_adds_no_capacity(gpu, want) -> None:
    gpus = [gpu("H100-80GB")]
    assert reasons(gpus, [want("1g.10gb", 8, alternatives=("1g.5gb",))]) == [
        "1 x 1g.10gb or 1g.5gb: at most 7 free instances of 1g.10gb or 1g.5gb fit on the "
        "covered H100-80GB GPUs"
    ]


def test_a_bundle_needing_a_profile_no_gpu_offers_says_so(gpu, bundle) -> None:
    (reason,) = reasons([gpu("H100-80GB")], [bundle(1, {"1g.10gb": 1, "1g.5gb": 1})])
    assert reason == (
        "1 pods of 1 x 1g.10gb + 1 x 1g.5gb: no covered GPU model offers 1 x 1g.5gb "
        "(or policy.allowedProfiles excludes it)"
    )


def test_a_limit_is_reached_at_its_value_however_large() -> None:
    from migplan.planner.solver.explain import Explainer

    explainer = Explainer(gpus=[], classes=[], pools=None, policy=PolicySpec(max_gpus_changed=300))
    explainer.note_plan(gpus_changed=int("300"), nodes_touched=5)
    assert explainer.limits_reached == ["maxGpusChanged=300"]


def test_in_use_instances_of_other_profiles_are_not_counted_out(gpu, want) -> None:
    gpus = [gpu("H100-80GB", "3g.40gb@4", pins={"3g.40gb@4": "ns/c"})]
    assert reasons(gpus, [want("1g.10gb", 5)]) == [
        "1 x 1g.10gb: at most 4 free instances of 1g.10gb fit on the covered H100-80GB GPUs "
        "with in-use instances kept in place (policy disruption: none)"
    ]


def test_a_profile_a_model_may_not_make_is_not_blamed_on_disruption_none(gpu, want) -> None:
    """Under evict, capacity falls short of the empty GPUs' only where policy forbids the
    profile on a model: that is not pods kept in place."""
    gpus = [gpu("H100-80GB", node="h"), gpu("A100-80GB", node="a")]
    policy = PolicySpec(disruption="evict", allowed_profiles={"A100-80GB": ["2g.20gb"]})
    assert reasons(gpus, [want("1g.10gb", 20)], policy) == [
        "13 x 1g.10gb: at most 7 free instances of 1g.10gb fit on the covered H100-80GB GPUs"
    ]


def test_a_profile_outside_the_planned_ones_has_no_capacity() -> None:
    from migplan.planner.solver.explain import Explainer
    from migplan.planner.solver.pools import build_pools

    pools = build_pools([], profiles=["1g.10gb"], policy=PolicySpec())
    explainer = Explainer(gpus=[], classes=[], pools=pools, policy=PolicySpec())
    assert explainer.capacity("7g.80gb") == 0


def test_in_use_counts_every_gpu_of_a_class(gpu, want) -> None:
    """Two GPUs alike (one class of two) each with a used 3g.40gb: two in use, not one."""
    gpus = [
        gpu("H100-80GB", "3g.40gb@0+3g.40gb@4", node=node, pins={"3g.40gb@0": f"ns/{node}"})
        for node in ("a", "b")
    ]
    assert reasons(gpus, [want("3g.40gb", 3)]) == [
        "1 x 3g.40gb: at most 2 free instances of 3g.40gb fit on the covered H100-80GB GPUs"
    ]


def test_a_limit_not_reached_is_not_named() -> None:
    from migplan.planner.solver.explain import Explainer

    explainer = Explainer(gpus=[], classes=[], pools=None, policy=PolicySpec(max_gpus_changed=3))
    explainer.note_plan(gpus_changed=1, nodes_touched=1)
    assert explainer.limits_reached == []
