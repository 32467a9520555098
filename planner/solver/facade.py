"""`plan()`: inventory, demand and policy in; a validated-ready Plan out.

The pass, all inside one time limit:
1. classes of interchangeable GPUs, pools of what changed GPUs can become (`pools.py`);
2. starting points: keep everything, the nos-style greedy and the first-fit plans;
3. the CP-SAT stages from the best starting point (`stages.py`);
4. counts to concrete layouts with the fewest operations (`assign.py`);
5. the best of the solver's plan and the starting points on the whole lexicographic
   objective: whatever the limit, the plan is never worse than a baseline.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from migplan.planner.assemble import GpuKey, assemble_plan, gpu_key
from migplan.planner.baselines import first_fit_targets, greedy_targets
from migplan.planner.demand import DemandItem
from migplan.planner.explain import Explainer
from migplan.planner.inventory import GpuState
from migplan.planner.layout import Layout
from migplan.planner.plan import Plan, SolverReport, SolverStage
from migplan.planner.solver.assign import map_to_gpus
from migplan.planner.solver.classes import group_gpus
from migplan.planner.solver.hints import carry_over, hint_from_targets, keeping_more
from migplan.planner.solver.model import PlanningModel, demand_weight
from migplan.planner.solver.objective import Score, score
from migplan.planner.solver.pools import build_pools, for_demand_alone
from migplan.planner.solver.stages import STAGES, Criterion, StagedResult, solve_stages
from migplan.planner.spec import Disruption, PolicySpec

SEED = 0
KEEP = "keep everything"
SOLVER = "cp-sat"
Targets = dict[GpuKey, Layout]
STARTS: tuple[tuple[str, Callable[[Sequence[GpuState], Sequence[DemandItem]], Targets]], ...] = (
    ("greedy (nos)", greedy_targets),
    ("first-fit", first_fit_targets),
)
ASSEMBLY_SHARE = 0.15
"""Share of the time limit kept back for turning counts into layouts and the plan."""

Progress = Callable[[str], None]


def _relevant_profiles(
    gpus: Sequence[GpuState], demand: Sequence[DemandItem], policy: PolicySpec
) -> frozenset[str]:
    """Profiles worth creating: demanded ones, and in-use ones whose pods may be rehosted."""
    relevant = {item.profile for item in demand if item.count > 0}
    if policy.disruption is Disruption.EVICT:
        relevant |= {i.profile for g in gpus for i in g.pins}
    return frozenset(relevant)


def _quiet(_: str) -> None:
    pass


def plan(
    gpus: Sequence[GpuState],
    demand: Sequence[DemandItem],
    policy: PolicySpec,
    *,
    time_limit: float = 10.0,
    workers: int = 1,
    deterministic: bool = True,
    digest: str = "",
    progress: Progress | None = None,
) -> Plan:
    """The best plan for `gpus` under `policy`: most weighted demand met, then fewest
    evictions, GPUs changed and nodes touched, then most free headroom and fewest operations.

    `time_limit` bounds the whole pass, model building included. Deterministic for the same
    input and worker count unless `deterministic` is off (see `stages.py`). The report says
    OPTIMAL only when every solver stage was proven optimal, and names the plan the solver
    started from and the one returned.
    """
    started = time.monotonic()
    deadline = started + time_limit
    note = progress or _quiet
    rebuild = policy.whole_gpu_rebuild
    classes = group_gpus(gpus)
    relevant = sorted(_relevant_profiles(gpus, demand, policy))
    note(f"{len(gpus)} GPUs in {len(classes)} classes; enumerating what each can become")
    pools = build_pools(classes, profiles=relevant, policy=policy)
    explain = Explainer(gpus=gpus, classes=classes, pools=pools, policy=policy)
    note(f"{len(pools.pools)} pools, {pools.option_count()} options; building the model")
    pm = PlanningModel(classes=classes, pools=pools, demand=demand, policy=policy).build()

    keep = {gpu_key(g): g.layout for g in gpus}
    starts = [(KEEP, keep), *((n, {**keep, **f(gpus, demand)}) for n, f in STARTS)]
    # Best first; sorting is stable, so on ties the earlier (keep everything) leads.
    ranked = sorted(
        ((score(gpus, t, demand, rebuild=rebuild), name, t) for name, t in starts),
        key=lambda s: s[0],
        reverse=True,
    )
    hints: dict[str, dict[int, int] | None] = {}

    def hint_of(name: str, targets: Targets) -> dict[int, int] | None:
        """The plan as a model solution; None if the policy does not allow it."""
        if name not in hints:
            hints[name] = hint_from_targets(pm, targets)
        return hints[name]

    # Keeping everything is always allowed, so a start is always found.
    start, hint = next((n, h) for _, n, t in ranked if (h := hint_of(n, t)) is not None)
    note(f"starting from {start}; {pm.variable_count()} variables")
    built = time.monotonic() - started

    reserve = ASSEMBLY_SHARE * time_limit

    def run(
        model: PlanningModel,
        start_from: dict[int, int],
        stages: Sequence[tuple[Criterion, ...]],
        before: StagedResult | None = None,
    ) -> StagedResult:
        return solve_stages(
            model,
            hint=start_from,
            deadline=deadline - reserve,
            workers=workers,
            interleave=deterministic,
            seed=SEED,
            progress=note,
            stages=stages,
            before=before,
        )

    demand_pools = for_demand_alone(pools, classes, policy)
    if demand_pools is None:
        result = run(pm, hint, STAGES)
    else:
        small = PlanningModel(classes=classes, pools=demand_pools, demand=demand, policy=policy)
        first = run(small.build(), hint_of_small(small, ranked), STAGES[:1])
        met = sum(demand_weight(d) * first.value(v) for d, v in zip(demand, small.met, strict=True))
        pm.model.add(pm.weighted_met() == met if first.optimal else pm.weighted_met() >= met)
        # Evictions were free there: keep what in-use instances the demand met allows. A
        # starting plan that meets as much is often better still for the later stages.
        repaired = keeping_more(pm, map_to_gpus(pm=small, result=first, policy=policy))
        options = [(score(gpus, repaired, demand, rebuild=rebuild), "repaired", repaired)]
        options += [r for r in ranked if r[0].weighted_met >= met]
        start_full = next(
            (
                h
                for _, name, t in sorted(options, key=lambda o: o[0], reverse=True)
                if (h := hint_of(name, t)) is not None
            ),
            None,
        )
        if start_full is None:  # a planner bug, but the carried-over solution still holds
            start_full = carry_over(first.values, source=small, target=pm)
        result = run(pm, start_full, STAGES[1:], first)
    note("placing instances on GPUs")
    solved = map_to_gpus(pm=pm, result=result, policy=policy)
    # Never worse than where it started: the solver's plan against every starting point.
    # Ties go to the solver's plan (it comes first and max keeps the first).
    candidates = [(score(gpus, solved, demand, rebuild=rebuild), SOLVER, solved), *ranked]
    chosen_score, chosen, targets = next(
        c
        for c in sorted(candidates, key=lambda c: c[0], reverse=True)
        if c[1] == SOLVER or hint_of(c[1], c[2]) is not None
    )
    moved = [g for g in gpus if targets[gpu_key(g)] != g.layout]
    explain.note_plan(gpus_changed=len(moved), nodes_touched=len({g.node for g in moved}))
    report = _report(
        pm,
        result_bound=result.bound if result.found else None,
        chosen_score=chosen_score,
        optimal=result.optimal,
        stages=tuple(result.stages),
        seconds=time.monotonic() - started,
        workers=workers,
        build_seconds=built,
        start=start,
        chosen=chosen,
    )
    return assemble_plan(
        gpus=gpus,
        targets=targets,
        demand=demand,
        solver=report,
        digest=digest,
        rebuild=rebuild,
        explain=explain,
    )


def hint_of_small(
    pm: PlanningModel, ranked: Sequence[tuple[Score, str, Targets]]
) -> dict[int, int]:
    """The best starting plan as a solution of the demand-only model (keeping everything
    always is one)."""
    return next(h for _, _, t in ranked if (h := hint_from_targets(pm, t)) is not None)


def _report(
    pm: PlanningModel,
    *,
    result_bound: float | None,
    chosen_score: Score,
    optimal: bool,
    stages: tuple[SolverStage, ...],
    seconds: float,
    workers: int,
    build_seconds: float,
    start: str,
    chosen: str,
) -> SolverReport:
    """The solver's figures for the plan returned: its weighted demand met (the first stage),
    the proven bound (all demand met when the solver proved nothing), and the gap."""
    objective = float(chosen_score.weighted_met)
    if result_bound is None:
        result_bound = float(sum(demand_weight(d) * d.count for d in pm.demand))
    return SolverReport(
        method=SOLVER,
        status="OPTIMAL" if optimal else "FEASIBLE",
        objective=objective,
        bound=result_bound,
        gap=max(result_bound - objective, 0.0) / max(1.0, abs(result_bound)),
        wall_seconds=seconds,
        build_seconds=build_seconds,
        stages=stages,
        classes=len(pm.classes),
        pools=len(pm.pools.pools),
        variables=pm.variable_count(),
        workers=workers,
        seed=SEED,
        started_from=start,
        chosen=chosen,
    )
