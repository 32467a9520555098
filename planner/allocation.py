"""Giving a fixed supply of instances to demand items: the most priority-weighted demand met.

With one profile per item this is "higher priority first, then the order given". Either/or
items (a claim any of several profiles can serve) make it a small transportation problem,
solved exactly as a min-cost flow: source -> item (its count) -> one of its profiles
(cost: minus its weight) or straight to the sink (unmet, cost 0) -> sink (the profile's
supply). Explicit totals and pending pods draw on separate supplies (`DemandKind`), so each
profile appears once per kind. Ties keep the greedy order: each unit's cost is its weight
scaled past any rank difference, minus its rank.

Bundles (pods needing several instances, all on one node) are placed per node: priority
levels from the highest, at each level first each bundle's pods on the tightest nodes they
fit, the bundles with the most instances a pod first (first-fit decreasing), then the
single-instance items on what is left (the exact allocation above, over every item of that
level or lower, keeping only this level's share; their instances are taken from the nodes
with the least free first, so the larger free sets stay whole for lower levels' bundles).
Bundles go first because single instances serve anywhere: on the fragmented benchmark with
30 % multi-instance pods, singles first left 9-10 % of the weighted demand the model counted
unmet, bundles first 2-4 %. Largest first, because pairs placed first on the nodes that hold
three of a profile leave triples no node: on the same benchmark's plans, in demand order the
packing hosted 0.4-1.2 % less weighted demand than the exact allocation (`gang_allocation`)
finds for the same geometry, largest first as much as it on all four (2,000 and 8,000 GPUs,
both policies). The packing is greedy, not exact: it never reports more than the nodes can
host, and may host fewer than an exhaustive search would. Without node figures (the
solver's hints) the whole fleet is one node, which is the solver's relaxation.

Gangs (items met all together or not at all) make it a knapsack, and the per-node packing of
bundles is greedy: on fleets of up to `EXACT_NODES` nodes, and wherever gangs meet no bundle,
the allocation is solved exactly instead (`gang_allocation.py`); on larger fleets with bundles
the packing runs again without each gang it met only in part (twice at most; then such a
gang's instances are left free).

Shared by the plan assembly, the solver's starting points and the validator, so a plan's
"met" means the same everywhere.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from ortools.graph.python import min_cost_flow

from migplan.planner.demand import (
    DemandItem,
    DemandKind,
    Part,
    demand_weight,
    gang_problem,
    gangs_of,
)
from migplan.planner.gang_allocation import solve_exactly

EXACT_NODES = 64
"""Fleets of at most this many nodes get the exact allocation of bundles (CP-SAT, node by
node) and the model that counts each node's supply; larger fleets the greedy packing and the
fleet-wide relaxation, whose bound the plan's gap is measured against."""

Available = Mapping[DemandKind, Mapping[str, int]]
"""Instances each kind of demand may take, per profile."""
NodeFree = Mapping[str, Mapping[str, int]]
"""Per node: free instances per profile that pending pods may take."""


@dataclass(frozen=True)
class Allocation:
    """Per demand item: units met (instances, or a bundle's pods), which profiles served them,
    and for each of the item's parts which profiles served it."""

    met: tuple[int, ...]
    served: tuple[dict[str, int], ...]
    parts: tuple[tuple[dict[str, int], ...], ...] = ()

    def weighted(self, demand: Sequence[DemandItem]) -> int:
        """Priority-weighted demand met."""
        return sum(m * demand_weight(d) for m, d in zip(self.met, demand, strict=True))


def _order(demand: Sequence[DemandItem]) -> list[int]:
    """Items in the order supply goes to them when weights tie: higher priority first."""
    return sorted(range(len(demand)), key=lambda n: -demand[n].priority)


