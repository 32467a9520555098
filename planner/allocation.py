"""Giving a fixed supply of instances to demand items: the most priority-weighted demand met.

With one profile per item this is "higher priority first, then the order given". Either/or
items (a claim any of several profiles can serve) make it a small transportation problem,
solved exactly as a min-cost flow: source -> item (its count) -> one of its profiles
(cost: minus its weight) or straight to the sink (unmet, cost 0) -> sink (the profile's
supply). Explicit totals and pending pods draw on separate supplies (`DemandKind`), so each
profile appears once per kind. Ties keep the greedy order: each unit's cost is its weight
scaled past any rank difference, minus its rank.

Shared by the plan assembly, the solver's starting points and the validator, so a plan's
"met" means the same everywhere.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ortools.graph.python import min_cost_flow

from migplan.planner.demand import DemandItem, DemandKind, demand_weight

Available = Mapping[DemandKind, Mapping[str, int]]
"""Instances each kind of demand may take, per profile."""


@dataclass(frozen=True)
class Allocation:
    """Per demand item: instances met, and which profiles served them."""

    met: tuple[int, ...]
    served: tuple[dict[str, int], ...]

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


def allocate(demand: Sequence[DemandItem], available: Available) -> Allocation:
    """The most priority-weighted demand `available` can meet, ties to higher priority and
    then to earlier items; exact also with either/or items."""
    if any(item.alternatives for item in demand):
        return _flow(demand, available)
    return _greedy(demand, available)
