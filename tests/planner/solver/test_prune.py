"""Reduced-cost fixing: no solution as good as the stage's is ever cut off."""

from __future__ import annotations

from fractions import Fraction
from itertools import product

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from linear_problems import TOP, domains, problems
from ortools.sat.python import cp_model

from migplan.planner.solver import prune
from migplan.planner.solver.prune import Relaxation, _weak_duality, fix_within, lp_duals


def _fix(
    model: cp_model.CpModel, *, solution: list[int], time_limit: float, degenerate: bool = False
) -> int:
    """The stage's LP solved and its fixing applied against `solution`, as `stages.py`
    does; 0 where the LP gives no answer in `time_limit`."""
    relaxation = Relaxation()
    duals = lp_duals(model, relaxation, time_limit=time_limit, degenerate=degenerate)
    return 0 if duals is None else fix_within(model, relaxation, duals, solution=solution)


def _solve(model: cp_model.CpModel, *, feasible: bool = True) -> tuple[int, list[int]]:
    """The optimum and a solution; `feasible=False`: an infeasible model is skipped."""
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    status = solver.solve(model)
    if not feasible:
        assume(status != cp_model.INFEASIBLE)
    assert status == cp_model.OPTIMAL
    return round(solver.objective_value), list(solver.response_proto.solution)


@settings(max_examples=60, deadline=None)
@given(problems(5))
def test_every_solution_as_good_survives_the_fixing(problem) -> None:
    """Brute force over every integer point: those at least as good as the optimum (there
    may be several) all lie inside the domains left after fixing."""
    costs, rows, floor = problem
    model = cp_model.CpModel()
    xs = [model.new_int_var(0, TOP, f"x{i}") for i in range(len(costs))]
    for weights, cap in rows:
        model.add(sum(w * x for w, x in zip(weights, xs, strict=True)) <= cap)
    # A covering row: makes the cheapest variables matter without cutting off x = 0 alone.
    model.add(sum(f * x for f, x in zip(floor, xs, strict=True)) >= min(1, sum(floor)))
    model.minimize(sum(c * x for c, x in zip(costs, xs, strict=True)))
    best, solution = _solve(model, feasible=False)

    fixed = _fix(model, solution=solution, time_limit=10.0)

    left = domains(model)
    assert sum(lo == hi for lo, hi in left) >= fixed
    for point in product(range(TOP + 1), repeat=len(costs)):
        feasible = all(
            sum(w * x for w, x in zip(weights, point, strict=True)) <= cap for weights, cap in rows
        ) and sum(f * x for f, x in zip(floor, point, strict=True)) >= min(1, sum(floor))
        if feasible and sum(c * x for c, x in zip(costs, point, strict=True)) <= best:
            assert all(lo <= x <= hi for x, (lo, hi) in zip(point, left, strict=True)), point


@pytest.mark.parametrize("degenerate", [False, True])
def test_a_variable_that_only_costs_more_is_fixed_and_the_others_are_not(degenerate) -> None:
    """Cover one unit with x or y (cost 1 each) or z (cost 3): no optimal plan uses z, so it
    is fixed at 0; x and y both appear in optimal plans and stay free. The same with the
    GLOP settings of a later stage's LP (perturbed costs, two tied optima here)."""
    model = cp_model.CpModel()
    x, y, z = (model.new_int_var(0, 4, name) for name in "xyz")
    model.add(x + y + z >= 1)
    model.minimize(x + y + 3 * z)
    _, solution = _solve(model)

    assert _fix(model, solution=solution, time_limit=10.0, degenerate=degenerate) == 1
    assert domains(model) == [(0, 4), (0, 4), (0, 0)]
    assert _solve(model)[0] == 1


def test_a_solution_short_of_the_optimum_fixes_less() -> None:
    """From a solution of cost 3 (z alone), using z is no longer ruled out."""
    model = cp_model.CpModel()
    x, y, z = (model.new_int_var(0, 4, name) for name in "xyz")
    model.add(x + y + z >= 1)
    model.minimize(x + y + 3 * z)

    assert _fix(model, solution=[0, 0, 1], time_limit=10.0) == 0
    assert domains(model) == [(0, 4), (0, 4), (0, 4)]


def test_no_time_left_fixes_nothing() -> None:
    model = cp_model.CpModel()
    x, z = model.new_int_var(0, 4, "x"), model.new_int_var(0, 4, "z")
    model.add(x + z >= 1)
    model.minimize(x + 3 * z)

    assert _fix(model, solution=[1, 0], time_limit=0.0) == 0
    assert domains(model) == [(0, 4), (0, 4)]


