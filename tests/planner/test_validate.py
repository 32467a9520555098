"""The validator catches each way a plan can be wrong (tampered copies of a correct plan)."""

from __future__ import annotations

import pytest

from migplan.planner.api.spec import Disruption, PolicySpec
from migplan.planner.plan import Operation, OperationKind
from migplan.planner.solver import plan
from migplan.planner.validate import InvalidPlanError, problems_of, validate

EVICT = PolicySpec(disruption=Disruption.EVICT)


@pytest.fixture
def case(gpu, want):
    gpus = [
        gpu("H100-80GB", "1g.10gb@3", node="a", pins={"1g.10gb@3": "ns/small"}),
        gpu("H100-80GB", "1g.10gb@0+1g.10gb@1", node="b", pins={"1g.10gb@0": "ns/other"}),
    ]
    demand = [want("7g.80gb", 1)]
    result = plan(gpus, demand, EVICT)
    assert problems_of(result, gpus, demand, EVICT) == []
    assert result.gpus[0].evict == ("ns/small",)
    return gpus, demand, result


def op(kind: str, instance: str | None = None) -> Operation:
    return Operation(kind=OperationKind(kind), instance=instance)


def tamper_gpu(result, index: int, **changes):
    gpus = list(result.gpus)
    gpus[index] = gpus[index].model_copy(update=changes)
    return result.model_copy(update={"gpus": tuple(gpus)})


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"after": "7g.80gb@0+1g.10gb@3"}, "target layout 7g.80gb@0+1g.10gb@3 is not valid"),
        (
            {
                "operations": (
                    op("destroy-gi", "1g.10gb@3"),
                    op("create-gi", "7g.80gb@0"),
                    op("create-ci", "7g.80gb@0"),
                )
            },
            "its compute instance must be destroyed first",
        ),
        (
            {
                "operations": (
                    op("destroy-ci", "1g.10gb@3"),
                    op("destroy-gi", "1g.10gb@3"),
                    op("create-gi", "7g.80gb@0"),
                )
            },
            "instances left without a compute instance: 7g.80gb@0",
        ),
        (
            {
                "operations": (
                    op("create-gi", "7g.80gb@0"),
                    op("create-ci", "7g.80gb@0"),
                    op("destroy-ci", "1g.10gb@3"),
                    op("destroy-gi", "1g.10gb@3"),
                )
            },
            "does not fit next to 1g.10gb@3",
        ),
        ({"operations": ()}, "operations lead to 1g.10gb@3, not to the target 7g.80gb@0"),
        ({"evict": ()}, "evicts [] but destroying in-use instances needs exactly ['ns/small']"),
        ({"evict": ("ns/small", "ns/innocent")}, "evicts ['ns/small', 'ns/innocent']"),
        ({"evict": ("ns/small", "ns/zz")}, "evicts ['ns/small', 'ns/zz']"),
        ({"model": "A30"}, "plan says A30 1g.10gb@3, inventory has H100-80GB 1g.10gb@3"),
        ({"model": "RTX-PRO-6000"}, "plan says RTX-PRO-6000 1g.10gb@3, inventory has"),
        ({"before": "-"}, "plan says H100-80GB -, inventory has H100-80GB 1g.10gb@3"),
    ],
)
def test_gpu_level_problems(case, changes, message) -> None:
    gpus, demand, result = case
    found = problems_of(tamper_gpu(result, 0, **changes), gpus, demand, EVICT)
    assert any(message in str(p) for p in found), found


def test_evictions_need_policy_evict(case) -> None:
    gpus, demand, result = case
    found = problems_of(result, gpus, demand, PolicySpec())
    assert any("under disruption: none" in str(p) for p in found)


def test_limits(case) -> None:
    gpus, demand, result = case
    found = problems_of(
        result, gpus, demand, PolicySpec(disruption=Disruption.EVICT, max_gpus_changed=0)
    )
    assert any("1 GPUs change, maxGpusChanged is 0" in str(p) for p in found)


def test_demand_reporting(case) -> None:
    gpus, demand, result = case
    inflated = result.model_copy(
        update={"demand": (result.demand[0].model_copy(update={"met": 0}),)}
    )
    found = problems_of(inflated, gpus, demand, EVICT)
    assert any("reports 0 met; the targets allow 1 for 1 requested" in str(p) for p in found)


