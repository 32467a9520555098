"""Scale-out: the cheapest new nodes, and their layouts, for the pending demand that the plan
of the covered GPUs leaves unmet (spec.scaleOut).

The covered GPUs come first: this runs on what their plan leaves (`demand.left_unmet`), so a
new node is asked for only where no reshaping of the fleet meets the demand. Each new node of
an offer is its own node in the model, because a pod that needs several instances needs them
on one node:
- `used[o][i]`: whether node i of offer o is asked for; nodes of an offer are interchangeable,
  so node i + 1 only after node i;
- `gpus[o][i][r]`: its GPUs given option r, an offer's layouts over the profiles in demand,
  none beaten in every profile by another (a GPU given none stays whole);
- per item and node the units it hosts, each part's instances there by profile, within the
  node's instances; an item's units met add up over nodes; gangs all or nothing
  (`gang_allocation.tie_gangs`), so no node is asked for a gang that would still not fit.
Stage 1 maximises the priority-weighted demand met; stage 2 keeps that and minimises the
nodes' cost, then the GPUs partitioned. One worker and a fixed seed: the same input asks for
the same nodes. What each node hosts is in the result, which the validator checks.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from migplan.planner.api.offers import Offer
from migplan.planner.api.spec import PolicySpec
from migplan.planner.demand import DemandItem, demand_weight
from migplan.planner.gang_allocation import tie_gangs
from migplan.planner.hardware.layout import Instance, Layout
from migplan.planner.hardware.tables import layout_table
from migplan.planner.plan import Hosted, NewNode, ScaleOutItem, ScaleOutPlan
from migplan.planner.solver.linear import linear_sum as _sum
from migplan.planner.solver.pools import allowed_new_profiles, pareto_rows

Left = Sequence[tuple[int, DemandItem]]
"""Demand the covered GPUs leave: (index in the plan's demand, the item as left)."""


@dataclass
class _Node:
    """One possible new node: its offer, whether it is used, its GPUs per option."""

    offer: Offer
    name: str
    options: tuple[Layout, ...]
    supply: dict[str, list[int]]
    used: cp_model.IntVar
    gpus: list[cp_model.IntVar]
    usage: dict[str, list[tuple[cp_model.IntVar, int]]] = field(default_factory=dict)
    hosted: dict[int, tuple[cp_model.IntVar, list[dict[str, cp_model.IntVar]]]] = field(
        default_factory=dict
    )


def _options(offer: Offer, profiles: frozenset[str]) -> tuple[tuple[Layout, ...], list[str]]:
    """The layouts worth giving a GPU of `offer` (none beaten in every profile of `profiles`
    by another, the empty one left out) and the profiles they hold."""
    names = sorted(profiles & {p.name for p in offer.model.profiles})
    if not names:
        return (), []
    table = layout_table(offer.model, frozenset(names))
    supply = table.supply(tuple(names))
    rows = [int(r) for r in pareto_rows(supply) if supply[r].any()]
    return tuple(table.layouts[r] for r in rows), names


class _ScaleOutModel:
    """The model of one scale-out problem (see the module)."""

    def __init__(
        self, offers: Sequence[Offer], left: Left, policy: PolicySpec, budget: int | None
    ) -> None:
        self.model = cp_model.CpModel()
        self.left = left
        self.nodes: list[_Node] = []
        wanted = frozenset(p for _, item in left for p in item.profiles)
        for offer in offers:
            options, names = _options(offer, wanted & allowed_new_profiles(offer.model, policy))
            if options:
                self._offer_nodes(offer, options, names)
        self.met = [
            self.model.new_int_var(0, item.count, f"met_{n}") for n, (_, item) in enumerate(left)
        ]
        for n, (_, item) in enumerate(left):
            hosted = [self._host(node, n, item) for node in self.nodes]
            self.model.add(_sum([(v, 1) for v in hosted if v is not None]) == self.met[n])
        for node in self.nodes:
            for profile, used in node.usage.items():
                cap = [(g, s) for g, s in zip(node.gpus, node.supply[profile], strict=True) if s]
                self.model.add(_sum(used) <= _sum(cap))
        tie_gangs(self.model, self.met, [item for _, item in left])
        if budget is not None:
            self.model.add(_sum([(node.used, 1) for node in self.nodes]) <= budget)

    def _offer_nodes(self, offer: Offer, options: tuple[Layout, ...], names: list[str]) -> None:
        supply = {p: [c[p] for c in (o.profile_counts() for o in options)] for p in names}
        previous = None
        for i in range(offer.max_nodes):
            name = f"{offer.name}-{i + 1}"
            used = self.model.new_bool_var(f"used_{name}")
            gpus = [self.model.new_int_var(0, offer.gpus, f"gpus_{name}_{r}") for r in options]
            self.model.add(_sum([(g, 1) for g in gpus]) <= offer.gpus * used)
            if previous is not None:
                self.model.add(used <= previous)
            previous = used
            self.nodes.append(_Node(offer, name, options, supply, used, gpus))

    def _host(self, node: _Node, n: int, item: DemandItem) -> cp_model.IntVar | None:
        """The units of item `n` that `node` hosts, each part's instances taken there; None
        where a part has no profile the node's GPUs hold."""
        if any(not set(part.profiles) & node.supply.keys() for part in item.parts):
            return None
        units = self.model.new_int_var(0, item.count, f"host_{n}_{node.name}")
        rows = []
        for j, part in enumerate(item.parts):
            row = {
                p: self.model.new_int_var(
                    0, item.count * part.count, f"part_{n}_{j}_{p}_{node.name}"
                )
                for p in part.profiles
                if p in node.supply
            }
            self.model.add(_sum([(v, 1) for v in row.values()]) == part.count * units)
            for p, v in row.items():
                node.usage.setdefault(p, []).append((v, 1))
            rows.append(row)
        node.hosted[n] = (units, rows)
        return units

    def weighted_met(self) -> cp_model.LinearExprT:
        """Priority-weighted demand met."""
        return _sum(
            [(m, demand_weight(item)) for m, (_, item) in zip(self.met, self.left, strict=True)]
        )

    def cost(self) -> cp_model.LinearExprT:
        """The nodes' cost first, then the GPUs partitioned."""
        scale = sum(node.offer.gpus for node in self.nodes) + 1
        return _sum(
            [(node.used, node.offer.cost * scale) for node in self.nodes]
            + [(g, 1) for node in self.nodes for g in node.gpus]
        )


def _solver(seconds: float) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.max_time_in_seconds = max(seconds, 0.05)
    return solver


def plan_scale_out(
    offers: Sequence[Offer],
    left: Left,
    policy: PolicySpec,
    *,
    budget: int | None = None,
    time_limit: float = 2.0,
) -> ScaleOutPlan:
    """The new nodes (at most `budget` in all) that meet the most of `left`, weighted, at the
    least cost; with what each hosts. Within `time_limit` seconds; the status says whether
    both stages were proven."""
    if not left:
        return ScaleOutPlan(status="OPTIMAL", reason="the covered GPUs meet all pending demand")
    deadline = time.monotonic() + time_limit
    m = _ScaleOutModel(offers, left, policy, budget)
    if not m.nodes:
        return ScaleOutPlan(
            status="OPTIMAL",
            items=_items(left, [0] * len(left)),
            reason="no offer's GPU model has a profile the unmet demand asks for",
        )
    m.model.maximize(m.weighted_met())
    first = _solver((deadline - time.monotonic()) / 2)
    status = first.solve(m.model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return ScaleOutPlan(
            status=first.status_name(status),
            items=_items(left, [0] * len(left)),
            reason="no new nodes found in the time limit",
        )
    best = round(first.objective_value)
    bound = round(first.best_objective_bound)
    proven = status == cp_model.OPTIMAL
    if best == 0:
        return ScaleOutPlan(
            status=first.status_name(status),
            items=_items(left, [0] * len(left)),
            bound=bound,
            reason="no new node within the offers and budget meets any of it"
            if proven
            else f"none found in the time limit (new nodes might meet up to weight {bound})",
        )
    _hint(m, first)
    m.model.add(m.weighted_met() >= best)
    m.model.minimize(m.cost())
    second = _solver(deadline - time.monotonic())
    status = second.solve(m.model)
    solver = second if status in (cp_model.OPTIMAL, cp_model.FEASIBLE) else first
    proven = proven and status == cp_model.OPTIMAL
    return _result(m, solver, proven=proven, bound=bound)


def _hint(m: _ScaleOutModel, solver: cp_model.CpSolver) -> None:
    """Start stage 2 from stage 1's plan (every variable at its value)."""
    for index in range(len(m.model.proto.variables)):
        var = m.model.get_int_var_from_proto_index(index)
        m.model.add_hint(var, solver.value(var))


def _items(left: Left, met: Sequence[int]) -> tuple[ScaleOutItem, ...]:
    return tuple(
        ScaleOutItem(demand=n, label=item.shape, gang=item.gang or None, left=item.count, met=got)
        for (n, item), got in zip(left, met, strict=True)
    )


def _result(
    m: _ScaleOutModel, solver: cp_model.CpSolver, *, proven: bool, bound: int
) -> ScaleOutPlan:
    nodes = []
    for node in m.nodes:
        if not solver.value(node.used):
            continue
        hosts: list[Hosted] = []
        needed: Counter[str] = Counter()
        for n, (units, rows) in sorted(node.hosted.items()):
            got = int(solver.value(units))
            if not got:
                continue
            parts = tuple(
                {p: k for p, v in sorted(row.items()) if (k := int(solver.value(v)))}
                for row in rows
            )
            hosted = Hosted(demand=m.left[n][0], units=got, parts=parts)
            needed.update(hosted.served())
            hosts.append(hosted)
        if not hosts:  # a plan cut short by the time limit may keep an idle node
            continue
        layouts = [
            option
            for option, var in zip(node.options, node.gpus, strict=True)
            for _ in range(int(solver.value(var)))
        ]
        gpus = _trimmed(layouts, needed) + ["-"] * (node.offer.gpus - len(layouts))
        nodes.append(
            NewNode(
                offer=node.offer.name,
                name=node.name,
                model=node.offer.model.model,
                gpus=tuple(gpus),
                hosts=tuple(hosts),
            )
        )
    offers = {node.offer.name: node.offer for node in m.nodes}
    met = [int(solver.value(v)) for v in m.met]
    weighted = sum(demand_weight(item) * got for (_, item), got in zip(m.left, met, strict=True))
    return ScaleOutPlan(
        status="OPTIMAL" if proven else "FEASIBLE",
        nodes=tuple(nodes),
        items=_items(m.left, met),
        cost=sum(offers[n.offer].cost for n in nodes),
        weighted_met=weighted,
        bound=max(bound, weighted),
    )


def _trimmed(layouts: Sequence[Layout], needed: Counter[str]) -> list[str]:
    """`layouts` holding only the instances the node's demand takes (a layout less some
    instances is still valid): nothing is created for demand the nodes do not meet."""
    left = Counter(needed)
    out = []
    for layout in layouts:
        kept: list[Instance] = []
        for instance in layout.instances:
            if left[instance.profile] > 0:
                left[instance.profile] -= 1
                kept.append(instance)
        out.append(str(Layout.of(kept)))
    return out
