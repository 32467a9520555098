"""The LP's neighbourhood of a hint, and the LP bound that proves a stage without the whole
model: never a solution worse than the hint, never a proof the brute force contradicts."""

from __future__ import annotations

from itertools import product

import pytest
from hypothesis import assume, given, settings
from linear_problems import TOP, domains, problems
from ortools.sat.python import cp_model

from migplan.planner.solver.neighbourhood import solve_neighbourhood
from migplan.planner.solver.prune import Relaxation, lp_duals


def _solver() -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    return solver


@pytest.mark.parametrize("wide", [False, True])
@settings(max_examples=80, deadline=None)
@given(problems(4))
def test_the_neighbourhood_is_no_worse_than_the_hint_and_a_proof_is_the_optimum(
    wide, problem
) -> None:
    costs, rows, hint = problem
    feasible = [
        point
        for point in product(range(TOP + 1), repeat=len(costs))
        if all(sum(w * x for w, x in zip(ws, point, strict=True)) <= cap for ws, cap in rows)
    ]
    assume(all(sum(w * x for w, x in zip(ws, hint, strict=True)) <= cap for ws, cap in rows))
    optimum = min(sum(c * x for c, x in zip(costs, p, strict=True)) for p in feasible)
    model = cp_model.CpModel()
    xs = [model.new_int_var(0, TOP, f"x{i}") for i in range(len(costs))]
    for weights, cap in rows:
        model.add(sum(w * x for w, x in zip(weights, xs, strict=True)) <= cap)
    model.minimize(sum(c * x for c, x in zip(costs, xs, strict=True)))
    for x, value in zip(xs, hint, strict=True):
        model.add_hint(x, value)
    duals = lp_duals(model, Relaxation(), time_limit=10.0)
    assert duals is not None
    before = domains(model)

    found = solve_neighbourhood(model, duals, hint, solver=_solver(), wide=wide)

    assert domains(model) == before
    assert list(model.proto.solution_hint.values) == hint
    assert found is not None
    assert duals.reached(found) <= duals.reached(hint)
    if duals.proves(found):
        assert duals.reached(found) == optimum


def test_an_integral_lp_proves_the_neighbourhoods_best() -> None:
    """Cover 2 units with x (cost 1) or z (cost 3); the hint uses z. The LP (x = 2, z = 0)
    agrees with the hint on no variable, so nothing is fixed; the neighbourhood's best,
    x = 2, reaches the LP's bound and is proven."""
    model = cp_model.CpModel()
    x, z = model.new_int_var(0, 4, "x"), model.new_int_var(0, 4, "z")
    model.add(x + z >= 2)
    model.minimize(x + 3 * z)
    duals = lp_duals(model, Relaxation(), time_limit=10.0)
    assert duals is not None

    found = solve_neighbourhood(model, duals, [0, 2], solver=_solver())

    assert found == [2, 0]
    assert duals.proves(found)
    assert not duals.proves([0, 2])


def test_a_fractional_lp_bound_is_rounded_up_to_prove() -> None:
    """2x >= 3: the LP says x = 1.5 (cost 1.5), the best integer x = 2 (cost 2)."""
    model = cp_model.CpModel()
    x = model.new_int_var(0, 4, "x")
    model.add(2 * x >= 3)
    model.minimize(x)
    duals = lp_duals(model, Relaxation(), time_limit=10.0)
    assert duals is not None
    assert duals.bound == 1.5
    assert duals.proves([2])
    assert not duals.proves([3])


def test_the_wide_neighbourhood_frees_what_the_lp_is_indifferent_to() -> None:
    """Minimise 2a + 3b + c with 2a + c >= 3 and 2b <= 1, from a = 2, b = 0, c = 2 (6). The
    LP (a = 0.5, b = 0, c = 2: 3) agrees with the hint on c, so the neighbourhood keeps c at 2
    and reaches 4; c costs the LP nothing to move (reduced cost 0), so the wide one frees it
    and reaches a = 1, c = 1: 3, the LP's bound. b, which would cost the LP 3, stays fixed."""
    model = cp_model.CpModel()
    a, b, c = (model.new_int_var(0, 2, name) for name in "abc")
    model.add(2 * a + c >= 3)
    model.add(2 * b <= 1)
    model.minimize(2 * a + 3 * b + c)
    hint = [2, 0, 2]
    for x, value in zip((a, b, c), hint, strict=True):
        model.add_hint(x, value)
    duals = lp_duals(model, Relaxation(), time_limit=10.0)
    assert duals is not None
    assert list(duals.values) == [0.5, 0.0, 2.0]
    assert list(duals.costs) == [0.0, 3.0, 0.0]

    tight = solve_neighbourhood(model, duals, hint, solver=_solver())
    wide = solve_neighbourhood(model, duals, hint, solver=_solver(), wide=True)

    assert tight == [1, 0, 2]
    assert not duals.proves(tight)
    assert wide == [1, 0, 1]
    assert duals.proves(wide)
