"""The lexicographic objective, solved in stages.

Each stage optimises one expression with the earlier stages' results fixed (equal when proven
optimal, otherwise no worse than found), hinted with the previous solution. Stages, in order:
demand met (priority-weighted), evictions, GPUs changed, nodes touched, free headroom,
operations.

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

STAGES: tuple[tuple[str, str, Callable[[PlanningModel], cp_model.LinearExprT]], ...] = (
    ("demand met", "max", PlanningModel.weighted_met),
    ("evictions", "min", PlanningModel.evictions),
    ("gpus changed", "min", PlanningModel.gpus_changed),
    ("nodes touched", "min", PlanningModel.nodes_touched),
    ("free headroom", "max", PlanningModel.headroom),
    ("operations", "min", PlanningModel.operations),
)
DETERMINISTIC_SECONDS_PER_WALL_SECOND = 1.0


@dataclass
class StagedResult:
    """Values of the x variables after the last stage that found a solution."""

    x: list[list[int]]
    moved: list[dict[int, int]]
    touched: list[int]
    stages: list[SolverStage]
    optimal: bool
    found: bool


def solve_stages(pm: PlanningModel, *, time_limit: float, workers: int, seed: int) -> StagedResult:
    """Solve the stages in order within `time_limit` wall seconds."""
    deadline = time.monotonic() + time_limit
    stages: list[SolverStage] = []
    values: StagedResult | None = None
    optimal = True
    for name, sense, expression in STAGES:
        left = deadline - time.monotonic()
        if left <= 0:
            optimal = False
            break
        expr = expression(pm)
        if sense == "max":
            pm.model.maximize(expr)
        else:
            pm.model.minimize(expr)
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = workers
        solver.parameters.random_seed = seed
        solver.parameters.interleave_search = workers > 1
        solver.parameters.max_time_in_seconds = left
        solver.parameters.max_deterministic_time = left * DETERMINISTIC_SECONDS_PER_WALL_SECOND
        started = time.monotonic()
        status = solver.solve(pm.model)
        seconds = time.monotonic() - started
        if status == cp_model.MODEL_INVALID:
            raise RuntimeError(f"planner bug: CP-SAT says the model is invalid ({name})")
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            # Earlier stages fixed a feasible value, so only a time-out lands here.
            optimal = False
            stages.append(
                SolverStage(
                    name=name,
                    sense=sense,
                    status=solver.status_name(status),
                    value=0.0,
                    bound=0.0,
                    seconds=seconds,
                )
            )
            break
        value = solver.objective_value
        stages.append(
            SolverStage(
                name=name,
                sense=sense,
                status=solver.status_name(status),
                value=value,
                bound=solver.best_objective_bound,
                seconds=seconds,
            )
        )
        values = StagedResult(
            x=[[solver.value(v) for v in row] for row in pm.x],
            moved=[{c: solver.value(v) for c, v in moved.items()} for moved in pm.moved],
            touched=[solver.value(v) for v in pm.touched],
            stages=stages,
            optimal=False,
            found=True,
        )
        fixed = round(value)
        if status == cp_model.OPTIMAL:
            pm.model.add(expr == fixed)
        else:
            optimal = False
            pm.model.add(expr >= fixed if sense == "max" else expr <= fixed)
        pm.model.clear_hints()  # type: ignore[no-untyped-call]  # OR-Tools lacks a hint
        for row, vals in zip(pm.x, values.x, strict=True):
            for var, val in zip(row, vals, strict=True):
                pm.model.add_hint(var, val)
    if values is None:
        return StagedResult(x=[], moved=[], touched=[], stages=stages, optimal=False, found=False)
    values.stages = stages
    values.optimal = optimal and len(stages) == len(STAGES)
    return values
