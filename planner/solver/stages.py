"""The lexicographic objective, solved in four CP-SAT stages (operations come after,
exactly, in `assign.py`).

1. demand met (priority x compute weighted);
2. fewest evictions;
3. fewest GPUs changed, then nodes touched;
4. most free headroom (largest profile still placeable, summed over GPUs), then fewest
   instances in the changed GPUs' targets (so nothing is created that nobody asked for).

Demand is solved alone: its LP relaxation is tight and its coefficients small, so CP-SAT
proves it in about a second on 8,000 fragmented GPUs, where the same criterion combined with
the disruption ones (weights up to 1e11) made no progress in 10 s. Evictions alone are
proven where combined with GPUs changed and nodes touched they were not (8,000 GPUs with
evictions: 654 proven in 5.8 s against 3,126 unproven). GPUs changed and nodes touched
stay together: apart they took 4.1 s against 2.9 s on 8,000 GPUs. Headroom and instances
together, with the LP-guided search below, took 0.3-0.6 s on 2,000 fragmented GPUs with
little demand over five seeds, where apart they took 1-5 s and now and then more than 10 s
(`bench/fragmented.py`'s models solved alone under several seeds).

Inside a stage the criteria are combined with weights that provably separate them: a
criterion's weight exceeds the largest possible total of everything after it, so one unit of
it outweighs any change below it and the order stays exactly lexicographic. Stage 1 starts
from the best complete plan known before the solve (keep everything, or a baseline's plan):
CP-SAT then only ever improves on it, so no time limit can make it return less. Each later
stage fixes the earlier ones' values (equal when proven optimal, otherwise no worse) and
starts from the solution before it. With evictions allowed, stage 1 may run on a smaller
model (`pools.for_demand_alone`) whose solution starts the rest.

Each stage but the last begins with its LP relaxation (`prune.py`, `neighbourhood.py`): on
the fragmented benchmark's evicting fleets that LP is nearly integral and its bound the
stage's optimum, so a small neighbourhood of the starting plan reaches and proves it
(2,000 GPUs with gangs: the evictions stage in 0.09 s instead of 0.66 s; 8,000 GPUs with
gangs: 1,418 evictions proven instead of 2,085 unproven).

Determinism: a fixed seed, a deterministic time limit per stage, and with several workers
CP-SAT's interleaved search, which makes parallel runs repeatable (optional: a free portfolio
is stronger on many cores, not repeatable). A wall-clock deadline
guards the whole pass; if it cuts a stage short the report says FEASIBLE, not OPTIMAL, and
that stage's result may differ between runs (proven stages never do).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from migplan.planner.plan import DEMAND_STAGE, SolverStage, SolveStatus
from migplan.planner.solver.linear import maximize
from migplan.planner.solver.model import PlanningModel
from migplan.planner.solver.neighbourhood import FOUND, solve_neighbourhood
from migplan.planner.solver.prune import Duals, PendingLp, fix_within, lp_duals

Expression = Callable[[PlanningModel], cp_model.LinearExprT]
Progress = Callable[[str], None]


@dataclass(frozen=True)
class Criterion:
    """One objective criterion: what to optimise, which way, and its largest possible value."""

    name: str
    sense: str
    expression: Expression
    bound: Callable[[PlanningModel], int]


# The criteria's names after the demand met (`DEMAND_STAGE`), as `SolverStage.name` has them.
EVICTIONS = "evictions"
GPUS_CHANGED = "gpus changed"
NODES_TOUCHED = "nodes touched"
HEADROOM = "free headroom"
INSTANCES = "instances"

STAGES: tuple[tuple[Criterion, ...], ...] = (
    (Criterion(DEMAND_STAGE, "max", PlanningModel.weighted_met, lambda pm: 0),),
    (Criterion(EVICTIONS, "min", PlanningModel.evictions, PlanningModel.max_evictions),),
    (
        Criterion(GPUS_CHANGED, "min", PlanningModel.gpus_changed, PlanningModel.gpu_count),
        Criterion(NODES_TOUCHED, "min", PlanningModel.nodes_touched, PlanningModel.node_count),
    ),
    (
        Criterion(HEADROOM, "max", PlanningModel.headroom, PlanningModel.max_headroom),
        Criterion(INSTANCES, "min", PlanningModel.created, PlanningModel.max_created),
    ),
)
DETERMINISTIC_SECONDS_PER_WALL_SECOND = 5.0
"""CP-SAT's deterministic time runs 2-5x faster than the wall clock on these models once the
LP constraints are all in from the start (measured on the fragmented benchmark): a limit
of one deterministic second per wall second cut stages short (a 2,000-GPU headroom stage
ended without loading its hint after 0.8 s of a 4.3 s budget). With this ratio the wall
clock is what usually ends a stage that does not finish, which is not repeatable; a stage
that is proven optimal returns the same plan either way."""


PRUNE_SHARE = 0.7
"""Of the time left before a stage, the most its LP (reading the model and solving it) may
take. The LP is what lets the neighbourhood settle a stage, so it may take most of a short
budget: on 8,000 GPUs of three models with evictions, a YAML inventory and about 3 s left
for the evictions stage, these shares (0.7, and 0.6 of the rest for the neighbourhood)
proved 2,302 evictions in two runs of two, where 0.5 and 0.25 ended at 3,640 unproven in
both. Where the LP is cut short, the stage goes on without it."""


NEIGHBOURHOOD_SHARE = 0.6
"""Of the time left after a stage's LP, the most its neighbourhood (`neighbourhood.py`) may
take: the small model always holds the starting plan, so it is the surest use of little
time; where it does not settle the stage, its best solution starts the whole model's solve
(and stands, FEASIBLE, if that cannot load it in the rest)."""


@dataclass
class StagedResult:
    """Variable values after the last stage that found a solution."""

    values: dict[int, int] = field(default_factory=dict)
    """Proto variable index -> value (variables left out are 0, as in a hint)."""
    stages: list[SolverStage] = field(default_factory=list)
    optimal: bool = True
    found: bool = False
    objective: float = 0.0
    bound: float = 0.0
    """Stage 1's combined objective and its proven bound."""

    def value(self, var: cp_model.IntVar | None) -> int:
        """The value of `var` (0 for a class that cannot change)."""
        return 0 if var is None else self.values.get(var.index, 0)


