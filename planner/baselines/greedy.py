"""nos-style greedy planning (nebuly-ai/nos `internal/partitioning/core/planner.go`, as
documented in shared/reference/peers.md): walk nodes in name order; on each GPU pick the valid
geometry that keeps every used instance and supplies the most still-missing demand (priority
weighted), keeping the current geometry on ties; stop when nothing is missing.

The scoring runs over the layout tables (every valid layout as arrays) rather than a Python
loop per layout; the choice, the first best layout in enumeration order, is the same.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from migplan.planner.api.inventory import GpuState
from migplan.planner.assemble import GpuKey, gpu_key
from migplan.planner.baselines.common import heuristic_plan, missing_demand, priority_of
from migplan.planner.demand import DemandItem
from migplan.planner.hardware.layout import Layout
from migplan.planner.hardware.tables import layout_table, mask_of, rows_within
from migplan.planner.plan import Plan


def greedy_targets(gpus: Sequence[GpuState], demand: Sequence[DemandItem]) -> dict[GpuKey, Layout]:
    """The layouts the nos-style greedy planner changes (never evicts)."""
    missing = missing_demand(gpus, demand)
    weight = priority_of(demand)
    targets: dict[GpuKey, Layout] = {}
    for gpu in sorted(gpus, key=lambda g: (g.node, g.index)):
        if not missing:
            break
        if not gpu.mig_enabled and gpu.whole_gpu_pod:
            continue
        model = gpu.model
        current = gpu.layout.profile_counts()
        names = (set(missing) | set(current)) & set(model.profiles_by_name)
        table = layout_table(model, frozenset(names))
        profiles = sorted(missing)
        pins = mask_of(model, gpu.pins)
        rows = rows_within(table, keep=pins, allowed=(1 << 64) - 1)
        have = np.array([current.get(p, 0) for p in profiles], dtype=np.int64)
        want = np.array([missing[p] for p in profiles], dtype=np.int64)
        gained = np.maximum(table.supply(tuple(profiles)) - have, 0)
        scores = (np.minimum(gained, want) * [weight(p) for p in profiles]).sum(axis=1)
        scores[~rows] = 0
        best = int(np.argmax(scores))
        if scores[best] <= 0:
            continue
        layout = table.layouts[best]
        targets[gpu_key(gpu)] = layout
        gained_counts = layout.profile_counts() - current
        for p, n in gained_counts.items():
            if p in missing:
                missing[p] -= min(n, missing[p])
                if not missing[p]:
                    del missing[p]
    return targets


def greedy_plan(gpus: Sequence[GpuState], demand: Sequence[DemandItem]) -> Plan:
    """The nos-style greedy plan (never evicts)."""
    started = time.monotonic()
    targets = greedy_targets(gpus, demand)
    return heuristic_plan(
        method="greedy (nos)",
        gpus=gpus,
        targets=targets,
        demand=demand,
        seconds=time.monotonic() - started,
    )