@pytest.mark.parametrize("evictions", [0, 5])
def test_summary_must_match(case, evictions) -> None:
    gpus, demand, result = case
    wrong = result.model_copy(
        update={"summary": result.summary.model_copy(update={"evictions": evictions})}
    )
    assert any("summary" in str(p) for p in problems_of(wrong, gpus, demand, EVICT))


def test_a_plan_read_back_from_its_json_validates(case) -> None:
    # Equal strings that are other objects: the validator compares values, not identities.
    from migplan.planner.plan import Plan

    gpus, demand, result = case
    again = Plan.model_validate_json(result.model_dump_json())
    assert problems_of(again, gpus, demand, EVICT) == []


def test_evicted_pods_need_a_place(gpu, want) -> None:
    gpus = [gpu("H100-80GB", "1g.10gb@3", pins={"1g.10gb@3": "ns/small"})]
    demand = [want("7g.80gb", 1)]
    result = plan(gpus, demand, EVICT)  # keeps the pod: nowhere else to go
    forced = tamper_gpu(
        result,
        0,
        after="7g.80gb@0",
        evict=("ns/small",),
        operations=(
            op("destroy-ci", "1g.10gb@3"),
            op("destroy-gi", "1g.10gb@3"),
            op("create-gi", "7g.80gb@0"),
            op("create-ci", "7g.80gb@0"),
        ),
    )
    forced = forced.model_copy(
        update={
            "demand": (forced.demand[0].model_copy(update={"met": 1}),),
            "summary": forced.summary.model_copy(
                update={"gpus_changed": 1, "nodes_touched": 1, "evictions": 1, "met": 1}
            ),
        }
    )
    found = problems_of(forced, gpus, demand, EVICT)
    assert [str(p) for p in found] == [
        "profile 1g.10gb: 1 pods use it but the targets hold only 0: evicted pods could not be "
        "rescheduled"
    ]


def test_validate_raises_with_the_list(case) -> None:
    gpus, demand, result = case
    with pytest.raises(InvalidPlanError, match=r"^invalid plan: a/gpu-0: evicts \[\] but"):
        validate(tamper_gpu(result, 0, evict=()), gpus, demand, EVICT)


@pytest.fixture
def either_or(gpu, want):
    gpus = [gpu("A30", "-")]
    demand = [want("2g.12gb", 2, priority=2, alternatives=("1g.6gb",)), want("2g.12gb", 1)]
    result = plan(gpus, demand, PolicySpec())
    assert problems_of(result, gpus, demand, PolicySpec()) == []
    assert [r.met for r in result.demand] == [2, 1]
    assert result.demand[0].served == {"1g.6gb": 2}
    return gpus, demand, result


@pytest.mark.parametrize(
    ("served", "message"),
    [
        ({"4g.24gb": 2}, "served by 4g.24gb, which is not one of its profiles"),
        ({"1g.6gb": 1}, "does not add up to 2 instances met"),
        ({"2g.12gb": 2}, "reports 3 met; the targets provide 1"),
        (None, "does not add up to 2 instances met"),
        ({"1g.6gb": 3}, "does not add up to 2 instances met"),
        ({"1g.6gb": 3, "2g.12gb": -1}, "does not add up to 2 instances met"),
    ],
)
def test_either_or_reporting(either_or, served, message) -> None:
    gpus, demand, result = either_or
    tampered = result.model_copy(
        update={
            "demand": (result.demand[0].model_copy(update={"served": served}), result.demand[1])
        }
    )
    found = problems_of(tampered, gpus, demand, PolicySpec())
    assert any(message in str(p) for p in found), found


def test_either_or_must_be_allocated_as_well_as_the_targets_allow(either_or) -> None:
    gpus, demand, result = either_or
    # Two 2g for the first item are within supply, but leave the second item nothing.
    worse = result.model_copy(
        update={
            "demand": (
                result.demand[0].model_copy(update={"served": {"2g.12gb": 1, "1g.6gb": 1}}),
                result.demand[1].model_copy(update={"met": 0}),
            )
        }
    )
    found = problems_of(worse, gpus, demand, PolicySpec())
    assert any(
        "reports 0 met; the targets allow 1 for 1 requested (weighted demand met 4, possible 6)"
        in str(p)
        for p in found
    ), found