def weights(pm: PlanningModel, criteria: tuple[Criterion, ...]) -> list[int]:
    """Each criterion's weight in its stage's objective, in priority order: one unit of a
    criterion outweighs the largest possible total of everything after it."""
    found: list[int] = []
    weight = 1
    for c in reversed(criteria):
        found.append(weight)
        weight *= c.bound(pm) + 1
    return found[::-1]


def combined(pm: PlanningModel, criteria: tuple[Criterion, ...]) -> cp_model.LinearExprT:
    """Criteria in priority order as one expression to maximise, with separating weights."""
    expressions = [c.expression(pm) for c in criteria]
    if all(isinstance(e, int) for e in expressions):
        return 0
    signed = [
        w if c.sense == "max" else -w for c, w in zip(criteria, weights(pm, criteria), strict=True)
    ]
    return cp_model.LinearExpr.weighted_sum(expressions, signed)


def _solver(left: float, workers: int, seed: int, *, interleave: bool) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = seed
    solver.parameters.interleave_search = workers > 1 and interleave
    solver.parameters.max_time_in_seconds = left
    solver.parameters.max_deterministic_time = left * DETERMINISTIC_SECONDS_PER_WALL_SECOND
    # The deeper LP relaxation proves the disruption and free-capacity stages in seconds
    # where the default level stalls without a bound (measured with bench/planner.py).
    solver.parameters.linearization_level = 2
    # Branch on the LP's solution: on the later stages of 2,000 and 8,000 fragmented GPUs the
    # default search took up to 10 s to find a first improvement on some seeds; guided by the
    # LP it found and proved the optimum in a steady 0.3-3 s (no stage measured was slower).
    solver.parameters.search_branching = cp_model.LP_SEARCH
    # Every linear constraint in the LP from the start, instead of adding violated ones as
    # the search goes: on 2,000 fragmented GPUs the later stages were proven 1.5-4x sooner
    # (nodes-touched and eviction stages most; bench/fragmented.py, 250 nodes).
    solver.parameters.add_lp_constraints_lazily = False
    # The hint is complete and feasible, so CP-SAT takes it as its first solution at once; a
    # search that follows it further only delays the real one (19 s on the 8,000-GPU
    # fragmented benchmark with evictions, where presolve took 3 s).
    solver.parameters.hint_conflict_limit = 0
    solver.parameters.cp_model_probing_level = 0
    # One presolve round instead of three: on the fragmented benchmark's stage models the
    # later rounds found little, and every stage was as fast or faster with one (the 2,000-GPU
    # evictions stage 0.42 s instead of 0.55 s); a 2,000-GPU headroom stage that one seed of
    # three left unproven after 5 s with three rounds was proven in 0.4-0.8 s on all three.
    solver.parameters.max_presolve_iterations = 1
    return solver


