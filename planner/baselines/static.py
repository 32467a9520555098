"""One static geometry per GPU model (mig-parted "all-balanced" style): every GPU of a model
that no pod uses gets the same maximal layout, the one meeting the most remaining demand;
GPUs with in-use instances keep theirs (mig-manager rebuilds whole GPUs).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence

from migplan.planner.api.inventory import GpuState
from migplan.planner.assemble import GpuKey, gpu_key
from migplan.planner.baselines.common import heuristic_plan, missing_demand, priority_of
from migplan.planner.demand import DemandItem
from migplan.planner.hardware.enumeration import enumerate_layouts
from migplan.planner.hardware.layout import Layout
from migplan.planner.plan import Plan


def static_targets(gpus: Sequence[GpuState], demand: Sequence[DemandItem]) -> dict[GpuKey, Layout]:
    """The layouts the best-single-geometry-per-model plan changes."""
    missing = missing_demand(gpus, demand)
    # Free GPUs' current instances come back as supply once rebuilt.
    free_gpus = [g for g in gpus if not g.pins and not g.whole_gpu_pod]
    for gpu in free_gpus:
        for profile, n in gpu.layout.profile_counts().items():
            if profile in missing or any(d.profile == profile for d in demand):
                missing[profile] += n
    weight = priority_of(demand)
    targets: dict[tuple[str, int], Layout] = {}
    for model_key in sorted({g.model.model for g in free_gpus}):
        members = [g for g in free_gpus if g.model.model == model_key]
        model = members[0].model
        names = set(missing) & set(model.profiles_by_name)
        if not names:
            continue
        best, best_score = None, 0
        for layout in enumerate_layouts(model, profiles=names, maximal=True):
            supply = Counter({p: n * len(members) for p, n in layout.profile_counts().items()})
            score = sum(
                weight(p) * int(p.split("g.")[0]) * min(n, missing[p]) for p, n in supply.items()
            )
            if score > best_score:
                best, best_score = layout, score
        if best is None:
            continue
        for gpu in members:
            targets[gpu_key(gpu)] = best
        for p, n in best.profile_counts().items():
            missing[p] = max(missing[p] - n * len(members), 0)
    return targets


def static_plan(gpus: Sequence[GpuState], demand: Sequence[DemandItem]) -> Plan:
    """The best-single-geometry-per-model plan."""
    started = time.monotonic()
    targets = static_targets(gpus, demand)
    return heuristic_plan(
        method="static geometry",
        gpus=gpus,
        targets=targets,
        demand=demand,
        seconds=time.monotonic() - started,
    )