def test_a_bundle_pod_needs_one_node_with_all_its_instances(gpu, bundle) -> None:
    gpus = [gpu("A30", "1g.6gb@0", node="a"), gpu("A30", "1g.6gb@0", node="b")]
    demand = [bundle(1, {"1g.6gb": 2})]
    result = plan(gpus, demand, PolicySpec(disruption=Disruption.NONE, max_gpus_changed=0))
    assert problems_of(result, gpus, demand, PolicySpec()) == []
    assert result.demand[0].met == 0
    claimed = result.model_copy(
        update={
            "demand": (result.demand[0].model_copy(update={"met": 1, "served": {"1g.6gb": 2}}),)
        }
    )
    found = problems_of(claimed, gpus, demand, PolicySpec())
    assert any("one node each, the targets host 0" in str(p) for p in found), found


def test_destroying_a_shared_instance_evicts_every_pod_sharing_it(gpu, want) -> None:
    # A ResourceClaim reserved for several pods: all of them use the instance (#29, reading).
    shared = {"1g.10gb@3": ("ns/b", "ns/c")}
    gpus = [
        gpu("H100-80GB", "1g.10gb@3", pins={"1g.10gb@3": "ns/a"}, sharers=shared),
        gpu("H100-80GB", "-", index=1),
    ]
    result = plan(gpus, [want("4g.40gb", 2)], EVICT)
    (changed,) = [g for g in result.gpus if g.gpu == 0]
    assert sorted(changed.evict) == ["ns/a", "ns/b", "ns/c"]
    assert result.summary.evictions == 3
    only_first = tamper_gpu(result, 0, evict=("ns/a",))
    found = problems_of(only_first, gpus, [want("4g.40gb", 2)], EVICT)
    assert any("needs exactly ['ns/a', 'ns/b', 'ns/c']" in str(p) for p in found), found


def test_the_planner_would_rather_evict_one_pod_than_three(gpu, want) -> None:
    gpus = [
        gpu(
            "H100-80GB",
            "1g.10gb@3",
            pins={"1g.10gb@3": "ns/a"},
            sharers={"1g.10gb@3": ("ns/b", "ns/c")},
        ),
        gpu("H100-80GB", "1g.10gb@3", index=1, pins={"1g.10gb@3": "ns/d"}),
    ]
    result = plan(gpus, [want("4g.40gb", 1)], EVICT)
    assert [sorted(g.evict) for g in result.gpus if g.evict] == [["ns/d"]]


# ---- one broken plan per rule (#35): each fails without the rule it names -------------------


@pytest.mark.parametrize("node", ["elsewhere", "0"])  # sorting after and before "a"
def test_a_plan_for_other_gpus_is_refused(case, node) -> None:
    gpus, demand, result = case
    moved = tamper_gpu(result, 0, node=node)
    found = problems_of(moved, gpus, demand, EVICT)
    assert [p.where for p in found] == ["plan"]
    assert f"covers GPUs [('{node}', 0), ('b', 0)]" in str(found[0])


@pytest.mark.parametrize("before", ["7g.80gb@0", "-"])
def test_a_plan_that_misreads_the_current_layout_is_refused(case, before) -> None:
    gpus, demand, result = case
    found = problems_of(tamper_gpu(result, 0, before=before), gpus, demand, EVICT)
    assert any(f"plan says H100-80GB {before}, inventory has" in str(p) for p in found), found


def test_allowed_profiles_bind_new_instances_only(gpu, want) -> None:
    # Destroying an instance of an excluded profile is fine; creating one is not.
    gpus = [gpu("H100-80GB", "1g.10gb@3"), gpu("H100-80GB", "1g.10gb@0", index=1)]
    demand = [want("7g.80gb", 1)]
    only_7g = PolicySpec(allowed_profiles={"H100-80GB": ("7g.80gb",)})
    result = plan(gpus, demand, only_7g)
    assert [g.after for g in result.gpus].count("7g.80gb@0") == 1
    assert problems_of(result, gpus, demand, only_7g) == []
    changed = next(i for i, g in enumerate(result.gpus) if g.operations)
    sneaked = tamper_gpu(
        result,
        changed,
        after="1g.10gb@0",
        operations=(
            *result.gpus[changed].operations[:2],  # destroy what was there
            op("create-gi", "1g.10gb@0"),
            op("create-ci", "1g.10gb@0"),
        ),
    )
    found = problems_of(sneaked, gpus, demand, only_7g)
    assert any("1g.10gb@0 uses a profile policy.allowedProfiles excludes" in str(p) for p in found)


