"""The plans at hand mixed node by node, with bundles counted exactly (#33).

Past `EXACT_NODES` nodes the planning model counts a bundle's instances fleet-wide, a
relaxation: its plan, laid out on the GPUs, may leave a bundle's instances spread over nodes,
and the repairs (`gather.py`, `bundles.py`) mend some of that. Every plan at hand (the
solver's, its repairs, the starting plans) gives each node a target; this model picks, node
by node, one of those targets, and allocates the demand to the mix exactly: single instances
fleet-wide, each bundle pod on one node, gangs all or nothing (as `gang_allocation.py` does for
small fleets), so what it counts the mix hosts (the plan's own count past 64 nodes, the
greedy packing of `allocation.py`, may find a little less, and is what it is ranked by). Most
demand first, then fewest evictions, GPUs changed and nodes touched; the caller ranks its plan
with the others on the whole objective, so it is returned only where it is better.

On the fragmented bench's fleets with multi-instance pods, where no plan at hand met the
relaxation's bound, the mix met it or nearly: 2,000 GPUs 10,059 weighted (the bound), where
the best plan at hand (the solver's, bundle instances gathered) met 10,017; 4,000 GPUs 20,170
of 20,180 in its budget, about 2.7 s (19,949). A node's choices are the distinct targets the
plans give it (4-5 there), less those another choice beats on every supply at no greater
cost; a bundle item's pods get a variable per node only where the node's choices could hold
one. Its solve grows faster than the fleet (0.3-0.4 s at 250 nodes, 5-6 s to prove at 500,
12-20 s at 1,000), so the caller runs it on fleets of up to `facade.MIX_NODES` nodes, in
limited time.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

from migplan.planner.allocation import hostable
from migplan.planner.api.inventory import GpuState
from migplan.planner.assemble import GpuKey, gpu_change
from migplan.planner.demand import DemandItem, DemandKind, demand_weight
from migplan.planner.fleet import Fleet, fleet_of
from migplan.planner.gang_allocation import tie_gangs
from migplan.planner.hardware.layout import Layout
from migplan.planner.solver.linear import maximize
from migplan.planner.solver.objective import gpu_disruption

Targets = Mapping[GpuKey, Layout]


@dataclass(frozen=True)
class _Choice:
    """One target for a node's GPUs, and what it gives and costs."""

    targets: dict[GpuKey, Layout]
    total: Counter[str]
    """Instances per profile (what explicit totals draw on)."""
    free: Counter[str]
    """Instances per profile nobody keeps, less the evicted pods' (pending pods draw on
    these fleet-wide); may be negative where the node's evicted pods need more."""
    unkept: Counter[str]
    """Instances per profile nobody keeps on this node (what its bundle pods may take)."""
    cost: tuple[int, int, int]
    """Evictions, GPUs changed, node touched (0 or 1)."""


class _Shares:
    """What each GPU adds to its node's choice under each of `plans`: every figure of a
    choice but whether the node is touched is a sum over its GPUs, counted as
    `assemble.supply_of` (instances; those nobody keeps; those, less the evicted pods', for
    pending pods) and `objective.disruption` (pods evicted, GPUs changed) count a plan.
    Each (situation, target) is measured once, as a row over the profiles; a node's choice
    adds up its GPUs' rows (counting each node's plans as a fleet of its own took 0.15 s of
    the mix's 0.6 s on 2,000 GPUs)."""

    def __init__(self, fleet: Fleet, plans: Sequence[Targets], rebuild: bool) -> None:
        self.fleet = fleet
        index: dict[tuple[int, Layout], int] = {}
        self.cases: list[tuple[int, Layout]] = []
        self.ids: list[list[int]] = []
        """Per plan, each GPU's (situation, target) by number, in the fleet's order."""
        for plan in plans:
            numbered = []
            for pair in zip(fleet.numbers, fleet.afters(plan), strict=True):
                number = index.get(pair)
                if number is None:
                    number = index[pair] = len(self.cases)
                    self.cases.append(pair)
                numbered.append(number)
            self.ids.append(numbered)
        situations = fleet.situations
        self.profiles = sorted(
            {i.profile for _, after in self.cases for i in after.instances}
            | {i.profile for number, _ in self.cases for i in situations[number].pins}
        )
        column = {p: k for k, p in enumerate(self.profiles)}
        shape = (len(self.cases), len(self.profiles))
        self.total = np.zeros(shape, dtype=np.int64)
        kept = np.zeros(shape, dtype=np.int64)
        pinned = np.zeros(shape, dtype=np.int64)
        self.costs = np.zeros((len(self.cases), 2), dtype=np.int64)
        """Per case: pods evicted, GPUs changed (0 or 1)."""
        for row, (number, after) in enumerate(self.cases):
            gpu = situations[number]
            for instance in after.instances:
                self.total[row, column[instance.profile]] += 1
            removed = gpu_change(gpu.layout, after, gpu.mig_enabled, rebuild)[1]
            for instance in gpu.pins:
                pinned[row, column[instance.profile]] += 1
                if instance not in removed:
                    kept[row, column[instance.profile]] += 1
            change = gpu_disruption(gpu, after, rebuild=rebuild)
            if change is not None:
                self.costs[row] = (change[0], 1)
        self.unkept = self.total - kept
        self.free = self.total - pinned

    def choices(self, gpus: Sequence[int]) -> list[_Choice]:
        """The distinct targets the plans give the GPUs at `gpus` (positions in the fleet,
        one node's), first seen first."""
        keys = [self.fleet.keys[g] for g in gpus]
        seen: dict[tuple[int, ...], _Choice] = {}
        for ids in self.ids:
            numbers = tuple(ids[g] for g in gpus)
            if numbers in seen:
                continue
            rows = list(numbers)
            evictions, changed = self.costs[rows].sum(axis=0).tolist()
            seen[numbers] = _Choice(
                targets={k: self.cases[n][1] for k, n in zip(keys, numbers, strict=True)},
                total=self._counts(self.total, rows),
                free=self._counts(self.free, rows),
                unkept=self._counts(self.unkept, rows),
                cost=(evictions, changed, 1 if changed else 0),
            )
        return list(seen.values())

    def _counts(self, table: np.ndarray, rows: list[int]) -> Counter[str]:
        return Counter(dict(zip(self.profiles, table[rows].sum(axis=0).tolist(), strict=True)))


