"""Expressions and objectives written into CP-SAT models in bulk (`linear.py`)."""

from __future__ import annotations

import pytest
from ortools.sat.python import cp_model

from migplan.planner.solver.linear import linear_sum, maximize


def _objective_both_ways(build) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    mine, theirs = cp_model.CpModel(), cp_model.CpModel()
    for model in (mine, theirs):
        xs = [model.new_int_var(0, 9, f"x{i}") for i in range(5)]
        model.add(sum(xs) <= 20)
        model.minimize(xs[0])  # replaced, as a stage replaces the one before
    maximize(mine, build(list(map(mine.get_int_var_from_proto_index, range(5)))))
    theirs.maximize(build(list(map(theirs.get_int_var_from_proto_index, range(5)))))
    return str(mine.proto.objective), str(theirs.proto.objective)


@pytest.mark.parametrize(
    "build",
    [
        lambda xs: linear_sum([(xs[0], 3), (xs[1], -2), (xs[4], 7)], 11),
        lambda xs: cp_model.LinearExpr.weighted_sum(
            [linear_sum([(xs[0], 1), (xs[2], 5)]), linear_sum([(xs[1], 2), (xs[0], -4)], -3)],
            [1000, -1],
        ),
        lambda xs: xs[3],
        lambda xs: 7,
        lambda xs: 2 * xs[1] - xs[1] + 4,
    ],
)
def test_the_objective_is_the_one_or_tools_writes(build) -> None:  # type: ignore[no-untyped-def]
    mine, theirs = _objective_both_ways(build)
    assert mine == theirs


def test_the_model_solves_to_the_same_optimum() -> None:
    model = cp_model.CpModel()
    xs = [model.new_int_var(0, 9, f"x{i}") for i in range(3)]
    model.add(xs[0] + xs[1] + xs[2] <= 10)
    maximize(model, linear_sum([(xs[0], 3), (xs[1], 2), (xs[2], -1)], 5))
    solver = cp_model.CpSolver()
    assert solver.solve(model) == cp_model.OPTIMAL
    assert solver.objective_value == 3 * 9 + 2 * 1 + 5