def _greedy(demand: Sequence[DemandItem], available: Available) -> Allocation:
    left = {
        kind: Counter({p: max(n, 0) for p, n in available[kind].items()}) for kind in DemandKind
    }
    met = [0] * len(demand)
    for n in _order(demand):
        item = demand[n]
        pool = left[item.kind]
        met[n] = min(item.count, pool[item.profile])
        pool[item.profile] -= met[n]
    return Allocation(
        met=tuple(met),
        served=tuple({d.profile: m} if m else {} for d, m in zip(demand, met, strict=True)),
    )


def _flow(demand: Sequence[DemandItem], available: Available) -> Allocation:
    flow = min_cost_flow.SimpleMinCostFlow()
    source, sink = 0, 1
    nodes: dict[tuple[DemandKind, str], int] = {}
    for item in demand:
        for profile in item.profiles:
            nodes.setdefault((item.kind, profile), 2 + len(demand) + len(nodes))
    scale = len(demand) + 1
    rank = {n: len(demand) - r for r, n in enumerate(_order(demand))}
    arcs: list[tuple[int, str, int]] = []
    for n, item in enumerate(demand):
        node = 2 + n
        flow.add_arc_with_capacity_and_unit_cost(source, node, item.count, 0)
        flow.add_arc_with_capacity_and_unit_cost(node, sink, item.count, 0)
        cost = -(demand_weight(item) * scale + rank[n])
        for profile in item.profiles:
            arc = flow.add_arc_with_capacity_and_unit_cost(
                node, nodes[item.kind, profile], item.count, cost
            )
            arcs.append((n, profile, arc))
    for (kind, profile), node in nodes.items():
        flow.add_arc_with_capacity_and_unit_cost(
            node, sink, max(available[kind].get(profile, 0), 0), 0
        )
    total = sum(item.count for item in demand)
    flow.set_node_supply(source, total)
    flow.set_node_supply(sink, -total)
    status = flow.solve()
    if status != flow.OPTIMAL:  # pragma: no cover - every arc is bounded and a path exists
        raise RuntimeError(f"demand allocation failed: min-cost flow status {status}")
    served: list[dict[str, int]] = [{} for _ in demand]
    for n, profile, arc in arcs:
        if got := flow.flow(arc):
            served[n][profile] = got
    return Allocation(met=tuple(sum(s.values()) for s in served), served=tuple(served))


def _plain(demand: Sequence[DemandItem], available: Available) -> Allocation:
    found = (
        _flow(demand, available)
        if any(i.alternatives for i in demand)
        else _greedy(demand, available)
    )
    return Allocation(found.met, found.served, tuple((s,) for s in found.served))


def allocate(
    demand: Sequence[DemandItem], available: Available, *, nodes: NodeFree | None = None
) -> Allocation:
    """The most priority-weighted demand `available` can meet, ties to higher priority and
    then to earlier items; exact also with either/or items. Bundles go to single nodes of
    `nodes` (the FREE instances per node; None: the whole fleet as one node)."""
    if nodes is None and any(item.per_pod for item in demand):
        nodes = {"": available[DemandKind.FREE]}
    small = nodes is None or len(nodes) <= EXACT_NODES
    gangs = any(item.gang for item in demand)
    if small and (gangs or nodes is not None):
        found = solve_exactly(demand, available, nodes=nodes)
        return Allocation(found.met, found.served, found.parts)
    if nodes is None:
        return _plain(demand, available)
    if gangs:
        return _packed_whole(demand, available, nodes)
    return _Packing(demand, available, nodes).run()


def spare_instances(
    demand: Sequence[DemandItem], available: Available, nodes: NodeFree
) -> dict[str, Counter[str]]:
    """Per node, the free instances the greedy packing of a large fleet leaves unused: where
    a short bundle's instances are stranded (`solver/gather.py`)."""
    packing = _Packing(demand, available, nodes)
    packing.run()
    return packing.nodes