def _solve_stage(
    pm: PlanningModel,
    values: Mapping[int, int],
    *,
    deadline: float,
    lp: bool,
    settings: tuple[int, int, bool],
    pending: PendingLp | None = None,
    degenerate: bool = False,
    unit: int = 1,
) -> tuple[cp_model.CpSolverStatus, cp_model.CpSolver, Duals | None, float]:
    """Solve `pm` under its objective from the solution `values`: with `lp`, first the LP of
    the objective (fixing what no solution as good as the hint can move) and its
    neighbourhood, which settles the stage where its best reaches the LP's bound; else, or
    if it does not, the whole model. The status, the solver holding the solution, the LP's
    answer (for fixing after the stage) and a bound on the stage's objective that holds for
    the whole model (a neighbourhood's own bound holds only for it). `pending`: the LP,
    already started by the caller; `degenerate`: the stage comes after demand met (the GLOP
    settings of the LP it solves itself, `prune.GLOP_DEGENERATE`; not `pending`'s); `unit`:
    the weight of the stage's first criterion in its objective (`_neighbourhoods`)."""
    workers, seed, interleave = settings
    hinted = _hint(pm.model, values)
    left = deadline - time.monotonic()
    duals = None
    if pending is not None:
        duals = pending.result()
    elif lp:
        duals = lp_duals(
            pm.model, pm.relaxation, time_limit=PRUNE_SHARE * left, degenerate=degenerate
        )
    near = None
    if duals is not None and (left := deadline - time.monotonic()) > 0:
        fix_within(pm.model, pm.relaxation, duals, solution=hinted)
        near, better = _neighbourhoods(
            pm.model, duals, hinted, deadline=deadline, settings=settings, unit=unit
        )
        if better is None:
            near = None
        elif duals.proves(better):
            # CP-SAT proved the neighbourhood, the LP's bound the rest.
            return cp_model.OPTIMAL, near, duals, near.objective_value
        else:
            hinted = _hint(pm.model, dict(enumerate(better)))
            fix_within(pm.model, pm.relaxation, duals, solution=hinted)
    # CP-SAT calls a negative time limit an invalid model: the LP may have used the time up.
    left = max(0.0, deadline - time.monotonic())
    solver = _solver(left, workers, seed, interleave=interleave)
    status = solver.solve(pm.model)
    if status not in FOUND and near is not None and duals is not None:
        # No time to load its hint: the neighbourhood's best stands, under the LP's bound.
        return cp_model.FEASIBLE, near, duals, _external(pm.model, duals.bound)
    return status, solver, duals, solver.best_objective_bound


def _neighbourhoods(
    model: cp_model.CpModel,
    duals: Duals,
    hinted: list[int],
    *,
    deadline: float,
    settings: tuple[int, int, bool],
    unit: int,
) -> tuple[cp_model.CpSolver, list[int] | None]:
    """The LP's neighbourhood of the hint (`neighbourhood.py`); where its best does not reach
    the LP's bound by at least `unit` (the LP says the stage's first criterion can still
    improve), the wide neighbourhood of that best too. The solver holding the better of the
    two, and that solution (None where neither found one). Where only the later criteria may
    improve, the wide neighbourhood rarely settled the stage and cost up to 0.75 s (50 nodes
    with multi-instance pods and evictions, GPUs changed); where the first may, it settled it
    (the same fleet without evictions: 0.86 s to 0.24 s)."""
    workers, seed, interleave = settings
    near = _solver(
        NEIGHBOURHOOD_SHARE * (deadline - time.monotonic()), workers, seed, interleave=interleave
    )
    better = solve_neighbourhood(model, duals, hinted, solver=near)
    left = deadline - time.monotonic()
    if better is None or duals.proves(better) or left <= 0:
        return near, better
    if duals.reached(better) - duals.bound < unit:
        return near, better
    _hint(model, dict(enumerate(better)))
    wide = _solver(NEIGHBOURHOOD_SHARE * left, workers, seed, interleave=interleave)
    wider = solve_neighbourhood(model, duals, better, solver=wide, wide=True)
    if wider is not None and duals.reached(wider) < duals.reached(better):
        return wide, wider
    return near, better