def test_enable_mig_comes_first_on_a_gpu_with_mig_off(gpu, want) -> None:
    gpus = [gpu("H100-80GB", "-", mig_enabled=False)]
    demand = [want("3g.40gb", 1)]
    result = plan(gpus, demand, PolicySpec())
    ops = result.gpus[0].operations
    assert ops[0].kind is OperationKind.ENABLE_MIG
    assert problems_of(result, gpus, demand, PolicySpec()) == []
    late = tamper_gpu(result, 0, operations=(*ops[1:2], ops[0], *ops[2:]))
    found = problems_of(late, gpus, demand, PolicySpec())
    assert any("enable-mig must come first" in str(p) for p in found), found
    assert any("MIG is not enabled" in str(p) for p in found), found


@pytest.mark.parametrize("copies", [2, 0])
def test_more_or_fewer_results_than_demand_items_is_refused(case, copies) -> None:
    gpus, demand, result = case
    changed = result.model_copy(update={"demand": result.demand * copies})
    found = problems_of(changed, gpus, demand, EVICT)
    assert [str(p) for p in found] == [f"demand: {copies} results for 1 items"]


@pytest.mark.parametrize(
    "changes", [{"profile": "1g.10gb"}, {"requested": 0}, {"alternatives": ("3g.40gb",)}]
)
def test_a_result_for_another_demand_item_is_refused(case, changes) -> None:
    gpus, demand, result = case
    other = result.model_copy(update={"demand": (result.demand[0].model_copy(update=changes),)})
    found = problems_of(other, gpus, demand, EVICT)
    assert any("does not match the demand item it reports" in str(p) for p in found), found


def test_met_above_requested_is_refused(case) -> None:
    gpus, demand, result = case
    over = result.model_copy(update={"demand": (result.demand[0].model_copy(update={"met": 2}),)})
    found = problems_of(over, gpus, demand, EVICT)
    assert any("met 2 of 1" in str(p) for p in found), found


def test_a_whole_gpu_rebuild_destroys_every_instance(gpu, want) -> None:
    rebuild = PolicySpec(whole_gpu_rebuild=True)
    gpus = [gpu("H100-80GB", "1g.10gb@0+1g.10gb@1")]
    demand = [want("2g.20gb", 1)]
    result = plan(gpus, demand, rebuild)
    assert problems_of(result, gpus, demand, rebuild) == []
    partial = tamper_gpu(
        result,
        0,
        after="1g.10gb@0+2g.20gb@2",
        operations=(
            op("destroy-ci", "1g.10gb@1"),
            op("destroy-gi", "1g.10gb@1"),
            op("create-gi", "2g.20gb@2"),
            op("create-ci", "2g.20gb@2"),
        ),
    )
    found = problems_of(partial, gpus, demand, rebuild)
    assert any(
        "whole-GPU rebuild: a changed GPU must destroy every instance" in str(p) for p in found
    )
    assert not problems_of(partial, gpus, demand, PolicySpec())


@pytest.mark.parametrize(("limit", "refused"), [(2, False), (1, False), (0, True)])
def test_change_limits_at_their_bound(case, limit, refused) -> None:
    gpus, demand, result = case
    assert result.summary.gpus_changed == result.summary.nodes_touched == 1
    for policy, says in (
        (PolicySpec(disruption=Disruption.EVICT, max_gpus_changed=limit), "maxGpusChanged"),
        (PolicySpec(disruption=Disruption.EVICT, max_nodes_changed=limit), "maxNodesChanged"),
    ):
        found = problems_of(result, gpus, demand, policy)
        assert any(says in str(p) for p in found) is refused, found


def test_two_nodes_changed_under_max_nodes_changed_one(gpu, want) -> None:
    gpus = [gpu("H100-80GB", "-", node="a"), gpu("H100-80GB", "-", node="b")]
    demand = [want("7g.80gb", 2)]
    result = plan(gpus, demand, PolicySpec())
    assert result.summary.nodes_touched == 2
    one = PolicySpec(max_nodes_changed=1)
    found = problems_of(result, gpus, demand, one)
    assert any("2 nodes change, maxNodesChanged is 1" in str(p) for p in found), found