def feasible_allocation(demand: Sequence[DemandItem], available: Available) -> Allocation:
    """A quick allocation that keeps gangs whole, the fleet taken as one node (the solver's
    relaxation): a feasible starting point, not the best one."""
    if not any(item.gang for item in demand):
        return allocate(demand, available)
    return _packed_whole(demand, available, {"": available[DemandKind.FREE]})


PACKING_PASSES = 2
"""Packings of a large fleet with gangs before the gangs still met in part are simply emptied
(each pass took 0.26 s at 8,000 GPUs, and passes ran up to 8 times)."""


def _packed_whole(
    demand: Sequence[DemandItem], available: Available, nodes: NodeFree
) -> Allocation:
    """The greedy packing on a large fleet, gangs kept whole: a gang the packing meets only in
    part gets nothing, and the rest is packed again without it; after `PACKING_PASSES` the
    gangs still met in part just give their instances back (left free)."""
    dropped: set[str] = set()
    groups = gangs_of(demand)
    for _ in range(PACKING_PASSES):
        trimmed = [replace(d, count=0) if d.gang in dropped else d for d in demand]
        found = _Packing(trimmed, available, nodes).run()
        broken = {
            gang
            for gang, members in groups.items()
            if gang not in dropped and gang_problem(demand, found.met, members)
        }
        if not broken:
            return found
        dropped |= broken
    emptied = {n for gang in broken for n in groups[gang]}
    return Allocation(
        met=tuple(0 if n in emptied else m for n, m in enumerate(found.met)),
        served=tuple({} if n in emptied else s for n, s in enumerate(found.served)),
        parts=tuple(tuple({} for _ in p) if n in emptied else p for n, p in enumerate(found.parts)),
    )


class _Packing:
    """The per-level allocation with bundles (see the module's docstring)."""

    def __init__(self, demand: Sequence[DemandItem], available: Available, nodes: NodeFree):
        self.demand = demand
        self.total = Counter({p: max(n, 0) for p, n in available[DemandKind.TOTAL].items()})
        self.nodes = {
            name: Counter({p: n for p, n in free.items() if n > 0})
            for name, free in sorted(nodes.items())
        }
        self.met = [0] * len(demand)
        self.parts: list[list[Counter[str]]] = [[Counter() for _ in d.parts] for d in demand]
        self.holding: dict[str, set[str]] = {}
        """Per profile, the nodes with a free instance of it (kept as instances are taken:
        scanning every node per item took most of a 1,000-node packing)."""
        for name, free in self.nodes.items():
            for profile in free:
                self.holding.setdefault(profile, set()).add(name)

    def run(self) -> Allocation:
        """Every level, highest priority first."""
        for level in sorted({d.priority for d in self.demand}, reverse=True):
            for n in self._bundles_largest_first(level):
                self._bundle(n)
            self._singles(level)
        served = [sum(parts, Counter()) for parts in self.parts]
        return Allocation(
            met=tuple(self.met),
            served=tuple(dict(s) for s in served),
            parts=tuple(tuple(dict(p) for p in parts) for parts in self.parts),
        )

    def _bundles_largest_first(self, level: int) -> list[int]:
        """This level's bundle items, the most instances a pod first (then in demand order):
        first-fit decreasing, so pairs do not break up the nodes that could host triples."""
        bundles = [n for n, d in enumerate(self.demand) if d.per_pod and d.priority == level]
        return sorted(bundles, key=lambda n: -self.demand[n].per_unit)

    def _free(self) -> Counter[str]:
        return sum(self.nodes.values(), Counter())

    def _singles(self, level: int) -> None:
        """This level's single-instance items, from an allocation of every single item at this
        level or lower (so an either/or item leaves lower items the profiles they need)."""
        chosen = [n for n, d in enumerate(self.demand) if not d.per_pod and d.priority <= level]
        if not any(self.demand[n].priority == level for n in chosen):
            return
        found = _plain(
            [self.demand[n] for n in chosen],
            {DemandKind.TOTAL: self.total, DemandKind.FREE: self._free()},
        )
        for n, got, served in zip(chosen, found.met, found.served, strict=True):
            if self.demand[n].priority != level:
                continue
            self.met[n] = got
            self.parts[n][0].update(served)
            for profile, count in served.items():
                if self.demand[n].kind is DemandKind.TOTAL:
                    self.total[profile] -= count
                else:
                    self._take_scattered(profile, count)

    def _take_scattered(self, profile: str, count: int) -> None:
        holders = self.holding.get(profile, set())
        take_scattered(self.nodes, profile, count, holders=holders)
        holders.difference_update([name for name in holders if self.nodes[name][profile] <= 0])

    def _bundle(self, n: int) -> None:
        """As many of bundle `n`'s pods as fit, each on one node, tightest nodes first."""
        item = self.demand[n]
        size = item.per_unit
        wanted = {profile for part in item.per_pod for profile in part.profiles}
        # Only nodes holding enough of the profiles the pod takes can host one (at 1,000
        # nodes, ordering and trying every node took most of a plan's scoring).
        holding = set().union(*(self.holding.get(profile, ()) for profile in wanted))
        hosts = sorted(
            (self.nodes[name].total(), name)
            for name in holding
            if sum(self.nodes[name].get(p, 0) for p in wanted) >= size
        )
        for _, name in hosts:
            free = self.nodes[name]
            while self.met[n] < item.count and free.total() >= size:
                taken = _fit(item.per_pod, free)
                if taken is None:
                    break
                for part, got in zip(self.parts[n], taken, strict=True):
                    part.update(got)
                    free.subtract(got)
                    for profile in got:
                        if free[profile] <= 0:
                            self.holding[profile].discard(name)
                self.met[n] += 1
            if self.met[n] == item.count:
                return


