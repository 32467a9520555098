"""A complete, feasible starting solution for the model, from any plan's target layouts.

Each changed GPU is put on the route that keeps the in-use instances its target keeps, and on
the first option of that pool with at least the target's supply and headroom (the pool's
options are exactly those no layout beats, so one exists for every admissible target). Counts
per node group, the demand met by priority, and the policy's limits follow. A plan the model
cannot express — it evicts under policy `none`, uses a profile policy forbids, breaks a
limit — has no hint (None).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import numpy as np

from migplan.planner.assemble import GpuKey, gpu_key
from migplan.planner.demand import DemandKind
from migplan.planner.layout import Layout
from migplan.planner.solver.model import PlanningModel
from migplan.planner.solver.pools import supply_of_layout
from migplan.planner.spec import Disruption
from migplan.planner.tables import headroom


def _option(pm: PlanningModel, c: int, target: Layout) -> tuple[int, int, int] | None:
    """(route, pool, option) through which GPUs of class c reach `target`, if any."""
    cls = pm.classes[c]
    kept = frozenset(target.instances) & cls.pins
    for r, route in enumerate(pm.pools.routes[c]):
        pool = pm.pools.pools[route.pool]
        if not set(pool.key.kept) <= kept:
            continue
        # Instances outside the pool's space add no supply: the option need not have them.
        inside = Layout.of(
            [
                i
                for i in target.instances
                if i in pool.key.kept or i in pool.key.may_keep or i.profile in pm.pools.profiles
            ]
        )
        wanted = supply_of_layout(inside, pm.pools.profiles)
        fits = (pool.supply >= wanted).all(axis=1) & (pool.headroom >= headroom(cls.model, inside))
        found = np.flatnonzero(fits)
        if len(found):
            return r, route.pool, int(found[0])
    return None


def hint_from_targets(pm: PlanningModel, targets: Mapping[GpuKey, Layout]) -> dict[int, int] | None:
    """Values of the model's variables (by proto index) for `targets`, or None."""
    values: dict[int, int] = {}

    def add(var: object, amount: int = 1) -> None:
        index = var.index  # type: ignore[attr-defined]
        values[index] = values.get(index, 0) + amount

    group_of = {node: g for g, group in enumerate(pm.groups) for node in group.nodes}
    found_for: dict[tuple[int, Layout], tuple[int, int, int] | None] = {}
    touched_nodes: set[str] = set()
    supply = Counter[str]()
    for c, cls in enumerate(pm.classes):
        for gpu in cls.gpus:
            target = targets[gpu_key(gpu)]
            unchanged = target == cls.current if cls.mig_enabled else not target
            if unchanged:
                supply.update(i.profile for i in cls.current.instances)
                continue
            if (c, target) not in found_for:
                found_for[(c, target)] = _option(pm, c, target)
            found = found_for[(c, target)]
            if found is None:
                return None
            route, pool, option = found
            add(pm.changed[c])
            if pm.flow[c][route] is not pm.changed[c]:
                add(pm.flow[c][route])
            add(pm.take[pool][option])
            add(pm.moved[group_of[gpu.node]][c])
            touched_nodes.add(gpu.node)
            for k, profile in enumerate(pm.pools.profiles):
                supply[profile] += int(pm.pools.pools[pool].supply[option, k])
    for node in touched_nodes:
        add(pm.touched[group_of[node]])
    if not _within_limits(pm, values, supply, len(touched_nodes)):
        return None
    _meet(pm, values, supply)
    return values


def _within_limits(
    pm: PlanningModel, values: dict[int, int], supply: Counter[str], nodes: int
) -> bool:
    changed = sum(values.get(v.index, 0) for v in pm.changed if v is not None)
    policy = pm.policy
    if policy.max_gpus_changed is not None and changed > policy.max_gpus_changed:
        return False
    if policy.max_nodes_changed is not None and nodes > policy.max_nodes_changed:
        return False
    if policy.disruption is Disruption.EVICT:
        return all(supply[p] >= n for p, n in pm.pins.items())
    return True


def _meet(pm: PlanningModel, values: dict[int, int], supply: Counter[str]) -> None:
    """Give the supply to demand items by priority, as much as each may take."""
    left = {
        DemandKind.TOTAL: Counter(supply),
        DemandKind.FREE: Counter({p: supply[p] - pm.pins[p] for p in supply}),
    }
    order = sorted(range(len(pm.demand)), key=lambda n: -pm.demand[n].priority)
    for n in order:
        item = pm.demand[n]
        pool = left[item.kind]
        got = max(min(item.count, pool[item.profile]), 0)
        pool[item.profile] -= got
        values[pm.met[n].index] = got
