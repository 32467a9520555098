"""The staged solve: a stage whose LP takes the time left still returns a plan."""

from __future__ import annotations

import time

import pytest
from ortools.sat.python import cp_model

from migplan.planner.api.spec import Disruption, PolicySpec
from migplan.planner.solver import facade, plan, stages
from migplan.planner.validate import validate

EVICT = PolicySpec(disruption=Disruption.EVICT)


def crowded(gpu, want) -> tuple[list, list]:
    """Three H100s with pods in the way of a 7g.80gb: meeting it takes evictions."""
    gpus = [
        gpu("H100-80GB", "3g.40gb@0+2g.20gb@4", node="a", pins={"3g.40gb@0": "ns/a"}),
        gpu("H100-80GB", "4g.40gb@0", node="b", pins={"4g.40gb@0": "ns/c"}),
        gpu("H100-80GB", "1g.10gb@0+1g.10gb@1", node="c", pins={"1g.10gb@1": "ns/b"}),
    ]
    return gpus, [want("7g.80gb", 1, priority=3), want("1g.10gb", 4)]


def test_a_stage_whose_lp_outlasts_the_deadline_keeps_its_start(
    gpu, want, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CP-SAT calls a negative time limit an invalid model: the stage after a slow LP must
    not hand it one."""
    lp_duals = stages.lp_duals

    def slow(model, relaxation, *, time_limit, degenerate=False):
        found = lp_duals(model, relaxation, time_limit=time_limit, degenerate=degenerate)
        time.sleep(time_limit + 0.3)
        return found

    monkeypatch.setattr(stages, "lp_duals", slow)
    gpus, demand = crowded(gpu, want)
    result = plan(gpus, demand, EVICT, time_limit=1.0)
    validate(result, gpus, demand, EVICT)
    assert result.solver.status == "FEASIBLE"


@pytest.mark.parametrize("maximise", [True, False])
def test_an_internal_objective_value_reads_in_the_models_own_terms(maximise: bool) -> None:
    """The LP's bound is in CP-SAT's internal, minimised objective; a stage reports it in
    the model's own terms (negated and offset for a maximisation)."""
    model = cp_model.CpModel()
    x = model.new_int_var(0, 3, "x")
    model.add(x <= 2)
    if maximise:
        model.maximize(2 * x + 5)
    else:
        model.minimize(7 - 2 * x)
    solver = cp_model.CpSolver()
    assert solver.solve(model) == cp_model.OPTIMAL
    objective = model.proto.objective
    internal = sum(
        solver.value(model.get_int_var_from_proto_index(v)) * c
        for v, c in zip(objective.vars, objective.coeffs, strict=True)
    )
    assert stages._external(model, internal) == solver.objective_value


def test_too_late_for_the_evictions_stage_the_demand_stages_plan_stands_unproven(
    gpu, want, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the demand stage, with less time left than the evictions stage needs before it
    can search, the demand stage's plan is returned: as much demand met, not called
    optimal, and no later stage reported as solved."""
    gpus, demand = crowded(gpu, want)
    in_time = plan(gpus, demand, EVICT, time_limit=10.0)
    assert in_time.solver.status == "OPTIMAL"
    monkeypatch.setattr(facade, "EVICTIONS_PATH_SECONDS_PER_GPU", 1e6)
    late = plan(gpus, demand, EVICT, time_limit=10.0)
    validate(late, gpus, demand, EVICT)
    assert late.solver.status == "FEASIBLE"
    assert [s.name for s in late.solver.stages] == ["demand met"]
    assert late.summary.met == in_time.summary.met


@pytest.mark.parametrize(("unit", "reached"), [(1, [1, 0, 1]), (2, [1, 0, 2])])
def test_the_wide_neighbourhood_is_tried_where_the_first_criterion_may_improve(
    unit: int, reached: list[int]
) -> None:
    """Minimise 2a + 3b + c with 2a + c >= 3 and 2b <= 1, from a = 2, b = 0, c = 2: the
    neighbourhood reaches 4 against the LP's bound of 3 (`test_neighbourhood.py`). With the
    first criterion weighing 1 the gap may be a better plan, and the wide neighbourhood
    finds 3; weighing 2, the gap of 1 is below one unit of it and only later criteria could
    improve: the neighbourhood's best stands for the whole model to settle."""
    from migplan.planner.solver.prune import Relaxation, lp_duals

    model = cp_model.CpModel()
    a, b, c = (model.new_int_var(0, 2, name) for name in "abc")
    model.add(2 * a + c >= 3)
    model.add(2 * b <= 1)
    model.minimize(2 * a + 3 * b + c)
    duals = lp_duals(model, Relaxation(), time_limit=10.0)
    assert duals is not None
    hinted = stages._hint(model, {0: 2, 1: 0, 2: 2})

    _, found = stages._neighbourhoods(
        model, duals, hinted, deadline=time.monotonic() + 10, settings=(1, 0, True), unit=unit
    )

    assert found == reached