def take_scattered(
    nodes: Mapping[str, Counter[str]],
    profile: str,
    count: int,
    *,
    holders: Collection[str] | None = None,
) -> None:
    """Take `count` free instances of `profile` from `nodes`, those with the least free first,
    so the nodes with the most free instances stay whole for pods that need several.
    `holders`: the only nodes that may have one, where the caller keeps track."""
    names = nodes if holders is None else holders
    holders_by_size = [(nodes[n].total(), n) for n in names if nodes[n].get(profile, 0) > 0]
    holders_by_size.sort()
    for _, name in holders_by_size:
        took = min(count, nodes[name][profile])
        nodes[name][profile] -= took
        count -= took
        if not count:
            return


def hostable(parts: Sequence[Part], nodes: Mapping[str, Mapping[str, int]]) -> int:
    """Pods needing `parts` each that `nodes`' free instances host, one node per pod, with
    nothing else wanted (as the allocation packs them)."""
    pods = 0
    for free in nodes.values():
        left = Counter(free)
        while (taken := _fit(parts, left)) is not None:
            for got in taken:
                left.subtract(got)
            pods += 1
    return pods


def _fit(parts: Sequence[Part], free: Mapping[str, int]) -> list[Counter[str]] | None:
    """Instances from `free` for one pod's parts (fewest alternatives first, smallest
    profile first), or None when they do not all fit."""
    left: dict[str, int] = {}
    taken: list[Counter[str]] = [Counter() for _ in parts]
    for j in _part_order(tuple(parts)):
        need = parts[j].count
        for profile in parts[j].profiles:
            have = left[profile] if profile in left else free.get(profile, 0)
            got = min(need, have)
            if got > 0:
                taken[j][profile] += got
                left[profile] = have - got
                need -= got
        if need:
            return None
    return taken


@lru_cache(maxsize=4096)
def _part_order(parts: tuple[Part, ...]) -> tuple[int, ...]:
    """The order `_fit` fills a pod's parts in: fewest alternatives first."""
    return tuple(sorted(range(len(parts)), key=lambda j: (len(parts[j].profiles), j)))
