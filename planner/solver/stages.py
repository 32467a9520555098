"""The lexicographic objective, solved in two stages.

1. demand met (priority x compute weighted), then fewest evictions, GPUs changed and nodes
   touched;
2. most free headroom (largest profile still placeable, summed over GPUs), then fewest NVML
   operations.

Inside a stage the criteria are combined with weights that provably separate them: a
criterion's weight exceeds the largest possible total of everything after it, so one unit of
it outweighs any change below it and the order stays exactly lexicographic. Stage 2 fixes
stage 1's value (equal when proven optimal, otherwise no worse) and starts from its complete
solution as a hint. Solving demand and churn together is much faster than one stage per
criterion: on the 8,000-GPU benchmark the combined stage is proven optimal in about 1.5 s,
while the separate GPUs-changed and nodes-touched stages took 3 s and 6 s each.

Determinism: a fixed seed, a deterministic time limit per stage, and with several workers
CP-SAT's interleaved search, which makes parallel runs repeatable. A wall-clock limit guards
the whole solve; if it ever cuts a stage short the result can differ between runs, and the
report says FEASIBLE rather than OPTIMAL.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ortools.sat.python import cp_model

from migplan.planner.plan import SolverStage
from migplan.planner.solver.model import PlanningModel

Expression = Callable[[PlanningModel], cp_model.LinearExprT]


@dataclass(frozen=True)
class Criterion:
    """One objective criterion: what to optimise, which way, and its largest possible value."""

    name: str
    sense: str
    expression: Expression
    bound: Callable[[PlanningModel], int]


STAGES: tuple[tuple[Criterion, ...], ...] = (
    (
        Criterion("demand met", "max", PlanningModel.weighted_met, lambda pm: 0),
        Criterion("evictions", "min", PlanningModel.evictions, PlanningModel.max_evictions),
        Criterion("gpus changed", "min", PlanningModel.gpus_changed, PlanningModel.gpu_count),
        Criterion("nodes touched", "min", PlanningModel.nodes_touched, PlanningModel.node_count),
    ),
    (
        Criterion("free headroom", "max", PlanningModel.headroom, PlanningModel.max_headroom),
        Criterion("operations", "min", PlanningModel.operations, PlanningModel.max_operations),
    ),
)
DETERMINISTIC_SECONDS_PER_WALL_SECOND = 1.0


@dataclass
class StagedResult:
    """Values of the variables after the last stage that found a solution."""

    x: list[list[int]]
    moved: list[dict[int, int]]
    touched: list[int]
    stages: list[SolverStage]
    optimal: bool
    found: bool
    objective: float = 0.0
    bound: float = 0.0


def _combined(pm: PlanningModel, criteria: tuple[Criterion, ...]) -> cp_model.LinearExprT:
    """Criteria in priority order as one expression to maximise, with separating weights."""
    expressions: list[cp_model.LinearExprT] = []
    weights: list[int] = []
    weight = 1
    for c in reversed(criteria):
        expressions.append(c.expression(pm))
        weights.append(weight if c.sense == "max" else -weight)
        weight *= c.bound(pm) + 1
    if all(isinstance(e, int) for e in expressions):
        return 0
    return cp_model.LinearExpr.weighted_sum(expressions, weights)


def _solver(left: float, workers: int, seed: int, *, probing: bool) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = seed
    solver.parameters.interleave_search = workers > 1
    solver.parameters.max_time_in_seconds = left
    solver.parameters.max_deterministic_time = left * DETERMINISTIC_SECONDS_PER_WALL_SECOND
    # The deeper LP relaxation proves the disruption and free-capacity stages in seconds
    # where the default level stalls without a bound (measured with bench/planner.py).
    solver.parameters.linearization_level = 2
    if not probing:
        # In stage 2 probing costs more than it saves (3.9 s -> 2.3 s to the same proof on
        # the benchmark fleet); stage 1 is faster with it (1.5 s against 2.4 s).
        solver.parameters.cp_model_probing_level = 0
    return solver


def _hint(model: cp_model.CpModel, solution: list[int]) -> None:
    """Hint every variable with a complete solution, so the next stage starts feasible."""
    model.clear_hints()  # type: ignore[no-untyped-call]  # OR-Tools lacks a type hint here
    for index, value in enumerate(solution):
        model.add_hint(model.get_int_var_from_proto_index(index), value)


def solve_stages(pm: PlanningModel, *, time_limit: float, workers: int, seed: int) -> StagedResult:
    """Solve the stages in order within `time_limit` wall seconds."""
    deadline = time.monotonic() + time_limit
    result = StagedResult(x=[], moved=[], touched=[], stages=[], optimal=True, found=False)
    for n, criteria in enumerate(STAGES):
        left = deadline - time.monotonic()
        if left <= 0:
            result.optimal = False
            break
        expr = _combined(pm, criteria)
        if isinstance(expr, int):  # nothing to choose
            result.stages += [
                SolverStage(
                    name=c.name, sense=c.sense, status="OPTIMAL", value=0.0, bound=0.0, seconds=0.0
                )
                for c in criteria
            ]
            continue
        pm.model.maximize(expr)
        solver = _solver(left, workers, seed, probing=n == 0)
        started = time.monotonic()
        status = solver.solve(pm.model)
        seconds = time.monotonic() - started
        if status == cp_model.MODEL_INVALID:
            raise RuntimeError(f"planner bug: CP-SAT says the model is invalid (stage {n + 1})")
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            # Stage 1 always has a solution (keep every layout); later stages start from
            # the previous one, so only a time-out lands here.
            result.optimal = False
            result.stages.append(
                SolverStage(
                    name=criteria[0].name,
                    sense=criteria[0].sense,
                    status=solver.status_name(status),
                    value=0.0,
                    bound=None,
                    seconds=seconds,
                )
            )
            break
        proven = status == cp_model.OPTIMAL
        result.optimal = result.optimal and proven
        if n == 0:
            result.objective = solver.objective_value
            result.bound = solver.best_objective_bound
        for k, c in enumerate(criteria):
            value = float(solver.value(c.expression(pm)))
            result.stages.append(
                SolverStage(
                    name=c.name,
                    sense=c.sense,
                    status=solver.status_name(status),
                    value=value,
                    bound=value if proven else None,
                    seconds=seconds if k == 0 else 0.0,
                )
            )
        result.x = [[solver.value(v) for v in row] for row in pm.x]
        result.moved = [{c: solver.value(v) for c, v in moved.items()} for moved in pm.moved]
        result.touched = [solver.value(v) for v in pm.touched]
        result.found = True
        fixed = round(solver.objective_value)
        pm.model.add(expr == fixed if proven else expr >= fixed)
        _hint(pm.model, list(solver.response_proto.solution))
    result.optimal = result.optimal and result.found
    return result
