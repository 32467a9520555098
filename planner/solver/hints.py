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
from collections.abc import Iterator, Mapping

import numpy as np
from ortools.sat.python import cp_model

from migplan.planner.allocation import Allocation, feasible_allocation
from migplan.planner.api.spec import Disruption
from migplan.planner.assemble import GpuKey, gpu_key
from migplan.planner.demand import DemandKind, gang_met, gangs_of
from migplan.planner.gang_allocation import solve_exactly
from migplan.planner.hardware.layout import Layout
from migplan.planner.hardware.tables import headroom, mask_of, rows_within
from migplan.planner.solver.model import PlanningModel
from migplan.planner.solver.pools import class_space, supply_of_layout


def _option(
    pm: PlanningModel, c: int, target: Layout
) -> tuple[int, int, int, tuple[int, ...]] | None:
    """(route, pool, option) through which GPUs of class c reach `target`, if any, and what
    that option supplies of each of the pools' profiles."""
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
            option = int(found[0])
            return r, route.pool, option, tuple(int(n) for n in pool.supply[option])
    return None


def hint_from_targets(pm: PlanningModel, targets: Mapping[GpuKey, Layout]) -> dict[int, int] | None:
    """Values of the model's variables (by proto index) for `targets`, or None.

    A class's GPUs are taken together per target layout, each such group once: a plan
    sends most GPUs of a class to a few layouts. On 40,000 fragmented GPUs (4,462 classes)
    nos-greedy's hint, which comes before the first stage, took 0.32-0.39 s this way and
    0.40-0.55 s counted GPU by GPU."""
    values: dict[int, int] = {}

    def add(var: object, amount: int = 1) -> None:
        index = var.index  # type: ignore[attr-defined]
        values[index] = values.get(index, 0) + amount

    group_of = {node: g for g, group in enumerate(pm.groups) for node in group.nodes}
    free_on: dict[str, Counter[str]] = {}
    """Per node, the target layouts' instances no kept in-use instance holds."""
    touched_nodes: set[str] = set()
    supply = Counter[str]()
    profiles = pm.pools.profiles
    for c, cls in enumerate(pm.classes):
        nodes_to: dict[Layout, list[str]] = {}  # the nodes of the GPUs sent to each layout
        for gpu in cls.gpus:
            target = targets[gpu_key(gpu)]
            nodes_to.setdefault(target, []).append(gpu.node)
            if pm.per_node:
                free = free_on.setdefault(gpu.node, Counter())
                free.update(i.profile for i in target.instances)
                free.subtract(i.profile for i in cls.pins if i in target.instances)
        for target, nodes in nodes_to.items():
            count = len(nodes)
            unchanged = target == cls.layout if cls.mig_enabled else not target
            if unchanged:
                for profile, n in cls.layout.profile_counts().items():
                    supply[profile] += n * count
                continue
            found = _option(pm, c, target)
            if found is None:
                return None
            route, pool, option, gives = found
            add(pm.changed[c], count)
            if pm.flow[c][route] is not pm.changed[c]:
                add(pm.flow[c][route], count)
            add(pm.take[pool][option], count)
            for g, moved in Counter(group_of[node] for node in nodes).items():
                add(pm.moved[g][c], moved)
            touched_nodes.update(nodes)
            for profile, n in zip(profiles, gives, strict=True):
                supply[profile] += n * count
    for node in touched_nodes:
        add(pm.touched[group_of[node]])
    if not _within_limits(pm, values, supply, len(touched_nodes)):
        return None
    _meet(pm, values, supply, free_on if pm.per_node else None)
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


def _meet(
    pm: PlanningModel,
    values: dict[int, int],
    supply: Counter[str],
    nodes: dict[str, Counter[str]] | None,
) -> None:
    """Give the supply to demand items as the plan assembly would (`allocation.allocate`);
    with `nodes` (the model counts bundles per node), each bundle pod on one of them."""
    available = {
        DemandKind.TOTAL: supply,
        DemandKind.FREE: {p: supply[p] - pm.pins[p] for p in supply},
    }
    if nodes is not None and any(item.per_pod for item in pm.demand):
        found = solve_exactly(pm.demand, available, nodes=nodes)
        allocation = Allocation(found.met, found.served, found.parts)
        for (node, n), (pods, there) in found.hosted.items():
            values[pm.hosted[node, n].index] = pods
            for j, part_there in enumerate(there):
                for profile, instances in part_there.items():
                    if (key := (node, n, j, profile)) in pm.node_parts:
                        values[pm.node_parts[key].index] = instances
    else:
        allocation = feasible_allocation(pm.demand, available)
    for gang, members in gangs_of(pm.demand).items():
        values[pm.gang_on[gang].index] = int(gang_met(pm.demand, allocation.met, members))
    for n, (met, serve, got, served) in enumerate(
        zip(pm.met, pm.serve, allocation.met, allocation.served, strict=True)
    ):
        values[met.index] = got
        for profile, var in serve.items():
            values[var.index] = served.get(profile, 0)
        for row, part in zip(pm.parts[n], allocation.parts[n], strict=True):
            for profile, var in row.items():
                values[var.index] = part.get(profile, 0)