def _undominated(choices: list[_Choice]) -> list[_Choice]:
    """`choices` less those another choice beats or equals on everything: as much of every
    supply and no greater cost (first seen kept among equals)."""
    kept: list[_Choice] = []
    for k, choice in enumerate(choices):
        if not any(
            _covers(other, choice) and (j < k or not _covers(choice, other))
            for j, other in enumerate(choices)
            if j != k
        ):
            kept.append(choice)
    return kept


def _covers(a: _Choice, b: _Choice) -> bool:
    """Whether `a` supplies at least what `b` does, everywhere, at no greater cost."""
    return (
        all(a.cost[k] <= b.cost[k] for k in range(len(a.cost)))
        and all(a.total[p] >= n for p, n in b.total.items())
        # Free counts may be negative: every profile either has counts.
        and all(a.free[p] >= b.free[p] for p in a.free.keys() | b.free.keys())
        and all(a.unkept[p] >= n for p, n in b.unkept.items())
    )


class _MixModel:
    """The CP-SAT model: a choice per node, the demand's allocation to the mix."""

    def __init__(self, choices: dict[str, list[_Choice]], demand: Sequence[DemandItem]) -> None:
        self.choices = choices
        self.demand = demand
        self.model = cp_model.CpModel()
        self.pick = {
            node: [self.model.new_bool_var(f"pick_{node}_{k}") for k in range(len(options))]
            for node, options in choices.items()
        }
        for picks in self.pick.values():
            self.model.add_exactly_one(picks)
        self.met = [self.model.new_int_var(0, d.count, f"met_{n}") for n, d in enumerate(demand)]
        self.most_free: dict[str, Counter[str]] = {}
        """Per node, the most of each profile any of its choices leaves unkept."""
        for node, options in choices.items():
            most: Counter[str] = Counter()
            for choice in options:
                most |= choice.unkept
            self.most_free[node] = most
        self.fleet: dict[tuple[DemandKind, str], list[cp_model.LinearExprT]] = {}
        self.node_use: dict[tuple[str, str], list[cp_model.LinearExprT]] = {}
        for n, item in enumerate(demand):
            if item.per_pod:
                self._bundle(n, item)
            else:
                self._single(n, item)
        self._supplies()
        tie_gangs(self.model, self.met, demand)

    def _take(self, kind: DemandKind, profile: str, taken: cp_model.LinearExprT) -> None:
        self.fleet.setdefault((kind, profile), []).append(taken)

    def _single(self, n: int, item: DemandItem) -> None:
        if len(item.profiles) == 1:
            self._take(item.kind, item.profile, self.met[n])
            return
        serve = [self.model.new_int_var(0, item.count, f"serve_{n}_{p}") for p in item.profiles]
        self.model.add(sum(serve) == self.met[n])
        for profile, var in zip(item.profiles, serve, strict=True):
            self._take(item.kind, profile, var)

    def _bundle(self, n: int, item: DemandItem) -> None:
        """The item's pods per node (where the node's choices could hold one), each
        part's instances there by profile (a variable only where a part has several)."""
        hosted = []
        for node, most_free in self.most_free.items():
            # At most what the node's largest choice of each profile holds.
            most = hostable(item.per_pod, {node: most_free})
            if not most:
                continue
            pods = self.model.new_int_var(0, min(item.count, most), f"host_{n}_{node}")
            hosted.append(pods)
            for j, part in enumerate(item.per_pod):
                if len(part.profiles) == 1:
                    uses = {part.profiles[0]: part.count * pods}
                else:
                    top = item.count * part.count
                    uses = {
                        p: self.model.new_int_var(0, top, f"part_{n}_{j}_{p}_{node}")
                        for p in part.profiles
                    }
                    self.model.add(sum(uses.values()) == part.count * pods)
                for profile, used in uses.items():
                    self.node_use.setdefault((node, profile), []).append(used)
                    self._take(item.kind, profile, used)
        self.model.add(sum(hosted) == self.met[n])

    def _supplies(self) -> None:
        """What the picks supply: per kind and profile fleet-wide, per node for bundles."""
        for (kind, profile), takers in self.fleet.items():
            if kind is DemandKind.TOTAL:
                self.model.add(sum(takers) <= self._picked("total", profile))
                continue
            # Pending pods take what is free once evicted pods are rehosted, if anything is:
            # where the picks could leave less than nothing, none of them or at most that.
            free = self._picked("free", profile)
            if sum(min(c.free[profile] for c in cs) for cs in self.choices.values()) >= 0:
                self.model.add(sum(takers) <= free)
                continue
            some = self.model.new_bool_var(f"some_{profile}")
            self.model.add(sum(takers) <= free).only_enforce_if(some)
            self.model.add(sum(takers) == 0).only_enforce_if(~some)
        for (node, profile), used in self.node_use.items():
            self.model.add(sum(used) <= self._picked("unkept", profile, node))

    def _picked(self, supply: str, profile: str, node: str | None = None) -> cp_model.LinearExprT:
        """What the picks (of `node`, or of every node) supply of `profile`: `supply` names
        the choices' counter (total, free or unkept)."""
        nodes = self.choices if node is None else {node: self.choices[node]}
        terms = [
            (pick, amount)
            for name, options in nodes.items()
            for pick, choice in zip(self.pick[name], options, strict=True)
            if (amount := getattr(choice, supply)[profile])
        ]
        return cp_model.LinearExpr.weighted_sum([t for t, _ in terms], [a for _, a in terms])

    def objective(self) -> None:
        """Weighted demand met, then fewest evictions, GPUs changed and nodes touched, each
        weighted past the largest total of those after it."""
        criteria = len(next(iter(self.choices.values()))[0].cost)
        ranges = [
            sum(max(c.cost[k] for c in options) for options in self.choices.values()) + 1
            for k in range(criteria)
        ]
        most = sum(demand_weight(item) * item.count for item in self.demand) + 1
        while criteria and most * math.prod(ranges[:criteria]) >= 2**62:
            criteria -= 1  # CP-SAT's objective must fit 64 bits: the last criteria go first
        ranges = ranges[:criteria]
        cost_weights = [math.prod(ranges[k + 1 :]) for k in range(criteria)]
        met_weight = math.prod(ranges)
        terms: list[cp_model.LinearExprT] = []
        weights: list[int] = []
        for n, item in enumerate(self.demand):
            terms.append(self.met[n])
            weights.append(demand_weight(item) * met_weight)
        for name, options in self.choices.items():
            for pick, choice in zip(self.pick[name], options, strict=True):
                if cost := sum(
                    a * w
                    for a, w in zip(choice.cost[: len(cost_weights)], cost_weights, strict=True)
                ):
                    terms.append(pick)
                    weights.append(-cost)
        maximize(self.model, cp_model.LinearExpr.weighted_sum(terms, weights))


