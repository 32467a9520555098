"""The validator catches each way a plan can be wrong (tampered copies of a correct plan)."""

from __future__ import annotations

import pytest

from migplan.planner.plan import Operation, OperationKind
from migplan.planner.solver import plan
from migplan.planner.spec import Disruption, PolicySpec
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


def test_summary_must_match(case) -> None:
    gpus, demand, result = case
    wrong = result.model_copy(
        update={"summary": result.summary.model_copy(update={"evictions": 0})}
    )
    assert any("summary" in str(p) for p in problems_of(wrong, gpus, demand, EVICT))


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
    assert any("reports 0 met; the targets allow 1 for 1 requested" in str(p) for p in found), found


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
