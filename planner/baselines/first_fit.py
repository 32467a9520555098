"""First-fit per request (HAMi 2.10 / Dynamic Accelerator Slicer style, shared/reference/
peers.md): requests in priority order, smallest profile first; each takes a free instance of its
profile if one exists, else the first GPU (node, index order) where an instance fits at the
lowest free start next to what is there. Never destroys anything.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import lru_cache

from migplan.planner.api.inventory import GpuState
from migplan.planner.assemble import GpuKey, gpu_key
from migplan.planner.baselines.common import heuristic_plan, missing_demand, priority_of
from migplan.planner.demand import DemandItem
from migplan.planner.hardware.layout import Instance, Layout, is_valid
from migplan.planner.plan import Plan

_valid = lru_cache(maxsize=65536)(is_valid)
"""The same layouts come up on GPU after GPU."""


def _size(profile: str) -> tuple[int, str]:
    compute, _, rest = profile.partition("g.")
    return int(compute), rest


def first_fit_targets(
    gpus: Sequence[GpuState], demand: Sequence[DemandItem]
) -> dict[GpuKey, Layout]:
    """The layouts first-fit changes (never destroys anything)."""
    ordered = sorted(gpus, key=lambda g: (g.node, g.index))
    layouts = {gpu_key(g): g.layout for g in ordered}
    weight = priority_of(demand)
    missing = missing_demand(gpus, demand)
    requests = sorted(
        (p for p, n in missing.items() for _ in range(n)), key=lambda p: (-weight(p), _size(p))
    )
    # GPUs only fill up, so one that cannot take a profile never will: each profile keeps a
    # pointer to the first GPU that still might.
    first: dict[str, int] = {}
    for profile in requests:
        for n in range(first.get(profile, 0), len(ordered)):
            gpu = ordered[n]
            first[profile] = n
            if profile not in gpu.model.profiles_by_name or gpu.whole_gpu_pod:
                continue
            layout = layouts[gpu_key(gpu)]
            placed = next(
                (
                    layout.with_instance(Instance(s, profile))
                    for s in gpu.model.profile(profile).starts
                    if _valid(gpu.model, layout.with_instance(Instance(s, profile)))
                ),
                None,
            )
            if placed is not None:
                layouts[gpu_key(gpu)] = placed
                break
        else:
            first[profile] = len(ordered)
    return {gpu_key(g): layouts[gpu_key(g)] for g in ordered if layouts[gpu_key(g)] != g.layout}


def first_fit_plan(gpus: Sequence[GpuState], demand: Sequence[DemandItem]) -> Plan:
    """The first-fit plan."""
    started = time.monotonic()
    targets = first_fit_targets(gpus, demand)
    return heuristic_plan(
        method="first-fit",
        gpus=gpus,
        targets=targets,
        demand=demand,
        seconds=time.monotonic() - started,
    )
