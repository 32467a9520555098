"""The lexicographic objective measured on concrete target layouts, for any plan.

The solver optimises it over counts; this scores finished targets the same way, so the plan
the solver makes and the plans it started from (keep everything, the baselines) can be
compared, and the better one returned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from migplan.planner.api.inventory import GpuState
from migplan.planner.assemble import GpuKey, demand_supply, gpu_change, gpu_key
from migplan.planner.demand import DemandItem
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
    """The criteria of the plan taking every GPU to its layout in `targets`."""
    _, allocation = demand_supply(demand, gpus, targets, rebuild=rebuild)
    return disruption(gpus, targets, weighted_met=allocation.weighted(demand), rebuild=rebuild)


def disruption(
    gpus: Sequence[GpuState],
    targets: Mapping[GpuKey, Layout],
    *,
    weighted_met: int,
    rebuild: bool = False,
) -> Score:
    """The criteria after demand met, which the caller knows (`weighted_met`): what ranks
    plans that meet the same demand, without giving the demand its instances (the costly
    part of `score` where gangs and bundles are packed node by node)."""
    evictions = changed = room = steps = 0
    nodes: set[str] = set()
    for gpu in gpus:
        after = targets[gpu_key(gpu)]
        room += headroom(gpu.model, after)
        if after == gpu.layout and gpu.mig_enabled:
            continue
        ops, removed = gpu_change(gpu.layout, after, gpu.mig_enabled, rebuild)
        if not ops:
            continue
        evictions += sum(1 + len(gpu.sharers.get(i, ())) for i in gpu.pins if i in removed)
        evictions += 1 if gpu.whole_gpu_pod else 0
        changed += 1
        nodes.add(gpu.node)
        steps += len(ops)
    return Score(weighted_met, -evictions, -changed, -len(nodes), room, -steps)
