"""The lexicographic objective measured on concrete target layouts, for any plan.

The solver optimises it over counts; this scores finished targets the same way, so the plan
the solver makes and the plans it started from (keep everything, the baselines) can be
compared, and the better one returned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from migplan.planner.api.inventory import GpuState
from migplan.planner.assemble import GpuKey, demand_supply, gpu_change
from migplan.planner.demand import DemandItem
from migplan.planner.fleet import Case, Counted, Situation, fleet_of
from migplan.planner.hardware.layout import Layout
from migplan.planner.hardware.tables import headroom


class Score(NamedTuple):
    """A plan's criteria in priority order, each as a number where larger is better."""

    weighted_met: int
    evictions: int
    """Negated: pods evicted."""
    gpus_changed: int
    """Negated."""
    nodes_touched: int
    """Negated."""
    headroom: int
    operations: int
    """Negated."""


def score(
    gpus: Sequence[GpuState],
    targets: Mapping[GpuKey, Layout],
    demand: Sequence[DemandItem],
    *,
    rebuild: bool = False,
) -> Score:
    """The criteria of the plan taking every GPU to its layout in `targets` (pass a
    `fleet.Fleet` where many plans of one fleet are scored)."""
    fleet = fleet_of(gpus)
    counted = fleet.counted(targets)  # measured twice below: 15 ms each time at 40,000 GPUs
    _, allocation = demand_supply(demand, fleet, targets, rebuild=rebuild, counted=counted)
    return disruption(
        fleet,
        targets,
        weighted_met=allocation.weighted(demand),
        rebuild=rebuild,
        counted=counted,
    )


def disruption(
    gpus: Sequence[GpuState],
    targets: Mapping[GpuKey, Layout],
    *,
    weighted_met: int,
    rebuild: bool = False,
    counted: Counted | None = None,
) -> Score:
    """The criteria after demand met, which the caller knows (`weighted_met`): what ranks
    plans that meet the same demand, without giving the demand its instances (the costly
    part of `score` where gangs and bundles are packed node by node). `counted`: the
    targets counted already (`Fleet.counted`)."""
    fleet = fleet_of(gpus)
    afters, cases = counted or fleet.counted(targets)
    evictions = changed = room = steps = 0
    moved: set[Case] = set()
    for (number, after), gpu_count in cases.items():
        case = fleet.situations[number]
        room += headroom(case.model, after) * gpu_count
        change = gpu_disruption(case, after, rebuild=rebuild)
        if change is None:
            continue
        pods, ops = change
        evictions += pods * gpu_count
        changed += gpu_count
        steps += ops * gpu_count
        moved.add((number, after))
    nodes = fleet.nodes_with(afters, moved)
    return Score(weighted_met, -evictions, -changed, -len(nodes), room, -steps)


def gpu_disruption(case: Situation, after: Layout, *, rebuild: bool) -> tuple[int, int] | None:
    """A GPU in situation `case` taking `after`: the pods it evicts (those on instances it
    destroys, and a pod using it whole) and its operations; None where it does not change."""
    if after == case.layout and case.mig_enabled:
        return None
    ops, removed = gpu_change(case.layout, after, case.mig_enabled, rebuild)
    if not ops:
        return None
    return case.pods_on(removed) + case.whole_gpu_used, len(ops)