def test_free_demand_cannot_be_met_by_instances_in_use(gpu, want) -> None:
    # total - pinned: one in use, one free -> 1 free; all in use -> 0 free.
    frozen = PolicySpec(max_gpus_changed=0)
    for layout, pins, free in (
        ("1g.10gb@0+1g.10gb@1", {"1g.10gb@0": "ns/a"}, 1),
        ("1g.10gb@0", {"1g.10gb@0": "ns/a"}, 0),
    ):
        gpus = [gpu("H100-80GB", layout, pins=pins)]
        demand = [want("1g.10gb", 2)]
        result = plan(gpus, demand, frozen)
        assert result.demand[0].met == free
        claimed = result.model_copy(
            update={"demand": (result.demand[0].model_copy(update={"met": free + 1}),)}
        )
        found = problems_of(claimed, gpus, demand, frozen)
        assert any(f"the targets provide {free}" in str(p) for p in found), found


def test_an_equally_weighted_allocation_is_as_good(gpu, want) -> None:
    # One free instance, two items of equal weight: either may have it.
    frozen = PolicySpec(max_gpus_changed=0)
    gpus = [gpu("A30", "1g.6gb@0")]
    demand = [want("1g.6gb", 1), want("1g.6gb", 1, alternatives=("2g.12gb",))]
    result = plan(gpus, demand, frozen)
    assert sorted(r.met for r in result.demand) == [0, 1]
    first, second = result.demand
    swapped = result.model_copy(
        update={
            "demand": (
                first.model_copy(update={"met": second.met}),
                second.model_copy(update={"met": first.met, "served": {"1g.6gb": first.met}}),
            )
        }
    )
    assert problems_of(swapped, gpus, demand, frozen) == []


@pytest.mark.parametrize(
    ("count", "tail"),
    [(3, ""), (5, ""), (6, " (and 1 more)"), (7, " (and 2 more)"), (11, " (and 6 more)")],
)
def test_an_invalid_plan_error_names_five_problems_and_counts_the_rest(count, tail) -> None:
    from migplan.planner.validate import Problem, listing

    problems = [Problem(f"gpu-{n}", "wrong") for n in range(count)]
    text = listing(problems)
    assert text.endswith(f"gpu-{min(count, 5) - 1}: wrong{tail}")
    assert text.count("wrong") == min(count, 5)


def test_an_operation_on_no_instance_is_refused(case) -> None:
    gpus, demand, result = case
    ops = (op("destroy-ci", "nonsense"), *result.gpus[0].operations)
    found = problems_of(tamper_gpu(result, 0, operations=ops), gpus, demand, EVICT)
    assert any("destroy-ci nonsense: not an instance" in str(p) for p in found), found


def test_a_destroy_after_a_create_is_refused(case) -> None:
    gpus, demand, result = case
    ops = result.gpus[0].operations
    creates = tuple(o for o in ops if o.kind.value.startswith("create"))
    destroys = tuple(o for o in ops if o.kind.value.startswith("destroy"))
    found = problems_of(tamper_gpu(result, 0, operations=creates + destroys), gpus, demand, EVICT)
    assert any("destroys must all come before the first create" in str(p) for p in found), found


def test_free_supply_is_counted_exactly(gpu, want) -> None:
    # Three free-or-used 1g, one in use: two free (a shift would give one).
    frozen = PolicySpec(max_gpus_changed=0)
    gpus = [gpu("H100-80GB", "1g.10gb@0+1g.10gb@1+1g.10gb@2", pins={"1g.10gb@0": "ns/a"})]
    demand = [want("1g.10gb", 3)]
    result = plan(gpus, demand, frozen)
    assert result.demand[0].met == 2
    assert problems_of(result, gpus, demand, frozen) == []


