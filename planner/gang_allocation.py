"""The exact allocation of a fixed supply to demand with gangs: a small CP-SAT model.

A gang's items are met all together (each at least its minimum, the gang at least its own)
or not at all, so which gangs to meet is a knapsack and no greedy order is exact. Given the
instances each kind of demand may take and, for bundles, each node's free instances, the
model picks the units met per item, the profiles serving them and, per node, the bundle pods
it hosts; it maximises the priority-weighted demand met, ties going to higher priority and
then earlier items (as `allocation.py` breaks them).

One worker, a deterministic time limit and no wall-clock limit, so the same supply always
gets the same allocation: the plan assembly, the solver's starting points and the validator
agree on what a geometry hosts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ortools.sat.python import cp_model

from migplan.planner.demand import DemandItem, DemandKind, demand_weight, gangs_of

Available = Mapping[DemandKind, Mapping[str, int]]
NodeFree = Mapping[str, Mapping[str, int]]


@dataclass(frozen=True)
class Found:
    """Units met per item, instances served per profile per item and per part of each item,
    and per (node, bundle item) the pods hosted there with their parts' instances."""

    met: tuple[int, ...]
    served: tuple[dict[str, int], ...]
    parts: tuple[tuple[dict[str, int], ...], ...]
    hosted: dict[tuple[str, int], tuple[int, tuple[dict[str, int], ...]]]


_Row = dict[str, cp_model.IntVar]

DETERMINISTIC_SECONDS = 2.0
"""CP-SAT's deterministic time budget (repeatable, unlike a wall-clock limit): small
clusters are proven in a fraction of it."""
RELATIVE_GAP = 2e-4
"""...and where hundreds of gangs make the proof long, a solution within this share of the
best is taken (on 8,000 GPUs with 423 gangs the proof alone took over 20 deterministic
seconds per allocation)."""


def tie_gangs(
    model: cp_model.CpModel, met: Sequence[cp_model.IntVar], demand: Sequence[DemandItem]
) -> dict[str, cp_model.IntVar]:
    """All or nothing in `model`: per gang a yes/no; off, its items (`met`, units per item)
    get nothing; on, each at least its minimum and the gang at least its own. The planning
    model and the allocation model both state gangs so; returns the yes/no per gang."""
    on_of: dict[str, cp_model.IntVar] = {}
    for g, (gang, members) in enumerate(gangs_of(demand).items()):
        on = on_of[gang] = model.new_bool_var(f"gang_{g}")
        for n in members:
            item = demand[n]
            model.add(met[n] <= item.count * on)
            if item.minimum:
                model.add(met[n] >= min(item.minimum, item.count) * on)
        least = demand[members[0]].gang_minimum
        if least:
            model.add(cp_model.LinearExpr.sum([met[n] for n in members]) >= least * on)
    return on_of


class _Model:
    """Variables of the allocation: per item and part the instances of each profile."""

    def __init__(self, demand: Sequence[DemandItem], nodes: NodeFree | None) -> None:
        self.demand = demand
        self.model = cp_model.CpModel()
        self.met = [self.model.new_int_var(0, d.count, f"met_{n}") for n, d in enumerate(demand)]
        self.parts: list[list[dict[str, cp_model.LinearExprT]]] = []
        self.usage: dict[tuple[str, str], list[cp_model.IntVar]] = {}
        """(node, profile) -> what bundle pods take of it there."""
        self.fleet: dict[tuple[DemandKind, str], list[cp_model.LinearExprT]] = {}
        """(kind, profile) -> everything taking it fleet-wide."""
        self.hosting: dict[tuple[str, int], tuple[cp_model.IntVar, list[_Row]]] = {}
        """(node, bundle item) -> its pods there and each part's instances by profile."""
        smallest = min((d.per_unit for d in demand if d.per_pod), default=0)
        self.nodes = {
            name: free
            for name, free in sorted((nodes or {}).items())
            if smallest and sum(max(n, 0) for n in free.values()) >= smallest
        }
        for n, item in enumerate(demand):
            self.parts.append(self._bundle(n, item) if item.per_pod else self._single(n, item))

    def _single(self, n: int, item: DemandItem) -> list[dict[str, cp_model.LinearExprT]]:
        if len(item.profiles) == 1:
            row: dict[str, cp_model.LinearExprT] = {item.profile: self.met[n]}
        else:
            row = {
                p: self.model.new_int_var(0, item.count, f"serve_{n}_{p}") for p in item.profiles
            }
            self.model.add(sum(row.values()) == self.met[n])
        for profile, var in row.items():
            self.fleet.setdefault((item.kind, profile), []).append(var)
        return [row]

    def _bundle(self, n: int, item: DemandItem) -> list[dict[str, cp_model.LinearExprT]]:
        """Per node the pods it hosts, each part's instances there by profile."""
        hosted = []
        totals: list[dict[str, list[cp_model.IntVar]]] = [{} for _ in item.per_pod]
        for name, free in self.nodes.items():
            pods = self.model.new_int_var(0, item.count, f"host_{n}_{name}")
            hosted.append(pods)
            rows: list[dict[str, cp_model.IntVar]] = []
            for j, part in enumerate(item.per_pod):
                row = {}
                for p in part.profiles:
                    top = min(item.count * part.count, max(free.get(p, 0), 0))
                    row[p] = self.model.new_int_var(0, top, f"part_{n}_{j}_{p}_{name}")
                    totals[j].setdefault(p, []).append(row[p])
                    self.usage.setdefault((name, p), []).append(row[p])
                self.model.add(sum(row.values()) == part.count * pods)
                rows.append(row)
            self.hosting[name, n] = (pods, rows)
        self.model.add(sum(hosted) == self.met[n])
        parts: list[dict[str, cp_model.LinearExprT]] = []
        for j, part in enumerate(item.per_pod):
            row_total: dict[str, cp_model.LinearExprT] = {}
            for p in part.profiles:
                row_total[p] = sum(totals[j].get(p, []))
                self.fleet.setdefault((item.kind, p), []).append(row_total[p])
            parts.append(row_total)
        return parts

    def constrain(self, available: Available) -> None:
        """Supplies per kind and profile, per node for bundles; gangs all or nothing."""
        for (kind, profile), takers in self.fleet.items():
            self.model.add(sum(takers) <= max(available[kind].get(profile, 0), 0))
        for (name, profile), used in self.usage.items():
            self.model.add(sum(used) <= max(self.nodes[name].get(profile, 0), 0))
        tie_gangs(self.model, self.met, self.demand)

    def objective(self) -> None:
        """Weighted demand met; ties to higher priority, then earlier items."""
        scale = len(self.demand) + 1
        order = sorted(range(len(self.demand)), key=lambda n: -self.demand[n].priority)
        rank = {n: len(self.demand) - r for r, n in enumerate(order)}
        self.model.maximize(
            sum(
                self.met[n] * (demand_weight(item) * scale + rank[n])
                for n, item in enumerate(self.demand)
            )
        )


