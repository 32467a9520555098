"""Reduced-cost fixing: smaller models for a stage and the stages after it, the same optimum.

The LP is solved before a stage (`lp_duals`) and serves twice (`fix_within`): against the
stage's starting plan, to shrink the stage's own model, and against the value the stage
reached, for the later stages. Described here for the second use.

After a stage, every plan the later stages may return is at least as good on that stage's
criterion as the value the stage reached (`v`, in CP-SAT's internal minimisation). The LP
relaxation of the stage's model (GLOP) bounds the criterion from below (`L`) and gives each
variable a reduced cost `r`: a solution in which a variable at its LP lower bound sits `k`
above it scores at least `L + r * k`. Where `r > v - L`, no solution as good as `v` moves the
variable off that bound (likewise at the upper bound with `-r`), so it is fixed there before
the next stage. Nothing a later stage could choose is lost; CP-SAT's presolve and LP then
work on what is left. The LP drops constraints it cannot hold (none of the planner's today),
which only weakens the bound, so the fixing stays sound.

On the fragmented benchmark's 2,000 GPUs with evictions and over-demand, the evictions
stage's LP is tight and fixes about 10,600 of the 21,674 variables (most routes that would
evict): the GPUs-changed stage took 0.26 s instead of 2.1 s and the headroom stage 0.07 s
instead of 2.4 s, with the same values. Reading the model and solving the LP take 0.25 s
there, 0.6 s on 8,000 GPUs (where GPUs changed took 0.7 s instead of 5.5 s); less since a
large model is read from a copy (`copied_proto`).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import ortools.linear_solver.linear_solver_pb2 as lp_pb2
from ortools.linear_solver.python import model_builder_helper
from ortools.sat import cp_model_pb2
from ortools.sat.python import cp_model

from migplan.planner.solver.background import Background

TOLERANCE = 1e-6
"""How far from a bound, or from zero, an LP value or reduced cost may be and still count as
on it (GLOP's own tolerances are 1e-7): which variables sit at their bounds in the LP's
solution (`fix_within`, `neighbourhood.py`). Not a margin on the bound: that is the sums'
own rounding (`Duals.error`)."""
UNIT_ROUNDOFF = 2.0**-53
"""Of IEEE double precision: each operation's result is within this relative distance."""


GLOP_PARAMETERS = "use_dual_simplex: true use_preprocessing: false"
"""The dual simplex without GLOP's presolve, for a stage's first LP on a model with few
columns per row: 0.43 s against 0.53-1.03 s for the other three settings on the evictions LP
of 8,000 fragmented GPUs (45,480 columns, 15,751 rows), the same bound."""
GLOP_DEGENERATE = GLOP_PARAMETERS + " perturb_costs_in_dual_simplex: true"
"""The dual simplex on perturbed costs, for the LP a stage after demand met solves before it
starts (`stages._solve_stage`; the planner waits for it): those objectives count many equal
things (GPUs changed, nodes touched), so many bases tie and the plain dual simplex stalls on
them. The 40,000-GPU fleet's GPUs-changed LP (10 % of variables fixed) took 0.34 s instead of
1.9 s, which often ran out of its share of the time and left that stage not reached (whether
it is reached now depends on the time left when it starts); 8,000 GPUs: 0.06 s instead of
0.10 s. The same optimum on every LP measured, and the bound is computed from whatever duals
GLOP returns (`_weak_duality`). Not for the demand stage's LP (0.76 -> 0.90 s at 40,000 GPUs,
0.15 -> 0.20 s at 8,000), nor for the evictions LP, which GLOP solves beside other work
(`facade._stage_lp`): perturbed, it was 0.02-0.63 s faster on its own, but its other duals
fix other variables, and on 8,000 GPUs with gangs the headroom stage then started from a plan
it did not improve in 2.4 s (OPTIMAL became FEASIBLE, 7.3 s became 9.0 s)."""
GLOP_WIDE = "use_dual_simplex: false use_preprocessing: false"
"""The primal simplex where columns outnumber rows `WIDE` times over (the models that count
each node's instances): 0.21 s and 0.36 s against 1.0 s and 1.7 s with the dual simplex on
50 nodes' evictions LPs (40,158 and 39,167 columns, about 3,300 rows)."""
GLOP_FIXED = "use_dual_simplex: false use_preprocessing: true"
"""The primal simplex after GLOP's presolve where many variables are fixed (the LPs of
stages after the first: 32-80 % fixed): presolve drops them, 0.04-0.32 s against 0.06-0.86 s
with `GLOP_PARAMETERS` on the eight benchmark fleets measured."""
WIDE = 6
"""Columns per row from which an LP counts as wide (3-4 on fleet-wide models, 12 per node)."""
FIXED_SHARE = 0.2
"""Share of fixed variables from which GLOP's presolve pays (0 % on a first LP, 32-80 % after)."""
UNBOUNDED = 2**62
"""CP-SAT writes an open side of a constraint as the int64 limit; the LP wants infinity."""


COPY_FROM = 5_000
"""New variables and constraints from which `Relaxation.refresh` reads a copy of the model
(`copied_proto`) rather than the model itself. CP-SAT's own binding hands out each field
through a wrapper: on a model of 50,000 variables and 5,000 rows of 10 terms, reading the
variables took 0.071 s and the rows 0.095 s from the model, 0.019 s and 0.018 s from a copy
that took 0.016 s to make. Below a few thousand additions the copy costs more than it saves."""


def copied_proto(model: cp_model.CpModel) -> cp_model_pb2.CpModelProto | None:
    """`model` as a protobuf message, written by CP-SAT into an anonymous in-memory file and
    parsed back (the binding has no way to serialise to bytes): reading 52,181 variables
    and 48,434 rows of a 40,000-GPU model took 0.32 s this way, 1.43 s from the model itself.
    None where the platform has no such file (Linux's memfd; a sandbox may refuse it) or
    writing fails: the caller then reads the model itself."""
    create = getattr(os, "memfd_create", None)
    if create is None:
        return None
    try:
        fd = create("migplan-cp-model")
    except OSError:
        return None
    with open(fd, "rb") as written:
        if not model.export_to_file(f"/proc/self/fd/{fd}"):
            return None
        return cp_model_pb2.CpModelProto.FromString(written.read())


def _bound(value: int) -> float:
    return float(np.sign(value)) * np.inf if abs(value) >= UNBOUNDED else float(value)


def _glop_request() -> lp_pb2.MPModelRequest:
    return lp_pb2.MPModelRequest(solver_type=lp_pb2.MPModelRequest.GLOP_LINEAR_PROGRAMMING)


@dataclass
class Relaxation:
    """The LP relaxation of one CP-SAT model, read from its proto once and then kept up to
    date: stages only add constraints, and only `fix_within` narrows domains (it
    updates the bounds here as it does, through `fix`)."""

    lower: list[int] = field(default_factory=list)
    upper: list[int] = field(default_factory=list)
    rows: list[tuple[list[int], list[int], float, float]] = field(default_factory=list)
    """(variables, coefficients, lower bound, upper bound) of each linear constraint."""
    read: int = 0
    """Constraints of the proto read so far."""
    _request: lp_pb2.MPModelRequest = field(
        default_factory=_glop_request, init=False, repr=False, compare=False
    )
    """The GLOP request of the last `request`, kept to be brought up to date (`request`)."""
    _moved: list[int] = field(default_factory=list, init=False, repr=False, compare=False)
    """Variables in `_request` whose bounds `fix` changed since."""
    _costed: list[int] = field(default_factory=list, init=False, repr=False, compare=False)
    """Variables with an objective coefficient in `_request`."""

    def fix(self, index: int, bound: int) -> None:
        """Fix variable `index` at `bound`."""
        self.lower[index] = self.upper[index] = bound
        self._moved.append(index)

    def refresh(self, model: cp_model.CpModel) -> None:
        """Read the variables and constraints added since the last call."""
        live = model.proto
        added = len(live.variables) - len(self.lower) + len(live.constraints) - self.read
        copied = copied_proto(model) if added >= COPY_FROM else None
        if copied is None:
            self._read(live.variables, live.constraints, lambda row: row.has_linear())
        else:
            self._read(copied.variables, copied.constraints, lambda row: row.HasField("linear"))

    def _read(self, variables: Any, constraints: Any, has_linear: Callable[[Any], bool]) -> None:
        """Read from `variables` and `constraints`, a model proto's fields (either binding's:
        they differ only in how a constraint says it is linear)."""
        for index in range(len(self.lower), len(variables)):
            domain = variables[index].domain
            self.lower.append(domain[0])
            self.upper.append(domain[len(domain) - 1])
        for index in range(self.read, len(constraints)):
            row = constraints[index]
            if not has_linear(row) or len(row.enforcement_literal):
                continue  # not a plain linear row: leaving it out only relaxes the LP
            linear = row.linear
            terms = list(linear.vars)
            if not terms or min(terms) < 0:
                continue
            domain = linear.domain
            self.rows.append(
                (terms, list(linear.coeffs), _bound(domain[0]), _bound(domain[len(domain) - 1]))
            )
        self.read = len(constraints)

    def glop_parameters(self, *, degenerate: bool = False) -> str:
        """The GLOP settings that solved LPs of this shape fastest (see the constants);
        `degenerate`: the LP of a stage after demand met, solved as the stage starts."""
        fixed = sum(low == high for low, high in zip(self.lower, self.upper, strict=True))
        if fixed >= FIXED_SHARE * len(self.lower):
            return GLOP_FIXED
        if len(self.lower) >= WIDE * len(self.rows):
            return GLOP_WIDE
        return GLOP_DEGENERATE if degenerate else GLOP_PARAMETERS

    def request(
        self,
        objective: tuple[list[int], list[int]],
        *,
        time_limit: float,
        degenerate: bool = False,
    ) -> bytes:
        """The LP, minimising `objective` (variables, coefficients), as a GLOP request
        (`degenerate`: see `glop_parameters`).

        The request is kept and brought up to date on the next call (variables and rows added
        since, bounds fixed since, the new objective) rather than built again: on the
        40,000-GPU model (52,181 variables, 48,434 rows) each call took 0.16 s, now the first
        0.12 s (no copy of the model into the request) and the next 0.03 s, most of it
        serialising. The bytes are the same as a request written afresh (tested).
        """
        variables = self._request.model.variable
        constraints = self._request.model.constraint
        known, written = len(variables), len(constraints)
        for index in self._moved:
            if index < known:
                variables[index].lower_bound = float(self.lower[index])
                variables[index].upper_bound = float(self.upper[index])
        self._moved.clear()
        for low, high in zip(self.lower[known:], self.upper[known:], strict=True):
            var = variables.add()
            var.lower_bound, var.upper_bound = float(low), float(high)
        for index in self._costed:
            variables[index].ClearField("objective_coefficient")
        for index, coefficient in zip(*objective, strict=True):
            variables[index].objective_coefficient = float(coefficient)
        self._costed = list(objective[0])
        for terms, coefficients, lower, upper in self.rows[written:]:
            row = constraints.add()
            row.var_index.extend(terms)
            row.coefficient.extend(coefficients)
            row.lower_bound, row.upper_bound = lower, upper
        self._request.solver_specific_parameters = self.glop_parameters(degenerate=degenerate)
        self._request.solver_time_limit_seconds = time_limit
        return bytes(self._request.SerializeToString())


@dataclass(frozen=True)
class Duals:
    """The LP relaxation's answer for one objective: its optimum (a bound on every plan) and
    each variable's LP value and reduced cost. It stays valid while the model only gains
    fixings at the LP solution's own bounds (they keep that solution feasible and optimal),
    so one LP serves the fixing before a stage (against its hint) and after it (against the
    value reached)."""

    bound: float
    """Every solution's objective is at least this, less `error` (`_weak_duality`)."""
    values: np.ndarray
    costs: np.ndarray
    terms: tuple[list[int], list[int]]
    """The objective's variables and coefficients."""
    error: float
    """How far floating-point rounding may have moved `bound` from the exact value of the
    same sums."""
    cost_errors: np.ndarray
    """Likewise for each reduced cost in `costs`."""

    def reached(self, solution: Sequence[int]) -> float:
        """The objective (CP-SAT's internal minimisation, without offset) of `solution`."""
        return float(sum(solution[v] * c for v, c in zip(*self.terms, strict=True)))

    def proves(self, solution: Sequence[int]) -> bool:
        """Whether no solution is better than `solution` (integral, on integral objective
        coefficients): its objective reaches the bound (`_weak_duality`, valid whatever
        GLOP's tolerances) less the bound's rounding error, rounded up.

        The margin is the sums' own rounding, not a share of the objective: 1e-6 of it, the
        margin before, passed a whole unit from objectives of a million up, so no
        neighbourhood could prove a stage there (40,000 GPUs, GPUs changed: the
        neighbourhood reached the LP's bound, 58,801,013, and the stage ran on unproven to
        the time limit)."""
        return self.reached(solution) <= math.ceil(self.bound - self.error)


class PendingLp:
    """An LP relaxation being solved by GLOP on a thread of its own (`Background`), beside
    the planner's other work. The request is read from the model before the thread starts,
    so the thread touches nothing the planner uses."""

    def __init__(self, relaxation: Relaxation, terms: tuple[list[int], list[int]], request: bytes):
        self._relaxation = relaxation
        self._terms = terms
        self._answer = Background(lambda: _solve_glop(request))

    def result(self) -> Duals | None:
        """The LP's answer once GLOP is done (None where it ended without an optimum). The
        relaxation must not change in the meantime (no `refresh`, no `fix_within`)."""
        answer = lp_pb2.MPSolutionResponse.FromString(self._answer.result())
        if answer.status != lp_pb2.MPSOLVER_OPTIMAL:
            return None
        bound, costs, error, cost_errors = _weak_duality(
            self._relaxation, self._terms, np.asarray(answer.dual_value)
        )
        return Duals(
            bound=bound,
            values=np.asarray(answer.variable_value),
            costs=costs,
            terms=self._terms,
            error=error,
            cost_errors=cost_errors,
        )


def _solve_glop(request: bytes) -> bytes:
    solver = model_builder_helper.ModelSolverHelper("glop")
    # The stub says str; the binding takes (and returns) serialized protos as bytes.
    return bytes(solver.solve_serialized_request(request))  # type: ignore[arg-type]


def start_lp(
    model: cp_model.CpModel, relaxation: Relaxation, *, time_limit: float, degenerate: bool = False
) -> PendingLp | None:
    """Start solving the LP relaxation of `model` under its objective, within `time_limit`
    seconds from now, reading the model included; None where there is no time.
    `degenerate`: the LP of a stage after demand met, solved as the stage starts
    (`GLOP_DEGENERATE`)."""
    if time_limit <= 0:
        return None
    deadline = time.monotonic() + time_limit
    relaxation.refresh(model)
    objective = model.proto.objective
    terms = (list(objective.vars), list(objective.coeffs))
    # Reading can use up the budget: GLOP then stops at once, not optimal.
    request = relaxation.request(
        terms, time_limit=deadline - time.monotonic(), degenerate=degenerate
    )
    return PendingLp(relaxation, terms, request)


def lp_duals(
    model: cp_model.CpModel, relaxation: Relaxation, *, time_limit: float, degenerate: bool = False
) -> Duals | None:
    """The LP relaxation of `model` under its objective, or None where reading and solving it
    does not end within `time_limit` seconds (or there is no time); `degenerate` as for
    `start_lp`."""
    pending = start_lp(model, relaxation, time_limit=time_limit, degenerate=degenerate)
    return None if pending is None else pending.result()


def _weak_duality(
    relaxation: Relaxation, terms: tuple[list[int], list[int]], duals: np.ndarray
) -> tuple[float, np.ndarray, float, np.ndarray]:
    """A bound that holds for the row duals `duals` whatever GLOP's tolerances, the reduced
    costs it goes with, and how far rounding may have moved each: for any `y`, with
    `r = c - A'y`, every `x` in the box with `L <= Ax <= U` has
    `c'x >= sum_i min(y_i L_i, y_i U_i) + sum_j min(r_j l_j, r_j u_j)` (a row's dual of the
    wrong sign for an open side is taken as 0). GLOP's own reduced costs are the same
    `c - A'y` (equal to the last bit on the benchmark's LPs); its optimum differed from this
    bound by under 1e-8.

    A stage proven by this bound rests on no more than floating-point rounding of these
    sums, which is bounded here the textbook way (a sum of `k` rounded terms is within
    `k u / (1 - k u)` of the sum of their magnitudes, `u` the unit roundoff) and doubled:
    each reduced cost within `cost_errors`, the bound within `error` (its sums' own rounding,
    and each reduced cost's error times the larger magnitude of its variable's bounds, which
    also covers a cost rounded to the wrong sign)."""
    count = len(relaxation.lower)
    objective = np.zeros(count)
    np.add.at(objective, terms[0], np.asarray(terms[1], dtype=np.float64))
    low = np.array([row[2] for row in relaxation.rows])
    high = np.array([row[3] for row in relaxation.rows])
    y = np.where(np.isinf(high) & (duals < 0), 0.0, duals)
    y = np.where(np.isinf(low) & (y > 0), 0.0, y)
    lengths = [len(row[0]) for row in relaxation.rows]
    columns = np.fromiter((v for row in relaxation.rows for v in row[0]), dtype=np.int64)
    weights = np.fromiter((a for row in relaxation.rows for a in row[1]), dtype=np.float64)
    products = weights * np.repeat(y, lengths)
    used = np.zeros(count)
    np.add.at(used, columns, products)
    costs = objective - used
    rows = np.where(y > 0, y * np.where(np.isinf(low), 0.0, low), 0.0) + np.where(
        y < 0, y * np.where(np.isinf(high), 0.0, high), 0.0
    )
    lower = np.asarray(relaxation.lower, dtype=np.float64)
    upper = np.asarray(relaxation.upper, dtype=np.float64)
    box = np.where(costs > 0, costs * lower, 0.0) + np.where(costs < 0, costs * upper, 0.0)
    # The magnitudes' own summing order does not matter to the bound: bincount, 3x faster.
    magnitude = np.bincount(columns, weights=np.abs(products), minlength=count)
    longest = int(np.bincount(columns, minlength=count).max(initial=0))
    cost_errors = 2.0 * _rounding(longest + 2) * (np.abs(objective) + magnitude)
    reach = np.maximum(np.abs(lower), np.abs(upper))
    summed = float(np.abs(rows).sum() + np.abs(box).sum())
    error = 2.0 * _rounding(max(len(rows), count) + 2) * summed + float((cost_errors * reach).sum())
    return float(rows.sum() + box.sum()), costs, error, cost_errors


def _rounding(terms: int) -> float:
    """The relative error bound of a sum of `terms` rounded operations (`gamma_k`)."""
    ku = terms * UNIT_ROUNDOFF
    return ku / (1.0 - ku)


def fix_within(
    model: cp_model.CpModel, relaxation: Relaxation, duals: Duals, *, solution: Sequence[int]
) -> int:
    """Fix, in `model`, every variable that no solution as good as `solution` on the
    objective `duals` answered can move off its LP bound; how many were fixed."""
    reached = duals.reached(solution)
    # One step off its bound costs a variable at least its reduced cost: it is fixed where
    # that, less its rounding and the bound's, exceeds the gap left.
    slack = reached - duals.bound + duals.error + duals.cost_errors
    costs, values = duals.costs, duals.values
    lower = np.asarray(relaxation.lower, dtype=np.float64)
    upper = np.asarray(relaxation.upper, dtype=np.float64)
    free = lower < upper
    at_lower = free & (values <= lower + TOLERANCE) & (costs > slack)
    at_upper = free & (values >= upper - TOLERANCE) & (-costs > slack)
    variables = model.proto.variables
    fixed = 0
    for index in np.flatnonzero(at_lower | at_upper).tolist():
        bound = relaxation.lower[index] if at_lower[index] else relaxation.upper[index]
        domain = variables[index].domain
        if len(domain) != 2:
            continue  # a domain with holes: left as it is
        domain[0] = domain[1] = bound
        relaxation.fix(index, bound)
        fixed += 1
    return fixed