def test_a_short_plan_names_the_item_it_shorted_and_no_other(gpu, want) -> None:
    # Weighted 6 of a possible 7: the 1g item is short; the 2g item got what it could.
    frozen = PolicySpec(max_gpus_changed=0)
    gpus = [gpu("H100-80GB", "2g.20gb@0+2g.20gb@2+2g.20gb@4+1g.10gb@6")]
    demand = [want("2g.20gb", 3), want("1g.10gb", 1)]
    result = plan(gpus, demand, frozen)
    assert [r.met for r in result.demand] == [3, 1]
    shorted = result.model_copy(
        update={"demand": (result.demand[0], result.demand[1].model_copy(update={"met": 0}))}
    )
    found = problems_of(shorted, gpus, demand, frozen)
    assert [str(p) for p in found] == [
        "demand nvidia.com/mig-1g.10gb (free): reports 0 met; the targets allow 1 for 1 requested "
        "(weighted demand met 6, possible 7)"
    ]


def test_supply_given_to_the_lighter_item_names_only_the_heavier(gpu, want) -> None:
    frozen = PolicySpec(max_gpus_changed=0)
    gpus = [gpu("H100-80GB", "1g.10gb@0")]
    demand = [want("1g.10gb", 1, priority=2), want("1g.10gb", 1)]
    result = plan(gpus, demand, frozen)
    assert [r.met for r in result.demand] == [1, 0]
    swapped = result.model_copy(
        update={
            "demand": (
                result.demand[0].model_copy(update={"met": 0}),
                result.demand[1].model_copy(update={"met": 1}),
            )
        }
    )
    found = [str(p) for p in problems_of(swapped, gpus, demand, frozen)]
    assert len(found) == 1, found
    assert "reports 0 met; the targets allow 1" in found[0]


def test_a_bundle_reported_beside_demand_that_took_its_instances(gpu, want, bundle) -> None:
    frozen = PolicySpec(max_gpus_changed=0)
    gpus = [gpu("A30", "1g.6gb@0+1g.6gb@1")]
    demand = [want("1g.6gb", 1, priority=5), bundle(1, {"1g.6gb": 2})]
    result = plan(gpus, demand, frozen)
    assert [r.met for r in result.demand] == [1, 0]
    both = result.model_copy(
        update={
            "demand": (
                result.demand[0],
                result.demand[1].model_copy(update={"met": 1, "served": {"1g.6gb": 2}}),
            )
        }
    )
    found = problems_of(both, gpus, demand, frozen)
    assert any(
        "reports 1 pods of 2 x 1g.6gb met; placed one node each, the targets host 0 beside "
        "the other demand" in str(p)
        for p in found
    ), found


def test_a_met_bundle_reports_every_instance_it_takes(gpu, bundle) -> None:
    frozen = PolicySpec(max_gpus_changed=0)
    seven = "+".join(f"1g.10gb@{s}" for s in range(7))
    gpus = [gpu("H100-80GB", seven)]
    demand = [bundle(2, {"1g.10gb": 3})]
    result = plan(gpus, demand, frozen)
    assert (result.demand[0].met, result.demand[0].served) == (2, {"1g.10gb": 6})
    assert problems_of(result, gpus, demand, frozen) == []


def test_a_bundle_may_report_fewer_pods_than_its_nodes_could_host(gpu, bundle) -> None:
    frozen = PolicySpec(max_gpus_changed=0)
    gpus = [gpu("A30", "1g.6gb@0+1g.6gb@1+1g.6gb@2+1g.6gb@3")]
    demand = [bundle(1, {"1g.6gb": 2})]  # one pod asked; the node could host two
    result = plan(gpus, demand, frozen)
    assert result.demand[0].met == 1
    assert problems_of(result, gpus, demand, frozen) == []


def test_a_compute_instance_needs_its_gpu_instance(case) -> None:
    gpus, demand, result = case
    ops = (*result.gpus[0].operations, op("create-ci", "1g.10gb@6"))
    found = problems_of(tamper_gpu(result, 0, operations=ops), gpus, demand, EVICT)
    assert any(
        "create-ci 1g.10gb@6: needs its GPU instance, without a compute instance" in str(p)
        for p in found
    ), found


def test_a_profile_reported_as_serving_none_is_accepted(either_or) -> None:
    gpus, demand, result = either_or
    listed = result.model_copy(
        update={
            "demand": (
                result.demand[0].model_copy(update={"served": {"1g.6gb": 2, "2g.12gb": 0}}),
                result.demand[1],
            )
        }
    )
    assert problems_of(listed, gpus, demand, PolicySpec()) == []


