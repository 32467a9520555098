"""`plan()`: inventory, demand and policy in; a validated-ready Plan out."""

from __future__ import annotations

import time
from collections.abc import Sequence

from migplan.planner.assemble import assemble_plan, gpu_key
from migplan.planner.demand import DemandItem
from migplan.planner.explain import Explainer
from migplan.planner.inventory import GpuState
from migplan.planner.plan import Plan, SolverReport
from migplan.planner.solver.candidates import candidates_for
from migplan.planner.solver.classes import group_gpus
from migplan.planner.solver.mapping import map_to_gpus
from migplan.planner.solver.model import PlanningModel
from migplan.planner.solver.stages import solve_stages
from migplan.planner.spec import Disruption, PolicySpec

SEED = 0


def _relevant_profiles(
    gpus: Sequence[GpuState], demand: Sequence[DemandItem], policy: PolicySpec
) -> frozenset[str]:
    """Profiles worth creating: demanded ones, and in-use ones whose pods may be rehosted."""
    relevant = {item.profile for item in demand if item.count > 0}
    if policy.disruption is Disruption.EVICT:
        relevant |= {i.profile for g in gpus for i in g.pins}
    return frozenset(relevant)


def plan(
    gpus: Sequence[GpuState],
    demand: Sequence[DemandItem],
    policy: PolicySpec,
    *,
    time_limit: float = 10.0,
    workers: int = 1,
    digest: str = "",
) -> Plan:
    """The best plan for `gpus` under `policy`: most weighted demand met, then fewest
    evictions, GPUs changed and nodes touched, then most free headroom and fewest operations.

    Deterministic for the same input (see `stages.py`). The report says OPTIMAL only when
    every stage was proven optimal.
    """
    started = time.monotonic()
    classes = group_gpus(gpus)
    relevant = _relevant_profiles(gpus, demand, policy)
    candidates = [candidates_for(cls, relevant=relevant, policy=policy) for cls in classes]
    explain = Explainer(gpus=gpus, classes=classes, candidates=candidates, policy=policy)
    pm = PlanningModel(classes=classes, candidates=candidates, demand=demand, policy=policy).build()
    result = solve_stages(pm, time_limit=time_limit, workers=workers, seed=SEED)
    if result.found:
        targets = map_to_gpus(
            classes=classes,
            candidates=candidates,
            x=result.x,
            groups=pm.groups,
            moved=result.moved,
            touched=result.touched,
        )
    else:
        targets = {gpu_key(g): g.layout for g in gpus}
    moved = [g for g in gpus if targets[gpu_key(g)] != g.layout]
    explain.note_plan(gpus_changed=len(moved), nodes_touched=len({g.node for g in moved}))
    objective, bound = result.objective, result.bound
    report = SolverReport(
        method="cp-sat",
        status="OPTIMAL" if result.optimal else ("FEASIBLE" if result.found else "UNKNOWN"),
        objective=objective,
        bound=bound,
        gap=abs(bound - objective) / max(1.0, abs(bound)),
        wall_seconds=time.monotonic() - started,
        stages=tuple(result.stages),
        classes=len(classes),
        variables=pm.variable_count(),
        workers=workers,
        seed=SEED,
    )
    return assemble_plan(
        gpus=gpus,
        targets=targets,
        demand=demand,
        solver=report,
        digest=digest,
        rebuild=policy.whole_gpu_rebuild,
        explain=explain,
    )
