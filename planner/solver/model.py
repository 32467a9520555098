"""The CP-SAT model: variables, constraints, and the expressions the objective stages use.

Variables
- `x[c][k]`: how many GPUs of class c take candidate layout k (sum over k is the class size).
- `met[i]`: instances provided for demand item i.
- node groups: nodes with the same number of GPUs of each class are interchangeable; per
  group g, `touched[g]` counts nodes touched and `moved[g][c]` the GPUs of class c changed
  there. A group's changes fit on its touched nodes iff moved[g][c] <= touched[g] * (GPUs of
  class c per node) and each touched node has a change; `mapping.py` spreads them exactly so.

Supply (per profile P, over all classes and candidates)
- total_P = sum x * instances of P; pins_P = in-use instances of P before the plan.
- explicit (TOTAL) items of P: sum met <= total_P.
- pending (FREE) items of P: sum met <= total_P - pins_P (evicted pods are rehosted first, so
  every in-use instance, kept or evicted, occupies one instance of its profile).
- with evictions, total_P >= pins_P for every profile in use, so evicted pods have a place.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from migplan.planner.demand import DemandItem, DemandKind
from migplan.planner.solver.candidates import Candidate
from migplan.planner.solver.classes import GpuClass
from migplan.planner.spec import Disruption, PolicySpec


@dataclass(frozen=True)
class NodeGroup:
    """Nodes with identical composition: GPUs per class."""

    nodes: tuple[str, ...]
    per_node: tuple[tuple[int, int], ...]
    """(class index, GPUs of that class on each node)."""


def node_groups(classes: Sequence[GpuClass]) -> list[NodeGroup]:
    """Group nodes by how many GPUs of each class they hold."""
    composition: dict[str, Counter[int]] = {}
    for c, cls in enumerate(classes):
        for gpu in cls.gpus:
            composition.setdefault(gpu.node, Counter())[c] += 1
    groups: dict[tuple[tuple[int, int], ...], list[str]] = {}
    for node in sorted(composition):
        groups.setdefault(tuple(sorted(composition[node].items())), []).append(node)
    return [NodeGroup(tuple(nodes), key) for key, nodes in sorted(groups.items())]


def demand_weight(item: DemandItem) -> int:
    """Priority times compute slices: capacity delivered, weighted by how much it matters."""
    return item.priority * int(item.profile.split("g.", 1)[0])


@dataclass
class PlanningModel:
    """The CP-SAT model of one planning problem and its named objective expressions."""

    classes: Sequence[GpuClass]
    candidates: Sequence[Sequence[Candidate]]
    demand: Sequence[DemandItem]
    policy: PolicySpec
    model: cp_model.CpModel = field(default_factory=cp_model.CpModel)
    x: list[list[cp_model.IntVar]] = field(default_factory=list)
    met: list[cp_model.IntVar] = field(default_factory=list)
    groups: list[NodeGroup] = field(default_factory=list)
    touched: list[cp_model.IntVar] = field(default_factory=list)
    moved: list[dict[int, cp_model.IntVar]] = field(default_factory=list)

    def build(self) -> PlanningModel:
        """Create variables and constraints; returns self."""
        self._class_variables()
        self._node_groups()
        self._supply_and_demand()
        self._limits()
        return self

    # ---- variables ------------------------------------------------------------------------

    def _class_variables(self) -> None:
        for c, (cls, cands) in enumerate(zip(self.classes, self.candidates, strict=True)):
            row = [self.model.new_int_var(0, cls.size, f"x_{c}_{k}") for k in range(len(cands))]
            self.model.add(sum(row) == cls.size)
            self.x.append(row)

    def changed(self, c: int) -> cp_model.LinearExprT:
        """GPUs of class c that change (candidate 0 is the current layout)."""
        return self.classes[c].size - self.x[c][0]

    def _node_groups(self) -> None:
        self.groups = node_groups(self.classes)
        moved_by_class: dict[int, list[cp_model.IntVar]] = {}
        for g, group in enumerate(self.groups):
            touched = self.model.new_int_var(0, len(group.nodes), f"touched_{g}")
            moved: dict[int, cp_model.IntVar] = {}
            for c, per_node in group.per_node:
                var = self.model.new_int_var(0, per_node * len(group.nodes), f"moved_{g}_{c}")
                self.model.add(var <= per_node * touched)
                moved[c] = var
                moved_by_class.setdefault(c, []).append(var)
            self.model.add(sum(moved.values()) >= touched)
            self.touched.append(touched)
            self.moved.append(moved)
        for c in range(len(self.classes)):
            self.model.add(sum(moved_by_class.get(c, [])) == self.changed(c))

    # ---- constraints ------------------------------------------------------------------------

    def total(self, profile: str) -> cp_model.LinearExprT:
        """Instances of `profile` in the target layouts."""
        return sum(
            x * cand.count(profile)
            for row, cands in zip(self.x, self.candidates, strict=True)
            for x, cand in zip(row, cands, strict=True)
            if cand.count(profile)
        )

    def pinned(self, profile: str) -> int:
        """In-use instances of `profile` before the plan."""
        return sum(cls.size * sum(i.profile == profile for i in cls.pins) for cls in self.classes)

    def _supply_and_demand(self) -> None:
        for n, item in enumerate(self.demand):
            self.met.append(self.model.new_int_var(0, item.count, f"met_{n}"))
        profiles = sorted({item.profile for item in self.demand})
        for profile in profiles:
            total = self.total(profile)
            for kind in DemandKind:
                items = [
                    self.met[n]
                    for n, item in enumerate(self.demand)
                    if item.profile == profile and item.kind is kind
                ]
                if not items:
                    continue
                if kind is DemandKind.TOTAL:
                    self.model.add(sum(items) <= total)
                else:
                    self.model.add(sum(items) <= total - self.pinned(profile))
        if self.policy.disruption is Disruption.EVICT:
            for profile in sorted({i.profile for cls in self.classes for i in cls.pins}):
                self.model.add(self.total(profile) >= self.pinned(profile))

    def _limits(self) -> None:
        if self.policy.max_gpus_changed is not None:
            self.model.add(self.gpus_changed() <= self.policy.max_gpus_changed)
        if self.policy.max_nodes_changed is not None:
            self.model.add(self.nodes_touched() <= self.policy.max_nodes_changed)

    # ---- objective expressions ----------------------------------------------------------------

    def weighted_met(self) -> cp_model.LinearExprT:
        """Priority-weighted demand met."""
        return sum(
            demand_weight(item) * met for item, met in zip(self.demand, self.met, strict=True)
        )

    def _per_candidate(self, value: Callable[[Candidate], int]) -> cp_model.LinearExprT:
        return sum(
            x * value(cand)
            for row, cands in zip(self.x, self.candidates, strict=True)
            for x, cand in zip(row, cands, strict=True)
            if value(cand)
        )

    def evictions(self) -> cp_model.LinearExprT:
        """Pods evicted."""
        return self._per_candidate(lambda c: c.evictions)

    def gpus_changed(self) -> cp_model.LinearExprT:
        """GPUs whose layout changes."""
        return sum(self.changed(c) for c in range(len(self.classes)))

    def nodes_touched(self) -> cp_model.LinearExprT:
        """Nodes with at least one changed GPU."""
        return sum(self.touched)

    def headroom(self) -> cp_model.LinearExprT:
        """Sum over GPUs of the largest profile still placeable in free slices."""
        return self._per_candidate(lambda c: c.headroom)

    def operations(self) -> cp_model.LinearExprT:
        """NVML create/destroy steps."""
        return self._per_candidate(lambda c: c.operations)

    def max_evictions(self) -> int:
        """Upper bound of `evictions()`."""
        return self._max_per_class(lambda c: c.evictions)

    def max_operations(self) -> int:
        """Upper bound of `operations()`."""
        return self._max_per_class(lambda c: c.operations)

    def max_headroom(self) -> int:
        """Upper bound of `headroom()`."""
        return self._max_per_class(lambda c: c.headroom)

    def _max_per_class(self, value: Callable[[Candidate], int]) -> int:
        return sum(
            cls.size * max(value(c) for c in cands)
            for cls, cands in zip(self.classes, self.candidates, strict=True)
        )

    def gpu_count(self) -> int:
        """GPUs in the model (upper bound of `gpus_changed()`)."""
        return sum(cls.size for cls in self.classes)

    def node_count(self) -> int:
        """Nodes in the model (upper bound of `nodes_touched()`)."""
        return sum(len(g.nodes) for g in self.groups)

    def variable_count(self) -> int:
        """Variables in the model."""
        return len(self.model.proto.variables)