def mix_by_node(
    gpus: Sequence[GpuState],
    plans: Sequence[Targets],
    demand: Sequence[DemandItem],
    *,
    rebuild: bool,
    work: float,
    deadline: float,
) -> dict[GpuKey, Layout] | None:
    """The best mix of `plans` node by node (each plan targets every GPU), its bundles
    allocated exactly, found in `work` seconds of CP-SAT's deterministic time (the same
    answer on any machine) unless `deadline` (time.monotonic()) comes first; None where no
    mix was found."""
    fleet = fleet_of(gpus)
    by_node: dict[str, list[int]] = {}
    for position, node in enumerate(fleet.nodes):
        by_node.setdefault(node, []).append(position)
    shares = _Shares(fleet, plans, rebuild)
    choices = {node: _undominated(shares.choices(on)) for node, on in by_node.items()}
    mix = _MixModel(choices, demand)
    mix.objective()
    left = deadline - time.monotonic()
    if left <= 0:
        return None
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.max_time_in_seconds = left
    solver.parameters.max_deterministic_time = work
    # As the planning model's stages (`stages._solver`): the LP guides and bounds the search.
    solver.parameters.linearization_level = 2
    solver.parameters.search_branching = cp_model.LP_SEARCH
    solver.parameters.add_lp_constraints_lazily = False
    solver.parameters.cp_model_probing_level = 0
    solver.parameters.max_presolve_iterations = 1
    status = solver.solve(mix.model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    targets: dict[GpuKey, Layout] = {}
    for name, options in choices.items():
        picked = next(
            c for p, c in zip(mix.pick[name], options, strict=True) if solver.boolean_value(p)
        )
        targets.update(picked.targets)
    return targets
