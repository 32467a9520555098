"""What the baselines share: the missing demand, and plans without the exact solver."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from migplan.planner.assemble import GpuKey, assemble_plan, gpu_key
from migplan.planner.demand import DemandItem, DemandKind
from migplan.planner.inventory import GpuState
from migplan.planner.layout import Layout
from migplan.planner.plan import Plan, SolverReport


def missing_demand(gpus: Sequence[GpuState], demand: Sequence[DemandItem]) -> Counter[str]:
    """Instances per profile still wanted given the current layouts (unused ones count).

    An either/or item counts as demand for its first profile: the peers these baselines
    stand for have no either/or demand (the plan's allocation still lets any of its
    profiles serve it)."""
    total: Counter[str] = Counter()
    used: Counter[str] = Counter()
    for gpu in gpus:
        total.update(i.profile for i in gpu.layout.instances)
        used.update(i.profile for i in gpu.pins)
    missing: Counter[str] = Counter()
    for profile in {d.profile for d in demand}:
        want_total = sum(
            d.count for d in demand if d.profile == profile and d.kind is DemandKind.TOTAL
        )
        want_free = sum(
            d.count for d in demand if d.profile == profile and d.kind is DemandKind.FREE
        )
        short = max(want_total - total[profile], want_free - (total[profile] - used[profile]), 0)
        if short:
            missing[profile] = short
    return missing


def priority_of(demand: Sequence[DemandItem]) -> Callable[[str], int]:
    """The highest priority asking for each profile."""
    best: dict[str, int] = {}
    for d in demand:
        best[d.profile] = max(best.get(d.profile, 0), d.priority)
    return lambda profile: best.get(profile, 0)


def heuristic_plan(
    *,
    method: str,
    gpus: Sequence[GpuState],
    targets: Mapping[GpuKey, Layout],
    demand: Sequence[DemandItem],
    seconds: float,
) -> Plan:
    """A Plan for heuristic targets (status HEURISTIC: no bound is claimed)."""
    full = {gpu_key(g): targets.get(gpu_key(g), g.layout) for g in gpus}
    report = SolverReport(method=method, status="HEURISTIC", wall_seconds=seconds)
    return assemble_plan(gpus=gpus, targets=full, demand=demand, solver=report, digest="")