def test_the_relaxation_reads_only_constraints_added_since() -> None:
    model = cp_model.CpModel()
    x, y = model.new_int_var(0, 4, "x"), model.new_int_var(0, 4, "y")
    model.add(x + y >= 1)
    relaxation = Relaxation()
    relaxation.refresh(model)
    z = model.new_int_var(0, 3, "z")
    model.add(x - y + z <= 2)
    relaxation.refresh(model)

    assert [(lo, hi) for _, _, lo, hi in relaxation.rows] == [
        (1.0, float("inf")),
        (-float("inf"), 2.0),
    ]
    assert relaxation.read == 2
    assert (relaxation.lower, relaxation.upper) == ([0, 0, 0], [4, 4, 3])


@pytest.mark.parametrize(("dual", "bound"), [(1.0, 1.0), (-0.5, 0.0), (2.0, -2.0), (0.0, 0.0)])
def test_any_row_dual_gives_a_bound_no_solution_beats(dual: float, bound: float) -> None:
    """min x with x >= 1, x in 0..4 (optimum 1): the dual 1 proves it; a dual of the wrong
    sign for the row's open side counts as 0; any other gives a weaker bound, never a
    higher one."""
    model = cp_model.CpModel()
    x = model.new_int_var(0, 4, "x")
    model.add(x >= 1)
    model.minimize(x)
    relaxation = Relaxation()
    relaxation.refresh(model)

    found, costs, error, cost_errors = _weak_duality(relaxation, ([0], [1]), np.array([dual]))

    assert found == bound
    assert 0 <= error < 1e-12
    assert (cost_errors >= 0).all()
    assert (cost_errors < 1e-12).all()
    assert found <= 1
    assert costs.tolist() == [1.0 - max(dual, 0.0)]


def test_a_solution_at_the_bound_is_proven_however_large_the_objective() -> None:
    """min 10^7 x + 10^7 y with x + y >= 3: the LP's bound, 3 * 10^7, is integral and x = 3 is
    optimal. (The margin before was a millionth of the objective, 30 here: no solution could
    reach the bound less that margin, so large stages were never proven by their LP.)"""
    model = cp_model.CpModel()
    x, y = model.new_int_var(0, 5, "x"), model.new_int_var(0, 5, "y")
    model.add(x + y >= 3)
    model.minimize(10**7 * x + 10**7 * y)
    duals = lp_duals(model, Relaxation(), time_limit=5.0)
    assert duals is not None
    assert duals.bound == pytest.approx(3 * 10**7)
    assert duals.proves([3, 0])
    assert duals.proves([1, 2])
    assert not duals.proves([4, 0])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.integers(-(10**6), 10**6), min_size=4, max_size=4),
            st.integers(-(10**9), 10**9),
            st.integers(0, 10**9),
            st.floats(-(10**8), 10**8, allow_nan=False),
        ),
        min_size=1,
        max_size=6,
    ),
    st.lists(st.integers(-(10**7), 10**7), min_size=4, max_size=4),
    st.lists(st.tuples(st.integers(-(10**6), 0), st.integers(0, 10**6)), min_size=4, max_size=4),
)
def test_rounding_stays_within_the_errors_it_reports(rows, objective, boxes) -> None:
    """The bound and reduced costs computed in floating point against the same sums in exact
    rational arithmetic, on the same (float) duals: the differences stay within `error` and
    `cost_errors`, so `bound - error` holds for every solution."""
    relaxation = Relaxation()
    relaxation.lower = [low for low, _ in boxes]
    relaxation.upper = [high for _, high in boxes]
    relaxation.rows = [
        (
            [j for j, a in enumerate(coefficients) if a],
            [a for a in coefficients if a],
            float(low),
            float(low + span),
        )
        for coefficients, low, span, _ in rows
    ]
    assume(all(row[0] for row in relaxation.rows))
    duals = np.array([dual for *_, dual in rows])
    terms = ([0, 1, 2, 3], objective)
    bound, costs, error, cost_errors = _weak_duality(relaxation, terms, duals)

    exact_costs = [Fraction(c) for c in objective]
    exact = Fraction(0)
    for (variables, coefficients, low, high), dual in zip(relaxation.rows, duals, strict=True):
        y = Fraction(float(dual))
        for j, a in zip(variables, coefficients, strict=True):
            exact_costs[j] -= a * y
        exact += y * Fraction(low) if y > 0 else y * Fraction(high)
    for j, cost in enumerate(exact_costs):
        exact += cost * (relaxation.lower[j] if cost > 0 else relaxation.upper[j])
    assert abs(Fraction(bound) - exact) <= Fraction(error)
    for j, cost in enumerate(exact_costs):
        assert abs(Fraction(float(costs[j])) - cost) <= Fraction(float(cost_errors[j]))