def solve_exactly(
    demand: Sequence[DemandItem], available: Available, *, nodes: NodeFree | None
) -> Found:
    """The most priority-weighted demand `available` meets with gangs all or nothing, each
    bundle pod on one node of `nodes` (None: no bundle in `demand`).

    The answer depends on nothing else, and one pass asks it again of the same supply: the
    chosen plan is scored, assembled and validated, and a starting plan is expressed in each
    model it starts (50 nodes with multi-instance pods and evictions: 10 calls, 7 distinct,
    0.04-0.05 s each). So the most recent answers are kept (`_solved`); each caller gets its
    own copy."""
    found = _solved(tuple(demand), _frozen(available), None if nodes is None else _frozen(nodes))
    return Found(
        found.met,
        tuple(dict(s) for s in found.served),
        tuple(tuple(dict(row) for row in rows) for rows in found.parts),
        {k: (got, tuple(dict(row) for row in rows)) for k, (got, rows) in found.hosted.items()},
    )


_Frozen = tuple[tuple[Any, tuple[tuple[str, int], ...]], ...]


def _frozen(counts: Mapping[Any, Mapping[str, int]]) -> _Frozen:
    """`counts` as a hashable key, in its own order (the model is built in that order, so
    the same counts in another order may break ties otherwise)."""
    return tuple((name, tuple(inner.items())) for name, inner in counts.items())


@lru_cache(maxsize=8)
def _solved(demand: tuple[DemandItem, ...], available: _Frozen, nodes: _Frozen | None) -> Found:
    """`_solve` on the counts `_frozen` wrote, its answers kept: shared, never handed out."""
    return _solve(
        demand,
        {kind: dict(counts) for kind, counts in available},
        nodes=None if nodes is None else {name: dict(counts) for name, counts in nodes},
    )


def _solve(demand: Sequence[DemandItem], available: Available, *, nodes: NodeFree | None) -> Found:
    m = _Model(demand, nodes)
    m.constrain(available)
    m.objective()
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.max_deterministic_time = DETERMINISTIC_SECONDS
    solver.parameters.relative_gap_limit = RELATIVE_GAP
    status = solver.solve(m.model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):  # pragma: no cover - 0 is feasible
        raise RuntimeError(f"gang allocation failed: CP-SAT status {solver.status_name(status)}")
    parts = tuple(
        tuple({p: got for p, v in row.items() if (got := int(solver.value(v)))} for row in rows)
        for rows in m.parts
    )
    served = []
    for rows in parts:
        total: dict[str, int] = {}
        for row in rows:
            for p, got in row.items():
                total[p] = total.get(p, 0) + got
        served.append(total)
    met = tuple(int(solver.value(v)) for v in m.met)
    hosted = {
        key: (got, tuple({p: int(solver.value(v)) for p, v in row.items()} for row in rows))
        for key, (pods, rows) in m.hosting.items()
        if (got := int(solver.value(pods)))
    }
    return Found(met, tuple(served), parts, hosted)
