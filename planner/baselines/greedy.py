"""nos-style greedy planning (nebuly-ai/nos `internal/partitioning/core/planner.go`, as
documented in shared/reference/peers.md): walk nodes in name order; on each GPU pick the valid
geometry that keeps every used instance and supplies the most still-missing demand (priority
weighted), keeping the current geometry on ties; stop when nothing is missing.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

from migplan.planner.assemble import gpu_key
from migplan.planner.baselines.common import heuristic_plan, missing_demand, priority_of
from migplan.planner.catalog import GpuModel
from migplan.planner.demand import DemandItem
from migplan.planner.enumeration import enumerate_layouts
from migplan.planner.inventory import GpuState
from migplan.planner.layout import Instance, Layout
from migplan.planner.plan import Plan


@lru_cache(maxsize=256)
def _layouts(
    model: GpuModel, names: frozenset[str]
) -> tuple[tuple[Layout, frozenset[Instance], Counter[str]], ...]:
    return tuple(
        (lay, frozenset(lay.instances), lay.profile_counts())
        for lay in enumerate_layouts(model, profiles=names)
    )


def greedy_plan(gpus: Sequence[GpuState], demand: Sequence[DemandItem]) -> Plan:
    """The nos-style greedy plan (never evicts)."""
    started = time.monotonic()
    missing = missing_demand(gpus, demand)
    weight = priority_of(demand)
    targets: dict[tuple[str, int], Layout] = {}
    for gpu in sorted(gpus, key=lambda g: (g.node, g.index)):
        if not missing:
            break
        if not gpu.mig_enabled and gpu.whole_gpu_pod:
            continue
        pins = set(gpu.pins)
        current = gpu.layout.profile_counts()
        names = set(missing) | set(current)
        best, best_score = gpu.layout, 0
        for layout in enumerate_layouts(
            gpu.model, profiles=names & set(gpu.model.profiles_by_name)
        ):
            if not pins <= set(layout.instances):
                continue
            gained = layout.profile_counts() - current
            score = sum(weight(p) * min(n, missing[p]) for p, n in gained.items())
            if score > best_score:
                best, best_score = layout, score
        if best_score:
            targets[gpu_key(gpu)] = best
            gained = best.profile_counts() - current
            missing -= Counter({p: min(n, missing[p]) for p, n in gained.items()})
    return heuristic_plan(
        method="greedy (nos)",
        gpus=gpus,
        targets=targets,
        demand=demand,
        seconds=time.monotonic() - started,
    )