def _mixed_model(size: int, seed: int) -> cp_model.CpModel:
    """A model with every kind of row the relaxation meets: plain linear rows (one-sided and
    ranged, some over a literal's negation, which the binding writes as `1 - b`), rows under
    an enforcement literal, and rows that are not linear."""
    rng = np.random.default_rng(seed)
    model = cp_model.CpModel()
    xs = [model.new_int_var(0, int(rng.integers(1, 9)), f"x{i}") for i in range(size)]
    bs = [model.new_bool_var(f"b{i}") for i in range(size // 10)]
    for k in range(size):
        picked = rng.choice(size, size=3, replace=False).tolist()
        expr = sum(int(rng.integers(1, 5)) * xs[i] for i in picked)
        if k % 7 == 0:
            model.add(expr <= int(rng.integers(5, 20))).only_enforce_if(bs[k % len(bs)])
        elif k % 11 == 0:
            model.add(bs[k % len(bs)].Not() + xs[picked[0]] >= 1)
        elif k % 13 == 0:
            model.add_bool_or([bs[k % len(bs)], bs[(k + 1) % len(bs)]])
        else:
            model.add_linear_constraint(expr, int(rng.integers(0, 3)), int(rng.integers(5, 20)))
    return model


def test_reading_a_copy_of_the_model_reads_what_the_model_holds(monkeypatch) -> None:
    """Large additions are read from a copy of the model (`copied_proto`), small ones from
    the model itself: either way the relaxation holds the same bounds and rows, also when a
    later refresh reads only what was added since."""
    model = _mixed_model(6_000, seed=3)
    copies = []
    copy_of = prune.copied_proto

    def recorded(of: cp_model.CpModel) -> object:
        copies.append(copy_of(of))
        return copies[-1]

    monkeypatch.setattr(prune, "copied_proto", recorded)
    copied = Relaxation()
    copied.refresh(model)
    assert len(copies) == 1  # read from the copy
    assert copies[0] is not None
    monkeypatch.setattr(prune, "COPY_FROM", 10**9)
    live = Relaxation()
    live.refresh(model)
    assert len(copies) == 1  # read from the model itself
    assert copied == live
    assert len(live.rows) > 4_000  # most rows are plain linear ones
    extra = model.new_int_var(0, 4, "extra")
    model.add(extra + model.get_int_var_from_proto_index(0) <= 3)
    copied.refresh(model)
    live.refresh(model)
    assert copied == live
    assert copied.rows[-1][2:] == (-np.inf, 3.0)


def test_without_an_in_memory_file_the_model_itself_is_read(monkeypatch) -> None:
    """Where the platform refuses the in-memory file (a sandbox without memfd), the
    relaxation reads the live model and holds the same."""
    model = _mixed_model(6_000, seed=5)
    copied = Relaxation()
    copied.refresh(model)

    def refused(name: str) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(prune.os, "memfd_create", refused)
    assert prune.copied_proto(model) is None
    live = Relaxation()
    live.refresh(model)
    assert live == copied


def _fresh_request(relaxation: Relaxation, objective: tuple[list[int], list[int]]) -> bytes:
    """The GLOP request a relaxation with the same bounds and rows writes on its first call."""
    fresh = Relaxation(
        lower=list(relaxation.lower), upper=list(relaxation.upper), rows=list(relaxation.rows)
    )
    return fresh.request(objective, time_limit=5.0)


def test_a_request_brought_up_to_date_equals_one_written_afresh() -> None:
    """The relaxation keeps its GLOP request and updates it on the next call: after variables
    were fixed, variables and rows added and the objective changed, it asks GLOP the same as
    a request written from scratch."""
    model = _mixed_model(300, seed=7)
    relaxation = Relaxation()
    relaxation.refresh(model)
    first = ([0, 1, 2, 3], [1, 2, 3, 4])
    assert relaxation.request(first, time_limit=5.0) == _fresh_request(relaxation, first)
    relaxation.fix(5, 0)
    relaxation.fix(6, relaxation.upper[6])
    extra = model.new_int_var(0, 4, "extra")
    model.add(extra + model.get_int_var_from_proto_index(7) <= 3)
    relaxation.refresh(model)
    relaxation.fix(len(relaxation.lower) - 1, 2)
    second = ([2, 8, len(relaxation.lower) - 1], [-1, 5, 1])

    again = relaxation.request(second, time_limit=5.0)

    assert again == _fresh_request(relaxation, second)
    parsed = prune.lp_pb2.MPModelRequest.FromString(again).model
    assert parsed.variable[5].upper_bound == 0.0
    assert parsed.variable[0].objective_coefficient == 0.0
    assert parsed.variable[8].objective_coefficient == 5.0
    assert len(parsed.constraint) == len(relaxation.rows)
