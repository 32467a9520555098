"""Pods that need several instances on one node, counted node by node in the model.

With classes and pools per node (`classes.group_gpus(by_node=True)`,
`pools.build_pools(per_node=True)`), the options a node's GPUs take say what the node holds,
so each node's free instances of a profile are a linear expression: what its kept GPUs hold
and what its changed GPUs' options hold, less the in-use instances they keep. Per node and
bundle item, `hosted` pods each take every part there (`node_parts`, by profile, for parts
several profiles serve); a node's parts stay within its free instances, and an item's pods
and parts add up, over nodes, to its `met` and fleet-wide part counts. Evicted pods need no
node of their own: they take single instances wherever they are left, which the fleet-wide
supply already counts. So a bundle is met exactly where one node holds all of a pod's
instances, in the model itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from migplan.planner.solver.linear import Expr
from migplan.planner.solver.linear import linear_sum as _sum

if TYPE_CHECKING:
    from migplan.planner.solver.model import PlanningModel


def node_free(pm: PlanningModel, node: str, profile: str) -> Expr:
    """Instances of `profile` on `node` that no kept in-use instance holds."""
    k = pm.pools.profiles.index(profile)
    constant = 0
    terms: list[tuple[Expr, int]] = []
    for c, cls in enumerate(pm.classes):
        if cls.key.node != node:
            continue
        free = int(pm.pools.keep_supply[c][k]) - sum(i.profile == profile for i in cls.pins)
        constant += free * cls.size
        changed = pm.changed[c]
        if changed is not None:
            terms.append((changed, -free))
    for pool, row in zip(pm.pools.pools, pm.take, strict=True):
        if pool.key.owner != node:
            continue
        kept = sum(i.profile == profile for i in pool.key.kept)
        terms += zip(row, (pool.supply[:, k] - kept).tolist(), strict=True)
    return _sum(terms, constant)


def add_node_bundles(pm: PlanningModel) -> None:
    """Per node the bundle pods it hosts, within its free instances (see the module)."""
    nodes = sorted({cls.key.node for cls in pm.classes})
    bundles = [n for n, item in enumerate(pm.demand) if item.per_pod]
    usage: dict[tuple[str, str], list[tuple[Expr, int]]] = {}
    for n in bundles:
        item = pm.demand[n]
        totals: list[dict[str, list[tuple[Expr, int]]]] = [{} for _ in item.per_pod]
        hosted = []
        for node in nodes:
            pods = pm.model.new_int_var(0, item.count, f"hosted_{n}_{node}")
            pm.hosted[node, n] = pods
            hosted.append((pods, 1))
            for j, part in enumerate(item.per_pod):
                if len(part.profiles) == 1:
                    (profile,) = part.profiles
                    usage.setdefault((node, profile), []).append((pods, part.count))
                    totals[j].setdefault(profile, []).append((pods, part.count))
                    continue
                row = []
                for profile in part.profiles:
                    var = pm.model.new_int_var(
                        0, item.count * part.count, f"node_part_{n}_{j}_{profile}_{node}"
                    )
                    pm.node_parts[node, n, j, profile] = var
                    row.append((var, 1))
                    usage.setdefault((node, profile), []).append((var, 1))
                    totals[j].setdefault(profile, []).append((var, 1))
                pm.model.add(_sum(row) == part.count * pods)
        pm.model.add(_sum(hosted) == pm.met[n])
        for j, row_vars in enumerate(pm.parts[n]):
            for profile, var in row_vars.items():
                pm.model.add(var == _sum(totals[j].get(profile, [])))
    for (node, profile), used in sorted(usage.items()):
        free = node_free(pm, node, profile) if profile in pm.pools.profiles else 0
        pm.model.add(_sum(used) <= free)
