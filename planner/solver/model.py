"""The CP-SAT model over classes and pools: variables, constraints, objective expressions.

Variables
- `changed[c]`: GPUs of class c that change (the rest keep their layout and its supply);
- `flow[c][r]`: those that change along route r of the class (into a pool, at an eviction
  cost per GPU); they add up to `changed[c]`;
- `take[p][o]`: GPUs of pool p that take option o; they add up to the flows into the pool;
- `met[i]`: instances provided for demand item i (pods, for a bundle); `serve[i][P]` those
  of profile P (an either/or item has one per alternative, adding up to `met[i]`; a bundle's
  parts each add up to their count per pod times `met[i]`, counted fleet-wide; with
  `per_node`, node by node as well (`node_bundles.py`), else the fleet-wide count is the
  relaxation of "each pod on one node" that the allocation then honours);
- `gang_on[g]`: whether gang g is met; its items get nothing unless it is, and at least
  their minimum (the gang at least its own) when it is: all or nothing, counted exactly for
  single-instance pods, which any node with a free instance hosts;
- node groups: nodes with the same number of GPUs of each class are interchangeable; per
  group g, `touched[g]` counts nodes touched and `moved[g][c]` the GPUs of class c changed
  there. A group's changes fit on its touched nodes iff moved[g][c] <= touched[g] * (GPUs of
  class c per node) and each touched node has a change; `assign.py` spreads them exactly so.

Supply (per relevant profile P): what kept GPUs have plus what the options taken supply.
- explicit (TOTAL) items of P: sum met <= supply_P;
- pending (FREE) items of P: sum met <= supply_P - pins_P (evicted pods are rehosted first, so
  every in-use instance, kept or evicted, occupies one instance of its profile);
- with evictions, supply_P >= pins_P for every profile in use, so evicted pods have a place.

Every sum is built as one `LinearExpr.weighted_sum` over precomputed coefficients.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from ortools.sat.python import cp_model

from migplan.planner.api.spec import Disruption, PolicySpec
from migplan.planner.demand import DemandItem, DemandKind, demand_weight
from migplan.planner.gang_allocation import tie_gangs
from migplan.planner.hardware.tables import IntArray
from migplan.planner.solver.classes import GpuClass
from migplan.planner.solver.linear import Expr
from migplan.planner.solver.linear import linear_sum as _sum
from migplan.planner.solver.node_bundles import add_node_bundles
from migplan.planner.solver.pools import PoolSet
from migplan.planner.solver.prune import Relaxation


@dataclass(frozen=True)
class NodeGroup:
    """Nodes with identical composition: GPUs per class."""

    nodes: tuple[str, ...]
    per_node: tuple[tuple[int, int], ...]
    """(class index, GPUs of that class on each node)."""


def node_groups(classes: Sequence[GpuClass]) -> list[NodeGroup]:
    """Group nodes by how many GPUs of each class they hold."""
    # Counted in one pass over (node, class) pairs: a Counter per node, incremented GPU by
    # GPU, took four times as long on 40,000 GPUs.
    counted = Counter((gpu.node, c) for c, cls in enumerate(classes) for gpu in cls.gpus)
    composition: dict[str, list[tuple[int, int]]] = {}
    for (node, c), count in counted.items():
        composition.setdefault(node, []).append((c, count))
    groups: dict[tuple[tuple[int, int], ...], list[str]] = {}
    for node in sorted(composition):
        groups.setdefault(tuple(sorted(composition[node])), []).append(node)
    return [NodeGroup(tuple(nodes), key) for key, nodes in sorted(groups.items())]


@dataclass(frozen=True)
class _SupplyTable:
    """What each class supplies if kept (per profile) with the classes' sizes, and what each
    option of every pool supplies with its `take` variable, options in pool order."""

    keep: IntArray
    sizes: IntArray
    options: IntArray
    take: list[cp_model.IntVar]


@dataclass
class PlanningModel:
    """The CP-SAT model of one planning problem and its named objective expressions."""

    classes: Sequence[GpuClass]
    pools: PoolSet
    demand: Sequence[DemandItem]
    policy: PolicySpec
    model: cp_model.CpModel = field(default_factory=cp_model.CpModel)
    changed: list[cp_model.IntVar | None] = field(default_factory=list)
    flow: list[list[cp_model.IntVar]] = field(default_factory=list)
    take: list[list[cp_model.IntVar]] = field(default_factory=list)
    unrouted: set[int] = field(default_factory=set)
    """Pools no route leads into: their `take` is the constant 0."""
    met: list[cp_model.IntVar] = field(default_factory=list)
    serve: list[dict[str, cp_model.IntVar]] = field(default_factory=list)
    """Per demand item: instances of each of its profiles that serve it (the met variable
    itself for an item of one profile)."""
    parts: list[list[dict[str, cp_model.IntVar]]] = field(default_factory=list)
    """Per demand item, per part (a bundle's parts; else one): instances of each profile."""
    per_node: bool = False
    """Classes and pools are per node, and bundles are counted node by node
    (`node_bundles.py`): exact, not the fleet-wide relaxation."""
    hosted: dict[tuple[str, int], cp_model.IntVar] = field(default_factory=dict)
    """(node, bundle item) -> the item's pods the node hosts (with `per_node`)."""
    node_parts: dict[tuple[str, int, int, str], cp_model.IntVar] = field(default_factory=dict)
    """(node, item, part, profile) -> instances there, for parts several profiles serve."""
    gang_on: dict[str, cp_model.IntVar] = field(default_factory=dict)
    """Per gang: whether it is met (all its items at their minimum or more)."""
    groups: list[NodeGroup] = field(default_factory=list)
    """Node groups of `classes` (`node_groups`); computed by `build` unless given, so the
    models of one pass over the same classes group the nodes once (0.3 s per model on
    40,000 GPUs)."""
    touched: list[cp_model.IntVar] = field(default_factory=list)
    moved: list[dict[int, cp_model.IntVar]] = field(default_factory=list)
    pins: Counter[str] = field(default_factory=Counter)
    relaxation: Relaxation = field(default_factory=Relaxation)
    """The model's LP relaxation, kept for fixing variables between stages (`prune.py`)."""
    _table: _SupplyTable | None = field(default=None, init=False, repr=False)

    def build(self) -> PlanningModel:
        """Create variables and constraints; returns self."""
        self.pins = Counter(i.profile for cls in self.classes for i in cls.pins for _ in cls.gpus)
        self._class_variables()
        self._pool_variables()
        self._node_groups()
        self._supply_and_demand()
        if self.per_node and any(item.per_pod for item in self.demand):
            add_node_bundles(self)
        self._limits()
        return self

    # ---- variables ------------------------------------------------------------------------

    def _class_variables(self) -> None:
        for c, cls in enumerate(self.classes):
            routes = self.pools.routes[c]
            if not routes:
                self.changed.append(None)
                self.flow.append([])
                continue
            changed = self.model.new_int_var(0, cls.size, f"changed_{c}")
            if len(routes) == 1:
                flows = [changed]
            else:
                flows = [self.model.new_int_var(0, cls.size, f"flow_{c}_{r}") for r in routes]
                self.model.add(_sum([(f, 1) for f in flows]) == changed)
            self.changed.append(changed)
            self.flow.append(flows)

    def _pool_variables(self) -> None:
        inflow: list[list[cp_model.IntVar]] = [[] for _ in self.pools.pools]
        capacity = [0] * len(self.pools.pools)
        for c, routes in enumerate(self.pools.routes):
            for route, f in zip(routes, self.flow[c], strict=True):
                inflow[route.pool].append(f)
                capacity[route.pool] += self.classes[c].size
        zero: cp_model.IntVar | None = None
        for p, pool in enumerate(self.pools.pools):
            if not capacity[p]:
                # No route leads here (`pools.for_demand_alone`): every option is the one
                # constant 0, not a variable of its own (50 evicting nodes' demand model: 36,987
                # variables -> 5,629).
                zero = self.model.new_constant(0) if zero is None else zero
                self.take.append([zero] * len(pool))
                self.unrouted.add(p)
                continue
            row = [
                self.model.new_int_var(0, capacity[p], f"take_{p}_{o}") for o in range(len(pool))
            ]
            self.model.add(_sum([(v, 1) for v in row]) == _sum([(f, 1) for f in inflow[p]]))
            self.take.append(row)

    def _node_groups(self) -> None:
        if not self.groups:
            self.groups = node_groups(self.classes)
        moved_by_class: dict[int, list[cp_model.IntVar]] = {}
        for g, group in enumerate(self.groups):
            movable = [(c, n) for c, n in group.per_node if self.changed[c] is not None]
            if not movable:
                self.touched.append(self.model.new_constant(0))
                self.moved.append({})
                continue
            touched = self.model.new_int_var(0, len(group.nodes), f"touched_{g}")
            moved: dict[int, cp_model.IntVar] = {}
            for c, per_node in movable:
                var = self.model.new_int_var(0, per_node * len(group.nodes), f"moved_{g}_{c}")
                self.model.add(var <= per_node * touched)
                moved[c] = var
                moved_by_class.setdefault(c, []).append(var)
            self.model.add(_sum([(v, 1) for v in moved.values()]) >= touched)
            self.touched.append(touched)
            self.moved.append(moved)
        for c, changed in enumerate(self.changed):
            if changed is not None:
                self.model.add(_sum([(v, 1) for v in moved_by_class[c]]) == changed)

    # ---- constraints ------------------------------------------------------------------------

    def supply(self, profile: str) -> Expr:
        """Instances of `profile` in the target layouts."""
        k = self.pools.profiles.index(profile)
        table = self._supply_table()
        keep = table.keep[:, k]
        terms: list[tuple[Expr, int]] = [
            (changed, -have)
            for changed, have in zip(self.changed, keep.tolist(), strict=True)
            if changed is not None and have
        ]
        column = table.options[:, k]
        nonzero = np.flatnonzero(column)
        terms += zip(
            [table.take[i] for i in nonzero.tolist()], column[nonzero].tolist(), strict=True
        )
        return _sum(terms, int(keep @ table.sizes))

    def _supply_table(self) -> _SupplyTable:
        """Every class's supply if kept and every option's, as arrays, once per model: each
        profile's supply reads its column (11 profiles over 1,270 classes and 9,028 options
        on 2,000 fragmented GPUs)."""
        if self._table is None:
            count = len(self.pools.profiles)
            options = [pool.supply for pool in self.pools.pools if len(pool)]
            self._table = _SupplyTable(
                keep=np.array(self.pools.keep_supply, dtype=np.int64).reshape(-1, count),
                sizes=np.array([cls.size for cls in self.classes], dtype=np.int64),
                options=np.concatenate(options).astype(np.int64)
                if options
                else np.zeros((0, count), dtype=np.int64),
                take=[v for row in self.take for v in row],
            )
        return self._table

    def _bundle(self, n: int, item: DemandItem, met: cp_model.IntVar) -> None:
        """A bundle's parts, each `part.count` instances per pod met, and their profiles'
        totals. Counted fleet-wide: a relaxation of one node per pod, which the plan's
        allocation (`allocation.py`) then honours, so the plan never reports more."""
        parts: list[dict[str, cp_model.IntVar]] = []
        for j, part in enumerate(item.per_pod):
            top = item.count * part.count
            if len(part.profiles) == 1:
                var = self.model.new_int_var(0, top, f"part_{n}_{j}")
                self.model.add(var == part.count * met)
                parts.append({part.profiles[0]: var})
                continue
            row = {p: self.model.new_int_var(0, top, f"part_{n}_{j}_{p}") for p in part.profiles}
            self.model.add(_sum([(v, 1) for v in row.values()]) == part.count * met)
            parts.append(row)
        serve: dict[str, cp_model.IntVar] = {}
        for k, profile in enumerate(item.profiles):
            using = [row[profile] for row in parts if profile in row]
            if len(using) == 1:
                serve[profile] = using[0]
                continue
            total = self.model.new_int_var(0, item.count * item.per_unit, f"serve_{n}_{k}")
            self.model.add(total == _sum([(v, 1) for v in using]))
            serve[profile] = total
        self.serve.append(serve)
        self.parts.append(parts)

    def _supply_and_demand(self) -> None:
        for n, item in enumerate(self.demand):
            met = self.model.new_int_var(0, item.count, f"met_{n}")
            self.met.append(met)
            if item.per_pod:
                self._bundle(n, item, met)
                continue
            if not item.alternatives:
                self.serve.append({item.profile: met})
                self.parts.append([self.serve[-1]])
                continue
            serve = {
                p: self.model.new_int_var(0, item.count, f"serve_{n}_{k}")
                for k, p in enumerate(item.profiles)
            }
            self.model.add(_sum([(v, 1) for v in serve.values()]) == met)
            self.serve.append(serve)
            self.parts.append([serve])
        # Profiles outside the pools' columns are asked for zero times: nothing to constrain.
        wanted = {p for item in self.demand for p in item.profiles}
        supplies: dict[str, Expr] = {}
        for profile in sorted(wanted & set(self.pools.profiles)):
            supply = supplies[profile] = self.supply(profile)
            for kind in DemandKind:
                items = [
                    (serve[profile], 1)
                    for serve, item in zip(self.serve, self.demand, strict=True)
                    if profile in serve and item.kind is kind
                ]
                if not items:
                    continue
                if kind is DemandKind.TOTAL:
                    self.model.add(_sum(items) <= supply)
                else:
                    self.model.add(_sum(items) <= supply - self.pins[profile])
        if self.policy.disruption is Disruption.EVICT:
            for profile in sorted(self.pins):
                supply = supplies[profile] if profile in supplies else self.supply(profile)
                self.model.add(supply >= self.pins[profile])
        self.gang_on = tie_gangs(self.model, self.met, self.demand)

    def _limits(self) -> None:
        if self.policy.max_gpus_changed is not None:
            self.model.add(self.gpus_changed() <= self.policy.max_gpus_changed)
        if self.policy.max_nodes_changed is not None:
            self.model.add(self.nodes_touched() <= self.policy.max_nodes_changed)

    # ---- objective expressions ----------------------------------------------------------------

    def weighted_met(self) -> Expr:
        """Priority-weighted demand met."""
        return _sum([(m, demand_weight(i)) for i, m in zip(self.demand, self.met, strict=True)])

    def evictions(self) -> Expr:
        """Pods evicted (in-use instances dropped, whole-GPU pods moved)."""
        return _sum(
            [
                (f, route.evictions)
                for routes, flows in zip(self.pools.routes, self.flow, strict=True)
                for route, f in zip(routes, flows, strict=True)
            ]
        )

    def gpus_changed(self) -> Expr:
        """GPUs whose layout changes."""
        return _sum([(v, 1) for v in self.changed if v is not None])

    def nodes_touched(self) -> Expr:
        """Nodes with at least one changed GPU."""
        return _sum([(v, 1) for v in self.touched])

    def headroom(self) -> Expr:
        """Sum over GPUs of the largest profile still placeable in free slices."""
        constant = 0
        terms: list[tuple[Expr, int]] = []
        for c, cls in enumerate(self.classes):
            constant += self.pools.keep_headroom[c] * cls.size
            changed = self.changed[c]
            if changed is not None:
                terms.append((changed, -self.pools.keep_headroom[c]))
        for pool, row in zip(self.pools.pools, self.take, strict=True):
            terms += zip(row, pool.headroom.tolist(), strict=True)
        return _sum(terms, constant)

    def created(self) -> Expr:
        """Instances in the changed GPUs' targets (what the operations stage refines)."""
        return _sum(
            [
                (v, int(size))
                for pool, row in zip(self.pools.pools, self.take, strict=True)
                for v, size in zip(row, pool.sizes.tolist(), strict=True)
            ]
        )

    def max_evictions(self) -> int:
        """Upper bound of `evictions()`."""
        return sum(
            cls.size * max((r.evictions for r in routes), default=0)
            for cls, routes in zip(self.classes, self.pools.routes, strict=True)
        )

    def max_headroom(self) -> int:
        """Upper bound of `headroom()`."""
        return sum(
            cls.size * max(p.compute_slices for p in cls.model.profiles) for cls in self.classes
        )

    def max_created(self) -> int:
        """Upper bound of `created()`."""
        return sum(cls.size * cls.model.compute_slices for cls in self.classes)

    def gpu_count(self) -> int:
        """GPUs in the model (upper bound of `gpus_changed()`)."""
        return sum(cls.size for cls in self.classes)

    def node_count(self) -> int:
        """Nodes in the model (upper bound of `nodes_touched()`)."""
        return sum(len(g.nodes) for g in self.groups)

    def variable_count(self) -> int:
        """Variables in the model."""
        return len(self.model.proto.variables)