def _external(model: cp_model.CpModel, internal: float) -> float:
    """A value of CP-SAT's internal, minimised objective in the model's own terms."""
    objective = model.proto.objective
    return (objective.scaling_factor or 1.0) * (internal + objective.offset)


def _hint(model: cp_model.CpModel, values: Mapping[int, int]) -> list[int]:
    """Hint every variable, so the stage starts from a complete, feasible solution; the
    hint, by variable index."""
    model.clear_hints()  # type: ignore[no-untyped-call]  # OR-Tools lacks a type hint here
    count = len(model.proto.variables)
    # Written into the proto in two batches: one add_hint call per variable took 30 ms a
    # stage on 2,000 GPUs.
    hint = model.proto.solution_hint
    hinted = [values.get(index, 0) for index in range(count)]
    hint.vars.extend(range(count))
    hint.values.extend(hinted)
    return hinted


def solve_stages(
    pm: PlanningModel,
    *,
    hint: Mapping[int, int],
    deadline: float,
    workers: int,
    seed: int,
    interleave: bool = True,
    progress: Progress | None = None,
    stages: Sequence[tuple[Criterion, ...]] = STAGES,
    before: StagedResult | None = None,
    continued: bool = False,
    lp: PendingLp | None = None,
) -> StagedResult:
    """Solve `stages` in order until `deadline` (time.monotonic()), starting from `hint`;
    `before` holds the stages already solved (on another model), which this continues.

    Every stage but the last (the last too where `continued`: a later call solves more
    stages on `pm`) first solves its LP: variables it shows no plan as good as the hint can
    move are fixed (`prune.py`), the LP's neighbourhood of the hint is searched
    (`neighbourhood.py`) and settles the stage where it reaches the LP's bound, and after
    the stage the same LP fixes what no plan as good as the one reached can move. `lp`: the
    first stage's LP, started by the caller (`start_lp`) on the model with its objective set,
    to overlap other work."""
    result = StagedResult(values=dict(hint))
    if before is not None:
        result.stages = list(before.stages)
        result.optimal, result.found = before.optimal, before.found
        result.objective, result.bound = before.objective, before.bound
    for criteria in stages:
        n = STAGES.index(criteria)
        left = deadline - time.monotonic()
        if left <= 0:
            result.optimal = False
            break
        expr = combined(pm, criteria)
        if isinstance(expr, int):  # nothing to choose
            result.stages += [
                SolverStage(
                    name=c.name,
                    sense=c.sense,
                    status=SolveStatus.OPTIMAL,
                    value=0.0,
                    bound=0.0,
                    seconds=0.0,
                )
                for c in criteria
            ]
            continue
        if progress:
            progress(f"solving stage {n + 1} ({', '.join(c.name for c in criteria)})")
        maximize(pm.model, expr)
        started = time.monotonic()
        status, solver, duals, bound = _solve_stage(
            pm,
            result.values,
            deadline=deadline,
            lp=continued or criteria is not stages[-1],
            settings=(workers, seed, interleave),
            pending=lp if criteria is stages[0] else None,
            degenerate=criteria is not STAGES[0],
            unit=weights(pm, criteria)[0],
        )
        seconds = time.monotonic() - started
        if status == cp_model.MODEL_INVALID:
            raise RuntimeError(f"planner bug: CP-SAT says the model is invalid (stage {n + 1})")
        if status not in FOUND:
            # The hint is a feasible solution, so only a deadline too close to load it ends
            # here: the hint stands, unproven.
            result.optimal = False
            result.stages.append(
                SolverStage(
                    name=criteria[0].name,
                    sense=criteria[0].sense,
                    status=SolveStatus.NOT_REACHED,
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
            result.bound = bound
        for k, c in enumerate(criteria):
            value = float(solver.value(c.expression(pm)))
            result.stages.append(
                SolverStage(
                    name=c.name,
                    sense=c.sense,
                    status=SolveStatus.OPTIMAL if proven else SolveStatus.FEASIBLE,
                    value=value,
                    bound=value if proven else None,
                    seconds=seconds if k == 0 else 0.0,
                )
            )
        solution = solver.response_proto.solution
        result.values = dict(enumerate(solution))
        result.found = True
        if duals is not None:
            fix_within(pm.model, pm.relaxation, duals, solution=solution)
        fixed = round(solver.objective_value)
        pm.model.add(expr == fixed if proven else expr >= fixed)
    result.optimal = result.optimal and result.found
    return result