def carry_over(
    values: Mapping[int, int], *, source: PlanningModel, target: PlanningModel
) -> dict[int, int]:
    """A solution of `source` as values of `target`: both built on the same classes and
    pools, `source` with a subset of the routes (see `pools.for_demand_alone`)."""
    out: dict[int, int] = {}

    def put(into: object, came: object) -> None:
        if into is not None and came is not None:
            out[into.index] = values.get(came.index, 0)  # type: ignore[attr-defined]

    for c, routes in enumerate(source.pools.routes):
        put(target.changed[c], source.changed[c])
        where = {route.pool: r for r, route in enumerate(target.pools.routes[c])}
        for route, flow in zip(routes, source.flow[c], strict=True):
            put(target.flow[c][where[route.pool]], flow)
    for row_to, row_from in zip(target.take, source.take, strict=True):
        for to, came in zip(row_to, row_from, strict=True):
            put(to, came)
    for to, came in _demand_variables(source=source, target=target):
        put(to, came)
    for to, came in zip(target.touched, source.touched, strict=True):
        put(to, came)
    for to_group, from_group in zip(target.moved, source.moved, strict=True):
        for c, came in from_group.items():
            put(to_group[c], came)
    return out


def _demand_variables(
    *, source: PlanningModel, target: PlanningModel
) -> Iterator[tuple[cp_model.IntVar, cp_model.IntVar]]:
    """(target's, source's) variable pairs of the demand items: met, served, parts."""
    yield from zip(target.met, source.met, strict=True)
    for gang, came in source.gang_on.items():
        yield target.gang_on[gang], came
    for key, came in source.hosted.items():
        yield target.hosted[key], came
    for part_key, came in source.node_parts.items():
        yield target.node_parts[part_key], came
    for to_item, from_item in zip(target.serve, source.serve, strict=True):
        for profile, came in from_item.items():
            yield to_item[profile], came
    for to_parts, from_parts in zip(target.parts, source.parts, strict=True):
        for to_row, from_row in zip(to_parts, from_parts, strict=True):
            for profile, came in from_row.items():
                yield to_row[profile], came


def keeping_more(pm: PlanningModel, targets: Mapping[GpuKey, Layout]) -> dict[GpuKey, Layout]:
    """`targets` with each changed GPU keeping every in-use instance it can while supplying at
    least as much of every profile: the same demand met with fewer evictions, a better start
    for the disruption stage than a plan found with evictions free."""
    better = dict(targets)
    memo: dict[tuple[int, Layout], Layout] = {}
    for c, cls in enumerate(pm.classes):
        if not cls.pins:
            continue
        for gpu in cls.gpus:
            target = targets[gpu_key(gpu)]
            if cls.pins <= set(target.instances):
                continue
            if (c, target) not in memo:
                memo[(c, target)] = _keep_more(pm, c, target)
            better[gpu_key(gpu)] = memo[(c, target)]
    return better


def _keep_more(pm: PlanningModel, c: int, target: Layout) -> Layout:
    cls = pm.classes[c]
    model = cls.model
    table, allowed = class_space(cls, policy=pm.policy, profiles=pm.pools.profiles)
    wanted = supply_of_layout(target, pm.pools.profiles)
    supply = table.supply(pm.pools.profiles)
    enough = (supply >= wanted).all(axis=1)
    kept = frozenset(target.instances) & cls.pins
    best = target
    for pin in sorted(cls.pins - kept):
        rows = np.flatnonzero(
            enough & rows_within(table, keep=mask_of(model, kept | {pin}), allowed=allowed)
        )
        if len(rows):
            kept = kept | {pin}
            best = table.layouts[int(rows[np.argmax(table.headroom[rows])])]
    return best
