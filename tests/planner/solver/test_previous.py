"""Warm starts: an earlier plan's layouts as a starting point (`solver/previous.py`)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from test_properties import demands, fleets, lexicographic, policies_with_rules

from migplan.planner.api.spec import Disruption, PolicySpec
from migplan.planner.baselines.common import heuristic_plan
from migplan.planner.hardware.enumeration import enumerate_layouts
from migplan.planner.hardware.layout import Layout
from migplan.planner.solver import plan
from migplan.planner.solver.objective import score
from migplan.planner.solver.previous import PREVIOUS, previous_targets
from migplan.planner.validate import problems_of, validate

NONE = PolicySpec()
EVICT = PolicySpec(disruption=Disruption.EVICT)


def test_layouts_that_no_longer_apply_are_left_as_they_are(gpu) -> None:
    gpus = [
        gpu("H100-80GB", "1g.10gb@0+1g.10gb@1", node="a", pins={"1g.10gb@1": "ns/new"}),
        gpu("H100-80GB", node="a", index=1),
        gpu("A100-40GB", node="b"),
        gpu("A100-40GB", node="b", index=1),
        gpu("H100-80GB", "3g.40gb@4", node="c"),
    ]
    previous = {
        ("a", 0): "7g.80gb@0",  # destroys the instance a pod started on since
        ("a", 1): "3g.40gb@0+3g.40gb@4",
        ("b", 0): "3g.40gb@4",  # an H100 layout: the node's GPUs are A100s now
        ("b", 1): "not a layout",
        ("gone", 0): "7g.80gb@0",  # a node no longer in the fleet
    }
    kept = previous_targets(gpus, previous, NONE)
    assert [str(kept[(g.node, g.index)]) for g in gpus] == [
        "1g.10gb@0+1g.10gb@1",
        "3g.40gb@0+3g.40gb@4",
        "-",
        "-",
        "3g.40gb@4",  # not named: as it is
    ]
    evicting = previous_targets(gpus, previous, EVICT)
    assert str(evicting[("a", 0)]) == "7g.80gb@0"  # evictions are the policy's to weigh


def test_a_previous_plan_as_good_is_kept_and_named(gpu, want) -> None:
    # Two GPUs, demand for one 7g: either GPU may take it. The previous plan chose the
    # second; re-planned, the plan stays there rather than moving to an equally good one.
    gpus = [gpu("H100-80GB", node="a"), gpu("H100-80GB", node="b")]
    demand = [want("7g.80gb", 1)]
    cold = plan(gpus, demand, NONE)
    chosen = next(g for g in cold.gpus if g.after != "-")
    other = next(g for g in cold.gpus if g.after == "-")
    previous = {(other.node, other.gpu): chosen.after}
    warm = plan(gpus, demand, NONE, previous=previous)
    validate(warm, gpus, demand, NONE)
    assert [g.after for g in warm.gpus if g.node == other.node] == [chosen.after]
    assert warm.summary == cold.summary
    assert warm.solver.status == "OPTIMAL"
    assert warm.solver.started_from == PREVIOUS
    assert warm.solver.chosen == PREVIOUS


def test_a_worse_previous_plan_is_left_for_a_better_one(gpu, want) -> None:
    gpus = [gpu("H100-80GB", node="a")]
    demand = [want("3g.40gb", 2)]
    warm = plan(gpus, demand, NONE, previous={("a", 0): "4g.40gb@0+3g.40gb@4"})
    assert warm.summary.met == 2
    assert warm.solver.chosen != PREVIOUS


def test_without_time_to_solve_the_previous_plan_is_returned_where_it_is_best(gpu, want) -> None:
    gpus = [gpu("A100-40GB", node=f"n{k}") for k in range(3)]
    demand = [want("3g.20gb", 2, priority=2), want("2g.10gb", 3)]
    best = plan(gpus, demand, NONE)
    previous = {(g.node, g.gpu): g.after for g in best.gpus}
    rushed = plan(gpus, demand, NONE, time_limit=1e-9, previous=previous)
    assert rushed.solver.stages == ()
    assert rushed.solver.chosen == PREVIOUS
    assert [g.after for g in rushed.gpus] == [g.after for g in best.gpus]


@st.composite
def warm_problems(draw):
    gpus = draw(fleets())
    previous = {}
    for g in gpus:
        if draw(st.booleans()):
            previous[(g.node, g.index)] = str(draw(st.sampled_from(enumerate_layouts(g.model))))
    return gpus, draw(demands(gpus)), draw(policies_with_rules(gpus)), previous


@settings(max_examples=80)
@given(warm_problems(), st.sampled_from([10.0, 1e-6]))
def test_never_worse_than_a_previous_plan_the_policy_allows(case, time_limit) -> None:
    gpus, demand, policy, previous = case
    result = plan(gpus, demand, policy, time_limit=time_limit, previous=previous)
    assert problems_of(result, gpus, demand, policy) == []
    rebuild = policy.whole_gpu_rebuild
    targets = previous_targets(gpus, previous, policy)
    earlier = heuristic_plan(
        method="previous", gpus=gpus, targets=targets, demand=demand, seconds=0
    )
    if problems_of(earlier, gpus, demand, policy) == []:
        assert lexicographic(result, gpus, demand, rebuild) >= score(
            gpus, targets, demand, rebuild=rebuild
        )
    keep = {(g.node, g.index): g.layout for g in gpus}
    assert lexicographic(result, gpus, demand, rebuild) >= score(
        gpus, keep, demand, rebuild=rebuild
    )


def test_layout_text_round_trips_through_previous_targets(gpu) -> None:
    gpus = [gpu("H100-80GB", node="a")]
    layout = Layout.parse("3g.40gb@4+3g.40gb@0")
    assert previous_targets(gpus, {("a", 0): str(layout)}, NONE)[("a", 0)] == layout
