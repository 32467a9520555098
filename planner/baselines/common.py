"""What the baselines share: the missing demand, and plans without the exact solver."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from migplan.planner.api.inventory import GpuState
from migplan.planner.assemble import GpuKey, assemble_plan, gpu_key
from migplan.planner.demand import DemandItem, DemandKind
from migplan.planner.fleet import fleet_of
from migplan.planner.hardware.layout import Layout
from migplan.planner.plan import Plan, SolverReport, SolveStatus


def _wanted(demand: Sequence[DemandItem]) -> dict[DemandKind, Counter[str]]:
    """Instances wanted per kind and profile, each item (or bundle part) at its first profile."""
    wanted: dict[DemandKind, Counter[str]] = {kind: Counter() for kind in DemandKind}
    for item in demand:
        for part in item.parts:
            wanted[item.kind][part.profiles[0]] += item.count * part.count
    return wanted


def missing_demand(gpus: Sequence[GpuState], demand: Sequence[DemandItem]) -> Counter[str]:
    """Instances per profile still wanted given the current layouts (unused ones count).

    An either/or item counts as demand for its first profile, and a bundle as its parts
    fleet-wide: the peers these baselines stand for have neither (the plan's allocation
    still lets any of an item's profiles serve it, and places each bundle pod on one node)."""
    fleet = fleet_of(gpus)
    total: Counter[str] = Counter()
    used: Counter[str] = Counter()
    for number, count in Counter(fleet.numbers).items():
        case = fleet.situations[number]
        for instance in case.layout.instances:
            total[instance.profile] += count
        for instance in case.pins:
            used[instance.profile] += count
    wanted = _wanted(demand)
    missing: Counter[str] = Counter()
    for profile in set(wanted[DemandKind.TOTAL]) | set(wanted[DemandKind.FREE]):
        short = max(
            wanted[DemandKind.TOTAL][profile] - total[profile],
            wanted[DemandKind.FREE][profile] - (total[profile] - used[profile]),
            0,
        )
        if short:
            missing[profile] = short
    return missing


def priority_of(demand: Sequence[DemandItem]) -> Callable[[str], int]:
    """The highest priority asking for each profile."""
    best: dict[str, int] = {}
    for d in demand:
        for part in d.parts:
            profile = part.profiles[0]
            best[profile] = max(best.get(profile, 0), d.priority)
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
    report = SolverReport(method=method, status=SolveStatus.HEURISTIC, wall_seconds=seconds)
    return assemble_plan(gpus=gpus, targets=full, demand=demand, solver=report, digest="")