def test_evicted_pods_are_rehosted_before_bundles_are_placed(gpu, bundle) -> None:
    # The 4g can only go on node a, evicting its 1g pod, which moves to one of node b's two
    # free 1g: node b is then left one, too few for the bundle's two.
    evict = PolicySpec(disruption=Disruption.EVICT)
    gpus = [
        gpu("A30", "1g.6gb@0", node="a", pins={"1g.6gb@0": "ns/moved"}),
        gpu("A30", "1g.6gb@0+1g.6gb@1+2g.12gb@2", node="b", pins={"2g.12gb@2": "ns/keep"}),
    ]
    from migplan.planner.demand import DemandItem, DemandKind

    demand = [DemandItem("4g.24gb", 1, 9, DemandKind.FREE), bundle(1, {"1g.6gb": 2})]
    result = plan(gpus, demand, evict)
    assert [g.evict for g in result.gpus] == [("ns/moved",), ()]
    assert [r.met for r in result.demand] == [1, 0]
    assert problems_of(result, gpus, demand, evict) == []
    claimed = result.model_copy(
        update={
            "demand": (
                result.demand[0],
                result.demand[1].model_copy(update={"met": 1, "served": {"1g.6gb": 2}}),
            )
        }
    )
    found = problems_of(claimed, gpus, demand, evict)
    assert any("one node each, the targets host 0" in str(p) for p in found), found


def test_problems_are_values() -> None:
    from migplan.planner.validate import Problem

    assert len({Problem("a", "x"), Problem("a", "x")}) == 1


def test_many_demand_items_are_matched_by_count_not_identity(gpu, want) -> None:
    # 300 results for 300 items: counts past CPython's small-int cache compare equal too.
    gpus = [gpu("H100-80GB")]
    demand = [want("1g.10gb", 1, priority=1 + n % 3) for n in range(300)]
    result = plan(gpus, demand, PolicySpec())
    assert len(result.demand) == 300
    assert problems_of(result, gpus, demand, PolicySpec()) == []


def test_an_equally_weighted_plan_may_serve_singles_instead_of_a_bundle(gpu, want, bundle) -> None:
    # One node with two free 1g: the bundle's pod (weight 2) or two single pods (1 each).
    frozen = PolicySpec(max_gpus_changed=0)
    gpus = [gpu("A30", "1g.6gb@0+1g.6gb@1")]
    demand = [bundle(1, {"1g.6gb": 2}), want("1g.6gb", 2)]
    result = plan(gpus, demand, frozen)
    singles = result.model_copy(
        update={
            "demand": (
                result.demand[0].model_copy(update={"met": 0, "served": {}}),
                result.demand[1].model_copy(update={"met": 2}),
            )
        }
    )
    assert problems_of(singles, gpus, demand, frozen) == []


def test_a_bundle_beside_a_pod_kept_in_place(gpu, bundle) -> None:
    frozen = PolicySpec(max_gpus_changed=0)
    gpus = [gpu("A30", "1g.6gb@0+1g.6gb@1+1g.6gb@2", pins={"1g.6gb@0": "ns/a"})]
    demand = [bundle(1, {"1g.6gb": 2})]
    result = plan(gpus, demand, frozen)
    assert result.demand[0].met == 1
    assert problems_of(result, gpus, demand, frozen) == []


def test_negative_met_is_refused(case) -> None:
    gpus, demand, result = case
    below = result.model_copy(update={"demand": (result.demand[0].model_copy(update={"met": -1}),)})
    found = problems_of(below, gpus, demand, EVICT)
    assert any("met -1 of 1" in str(p) for p in found), found


def test_one_evicted_pod_takes_one_instance_where_it_moves(gpu, bundle) -> None:
    # Node b's four free 1g less the evicted pod's one leave three: one bundle pod of three.
    from migplan.planner.demand import DemandItem, DemandKind

    evict = PolicySpec(disruption=Disruption.EVICT)
    gpus = [
        gpu("A30", "1g.6gb@0", node="a", pins={"1g.6gb@0": "ns/moved"}),
        *(
            gpu(
                "A30",
                "1g.6gb@0+1g.6gb@1+2g.12gb@2",
                node="b",
                index=i,
                pins={"2g.12gb@2": f"ns/k{i}"},
            )
            for i in range(2)
        ),
    ]
    demand = [DemandItem("4g.24gb", 1, 9, DemandKind.FREE), bundle(1, {"1g.6gb": 3})]
    result = plan(gpus, demand, evict)
    assert [r.met for r in result.demand] == [1, 1]
    assert result.gpus[0].evict == ("ns/moved",)
    assert problems_of(result, gpus, demand, evict) == []


def test_pods_kept_in_place_take_their_instances_from_the_node(gpu, bundle) -> None:
    frozen = PolicySpec(max_gpus_changed=0)
    gpus = [gpu("A30", "1g.6gb@0+1g.6gb@1+1g.6gb@2", pins={"1g.6gb@0": "ns/a", "1g.6gb@1": "ns/b"})]
    demand = [bundle(1, {"1g.6gb": 2})]
    result = plan(gpus, demand, frozen)
    assert result.demand[0].met == 0
    assert problems_of(result, gpus, demand, frozen) == []


def test_a_pod_kept_in_place_leaves_its_node_short_of_a_bundle(gpu, bundle) -> None:
    # Two 1g free in the fleet, one on each node: no node holds the bundle's two.
    frozen = PolicySpec(max_gpus_changed=0)
    gpus = [
        gpu("A30", "1g.6gb@0+1g.6gb@1", node="a", pins={"1g.6gb@0": "ns/a"}),
        gpu("A30", "1g.6gb@0", node="b"),
    ]
    demand = [bundle(1, {"1g.6gb": 2})]
    result = plan(gpus, demand, frozen)
    assert result.demand[0].met == 0
    assert problems_of(result, gpus, demand, frozen) == []
    met = result.demand[0].model_copy(update={"met": 1, "served": {"1g.6gb": 2}})
    found = problems_of(result.model_copy(update={"demand": (met,)}), gpus, demand, frozen)
    assert any("one node each, the targets host 0" in str(p) for p in found), found


def test_an_equally_weighted_allocation_past_256_is_as_good(gpu, want) -> None:
    # As above, with totals of 300: values past CPython's small-int cache compare equal too.
    frozen = PolicySpec(max_gpus_changed=0)
    seven = "+".join(f"1g.10gb@{s}" for s in range(7))
    six = "+".join(f"1g.10gb@{s}" for s in range(6))
    gpus = [gpu("H100-80GB", seven, node=f"n{k:02d}") for k in range(42)]
    gpus.append(gpu("H100-80GB", six, node="n42"))
    demand = [want("1g.10gb", 300), want("1g.10gb", 1, alternatives=("2g.20gb",))]
    result = plan(gpus, demand, frozen)
    assert [r.met for r in result.demand] == [300, 0]
    swapped = result.model_copy(
        update={
            "demand": (
                result.demand[0].model_copy(update={"met": 299}),
                result.demand[1].model_copy(update={"met": 1, "served": {"1g.10gb": 1}}),
            )
        }
    )
    assert problems_of(swapped, gpus, demand, frozen) == []


def test_gpus_alike_but_for_their_pods_are_each_held_to_their_own(gpu, want) -> None:
    """GPUs of one model, layout and plan share every check but the pods': each must evict
    exactly the pods on it, and a plan that swaps two GPUs' evictions is refused for both."""
    gpus = [
        gpu("H100-80GB", "1g.10gb@3", node=node, pins={"1g.10gb@3": f"ns/{node}"})
        for node in ("a", "b", "c")
    ]
    demand = [want("7g.80gb", 2)]
    result = plan(gpus, demand, EVICT)
    assert problems_of(result, gpus, demand, EVICT) == []
    changed = [n for n, g in enumerate(result.gpus) if g.evict]
    assert [result.gpus[n].evict for n in changed] == [(f"ns/{gpus[n].node}",) for n in changed]
    first, second = changed
    swapped = tamper_gpu(
        tamper_gpu(result, first, evict=result.gpus[second].evict),
        second,
        evict=result.gpus[first].evict,
    )
    found = problems_of(swapped, gpus, demand, EVICT)
    assert [(p.where, "needs exactly" in p.message) for p in found] == [
        (gpus[first].name, True),
        (gpus[second].name, True),
    ]
