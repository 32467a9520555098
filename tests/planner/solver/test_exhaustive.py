"""The planner's plan is as good as the best of all layout combinations, found by brute force.

The brute force scores plans with its own implementation of the lexicographic objective:
priority x compute weighted demand met, then fewest evictions, GPUs changed, nodes touched,
then most headroom (largest profile still placeable in free slices), fewest operations.
"""

from __future__ import annotations

import functools
from collections import Counter
from itertools import product

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from migplan.planner.api.spec import Disruption, PolicySpec
from migplan.planner.demand import DemandKind
from migplan.planner.hardware.enumeration import enumerate_layouts
from migplan.planner.solver import plan

_HEADROOM: dict = {}


def headroom(model, layout) -> int:
    key = (model.model, layout)
    if key not in _HEADROOM:
        _HEADROOM[key] = _headroom(model, layout)
    return _HEADROOM[key]


def _headroom(model, layout) -> int:
    used = {
        s for i in layout.instances for s in range(i.start, i.start + model.profile(i.profile).size)
    }
    return max(
        (
            p.compute_slices
            for p in model.profiles
            for s in p.starts
            if not used & set(range(s, s + p.size))
        ),
        default=0,
    )


def score(gpus, layouts, demand, policy):
    """Objective vector to maximise, or None if the combination is not allowed."""
    total, pins = Counter(), Counter()
    evictions = changed_gpus = ops = room = 0
    nodes = set()
    for g, layout in zip(gpus, layouts, strict=True):
        kept = set(layout.instances)
        lost = [i for i in g.pins if i not in kept]
        if lost and policy.disruption is Disruption.NONE:
            return None
        changed = layout != g.layout
        evictions += len(lost)
        changed_gpus += changed
        if changed:
            nodes.add(g.node)
        ops += 2 * len(set(g.layout.instances) ^ kept)
        room += headroom(g.model, layout)
        total.update(i.profile for i in layout.instances)
        pins.update(i.profile for i in g.pins)
    if evictions and any(total[p] < n for p, n in pins.items()):
        return None  # an evicted pod would have nowhere to go
    if policy.max_gpus_changed is not None and changed_gpus > policy.max_gpus_changed:
        return None
    if policy.max_nodes_changed is not None and len(nodes) > policy.max_nodes_changed:
        return None
    return (_best_weighted(total, pins, demand), -evictions, -changed_gpus, -len(nodes), room, -ops)


def _best_weighted(total, pins, demand) -> int:
    """The most weighted demand the supply meets, by trying every split of every item over
    its profiles (independent of the planner's min-cost flow)."""
    left = {
        DemandKind.TOTAL: dict(total),
        DemandKind.FREE: {p: total[p] - pins[p] for p in total},
    }

    def splits(count, profiles):
        if len(profiles) == 1:
            yield from ((n,) for n in range(count + 1))
            return
        for n in range(count + 1):
            for rest in splits(count - n, profiles[1:]):
                yield (n, *rest)

    def best(n) -> int:
        if n == len(demand):
            return 0
        item = demand[n]
        pool = left[item.kind]
        weight = item.priority * min(int(p.split("g.")[0]) for p in item.profiles)
        found = 0
        for split in splits(item.count, item.profiles):
            if all(k <= pool.get(p, 0) for p, k in zip(item.profiles, split, strict=True)):
                for p, k in zip(item.profiles, split, strict=True):
                    pool[p] = pool.get(p, 0) - k
                found = max(found, sum(split) * weight + best(n + 1))
                for p, k in zip(item.profiles, split, strict=True):
                    pool[p] += k
        return found

    return best(0)


def best_by_brute_force(gpus, demand, policy):
    options = [enumerate_layouts(g.model) for g in gpus]
    return max(
        s for combo in product(*options) if (s := score(gpus, combo, demand, policy)) is not None
    )


def plan_score(gpus, demand, policy):
    from migplan.planner.hardware.layout import Layout

    result = plan(gpus, demand, policy)
    assert result.solver.status == "OPTIMAL"
    return score(gpus, [Layout.parse(g.after) for g in result.gpus], demand, policy)


EVICT = PolicySpec(disruption=Disruption.EVICT)


@pytest.mark.parametrize(
    ("fleet", "demand", "policy"),
    [
        # two empty A30s: 4g vs 2g/1g mixes
        (
            [("A30", "-", {}, "n1"), ("A30", "-", {}, "n2")],
            [("4g.24gb", 1, "free", 1), ("2g.12gb", 2, "free", 1), ("1g.6gb", 1, "free", 2)],
            PolicySpec(),
        ),
        # in-use instances in the way, policy none
        (
            [("A30", "1g.6gb@1", {"1g.6gb@1": "ns/a"}, "n1"), ("A30", "2g.12gb@2", {}, "n1")],
            [("4g.24gb", 1, "free", 3), ("2g.12gb", 2, "free", 1)],
            PolicySpec(),
        ),
        # same with evictions allowed
        (
            [("A30", "1g.6gb@1", {"1g.6gb@1": "ns/a"}, "n1"), ("A30", "2g.12gb@2", {}, "n2")],
            [("4g.24gb", 1, "free", 3), ("2g.12gb", 1, "free", 1)],
            EVICT,
        ),
        # explicit totals with +me profiles and a GPU limit
        (
            [("A30", "1g.6gb+me@0", {}, "n1"), ("A30", "-", {}, "n2")],
            [("2g.12gb+me", 1, "total", 2), ("1g.6gb", 3, "total", 1)],
            PolicySpec(max_gpus_changed=1),
        ),
        # node limit across three GPUs on two nodes
        (
            [("A30", "-", {}, "n1"), ("A30", "-", {}, "n1"), ("A30", "-", {}, "n2")],
            [("4g.24gb", 3, "free", 1)],
            PolicySpec(max_nodes_changed=1),
        ),
        # either/or: 1g or 2g serves the first item, so two 1g leave room for the 2g
        (
            [("A30", "-", {}, "n1")],
            [("2g.12gb", 2, "free", 2, ("1g.6gb",)), ("2g.12gb", 1, "free", 1)],
            PolicySpec(),
        ),
        # either/or next to in-use instances, with evictions, free and total kinds
        (
            [("A30", "1g.6gb@0", {"1g.6gb@0": "ns/a"}, "n1"), ("A30", "2g.12gb@2", {}, "n2")],
            [
                ("4g.24gb", 1, "free", 1, ("2g.12gb", "1g.6gb")),
                ("2g.12gb", 2, "total", 1),
                ("1g.6gb", 1, "free", 3),
            ],
            EVICT,
        ),
    ],
)
def test_planner_matches_exhaustive_search(gpu, want, fleet, demand, policy) -> None:
    gpus = [
        gpu(m, layout, node=node, index=i, pins=pins)
        for i, (m, layout, pins, node) in enumerate(fleet)
    ]
    items = [
        want(p, n, kind=k, priority=w, alternatives=rest[0] if rest else ())
        for p, n, k, w, *rest in demand
    ]
    best = best_by_brute_force(gpus, items, policy)
    assert plan_score(gpus, items, policy) == best
    assert best_by_vectors(gpus, items, policy) == best  # the fast brute force agrees


def test_exhaustive_on_a_larger_model(gpu, want) -> None:
    # One H100 (2,319 layouts) next to a busy one: each single-GPU choice is checked.
    gpus = [
        gpu("H100-80GB", "3g.40gb@4", pins={"3g.40gb@4": "ns/a"}),
        gpu("H100-80GB", "1g.10gb@0+2g.20gb@2", node="node-2"),
    ]
    items = [want("3g.40gb", 1, priority=2), want("1g.20gb", 2), want("2g.20gb", 1, kind="total")]
    policy = PolicySpec()
    # Under policy none GPU 0 keeps its in-use 3g, so only layouts holding it are candidates.
    options0 = [
        lay for lay in enumerate_layouts(gpus[0].model) if set(gpus[0].pins) <= set(lay.instances)
    ]
    options1 = enumerate_layouts(gpus[1].model)
    best = max(
        s
        for a in options0
        for b in options1
        if (s := score(gpus, [a, b], items, policy)) is not None
    )
    assert plan_score(gpus, items, policy) == best


def _bundles_met(gpus, layouts, demand) -> int:
    """Weighted demand met with bundles (policy none: every pin stays where it is): every
    placement of every bundle's pods on nodes, then the single items greedily by priority on
    what is left fleet-wide (exact: single instances are interchangeable)."""
    free: dict[str, Counter] = {}
    for g, layout in zip(gpus, layouts, strict=True):
        node = free.setdefault(g.node, Counter())
        node.update(i.profile for i in layout.instances)
        node.subtract(i.profile for i in g.pins)
    nodes = sorted(free)
    bundles = [d for d in demand if d.per_pod]
    singles = sorted((d for d in demand if not d.per_pod), key=lambda d: -d.priority)

    def weight(item) -> int:
        return item.priority * sum(p.count * int(p.profiles[0].split("g.")[0]) for p in item.parts)

    def best(n, left) -> int:
        if n == len(bundles):
            fleet = sum(left.values(), Counter())
            got = 0
            for item in singles:
                took = min(item.count, max(fleet[item.profile], 0))
                fleet[item.profile] -= took
                got += took * weight(item)
            return got
        item = bundles[n]
        found = 0
        for split in product(range(item.count + 1), repeat=len(nodes)):
            if sum(split) > item.count:
                continue
            trial = {k: Counter(v) for k, v in left.items()}
            for node, pods in zip(nodes, split, strict=True):
                for part in item.per_pod:
                    trial[node][part.profiles[0]] -= part.count * pods
            if any(v < 0 for c in trial.values() for v in c.values()):
                continue
            found = max(found, sum(split) * weight(item) + best(n + 1, trial))
        return found

    return best(0, free)


@pytest.mark.parametrize(
    ("fleet", "demand"),
    [
        # one free 1g on each of two nodes, an empty GPU on a third
        (
            [
                ("A30", "1g.6gb@0+1g.6gb@1", {"1g.6gb@0": "ns/a"}, "n1"),
                ("A30", "1g.6gb@0+1g.6gb@1", {"1g.6gb@0": "ns/b"}, "n2"),
                ("A30", "-", {}, "n3"),
            ],
            [({"1g.6gb": 2}, 1, 1)],
        ),
        # a bundle of two profiles next to single pods that want the same slices
        (
            [("A30", "-", {}, "n1"), ("A30", "2g.12gb@0", {"2g.12gb@0": "ns/a"}, "n2")],
            [({"2g.12gb": 1, "1g.6gb": 1}, 2, 2), ("1g.6gb", 2, 1)],
        ),
        # two pods of three instances each on two nodes of one GPU each
        (
            [("A30", "1g.6gb@3", {"1g.6gb@3": "ns/a"}, "n1"), ("A30", "-", {}, "n2")],
            [({"1g.6gb": 3}, 2, 1), ("2g.12gb", 1, 1)],
        ),
    ],
)
def test_bundles_met_as_well_as_exhaustive_placement(gpu, want, bundle, fleet, demand) -> None:
    from migplan.planner.hardware.layout import Layout

    gpus = [
        gpu(m, layout, node=node, index=i, pins=pins)
        for i, (m, layout, pins, node) in enumerate(fleet)
    ]
    items = [
        bundle(n, what, priority=w) if isinstance(what, dict) else want(what, n, priority=w)
        for what, n, w in demand
    ]
    policy = PolicySpec()
    best = max(
        _bundles_met(gpus, combo, items)
        for combo in product(*(enumerate_layouts(g.model) for g in gpus))
        if all(set(g.pins) <= set(lay.instances) for g, lay in zip(gpus, combo, strict=True))
    )
    result = plan(gpus, items, policy)
    got = _bundles_met(gpus, [Layout.parse(g.after) for g in result.gpus], items)
    reported = sum(
        r.met * d.priority * sum(p.count * int(p.profiles[0].split("g.")[0]) for p in d.parts)
        for r, d in zip(result.demand, items, strict=True)
    )
    assert reported == got == best


# ---- random small fleets where the criteria pull apart (#35 item 3) -------------------------


@functools.cache
def _a30_layouts():
    from migplan.planner.hardware.catalog import default_catalog

    return sorted(enumerate_layouts(default_catalog().model("A30")), key=str)


def best_by_vectors(gpus, demand, policy):
    """`best_by_brute_force` over every combination at once (numpy): each GPU's layouts as
    rows of figures, all combinations by broadcasting, the demand met once per distinct
    supply; the same scoring, fast enough for three GPUs of 76 layouts each."""
    profiles = sorted({p.name for g in gpus for p in g.model.profiles})
    rows = []
    for g in gpus:
        figures = []
        for layout in enumerate_layouts(g.model):
            kept = set(layout.instances)
            lost = sum(1 for i in g.pins if i not in kept)
            if lost and policy.disruption is Disruption.NONE:
                continue
            counts = Counter(i.profile for i in layout.instances)
            changed = int(layout != g.layout)
            figures.append(
                [
                    *(counts[p] for p in profiles),
                    lost,
                    changed,
                    headroom(g.model, layout),
                    2 * len(set(g.layout.instances) ^ kept),
                ]
            )
        rows.append(np.array(figures, dtype=np.int64))
    combos = rows[0]
    for more in rows[1:]:
        combos = (combos[:, None, :] + more[None, :, :]).reshape(-1, combos.shape[1])
    changed_per_gpu = [r[:, len(profiles) + 1] for r in rows]
    grid = np.stack(np.meshgrid(*changed_per_gpu, indexing="ij"), axis=-1).reshape(-1, len(gpus))
    nodes = np.zeros(len(combos), dtype=np.int64)
    for node in sorted({g.node for g in gpus}):
        on = [n for n, g in enumerate(gpus) if g.node == node]
        nodes += grid[:, on].max(axis=1)
    supply = combos[:, : len(profiles)]
    evictions, changed, room, ops = (combos[:, len(profiles) + k] for k in range(4))
    pins = Counter(i.profile for g in gpus for i in g.pins)
    need = np.array([pins[p] for p in profiles])
    allowed = ~((evictions > 0) & (supply < need).any(axis=1))
    if policy.max_gpus_changed is not None:
        allowed &= changed <= policy.max_gpus_changed
    if policy.max_nodes_changed is not None:
        allowed &= nodes <= policy.max_nodes_changed
    distinct, inverse = np.unique(supply, axis=0, return_inverse=True)
    met = np.array(
        [
            _best_weighted(Counter(dict(zip(profiles, row, strict=True))), pins, demand)
            for row in distinct
        ]
    )[inverse.reshape(-1)]
    keys = np.stack([met, -evictions, -changed, -nodes, room, -ops], axis=1)[allowed]
    return tuple(int(v) for v in max(map(tuple, keys)))


A30_PROFILES = ("1g.6gb", "2g.12gb", "4g.24gb")


@st.composite
def small_fleets(draw):
    """Three A30s on two nodes (so fewer GPUs and fewer nodes can disagree), each with a
    layout and some of its instances in use; demand of one to three items."""
    layouts = _a30_layouts()
    fleet = []
    for n, node in enumerate(("n1", "n1", "n2")):
        layout = draw(st.sampled_from(layouts))
        used = (
            draw(st.sets(st.sampled_from(layout.instances), max_size=2))
            if layout.instances
            else set()
        )
        fleet.append(
            (
                str(layout),
                {str(i): f"ns/p{n}{k}" for k, i in enumerate(sorted(used, key=str))},
                node,
            )
        )
    demand = draw(
        st.lists(
            st.tuples(
                st.sampled_from(A30_PROFILES),
                st.integers(1, 3),
                st.sampled_from(("free", "total")),
                st.integers(1, 3),
                st.sets(st.sampled_from(A30_PROFILES), max_size=1),
            ),
            min_size=1,
            max_size=3,
        )
    )
    policy = draw(
        st.builds(
            PolicySpec,
            disruption=st.sampled_from(list(Disruption)),
            max_gpus_changed=st.sampled_from((None, 1, 2)),
            max_nodes_changed=st.sampled_from((None, 1)),
        )
    )
    return fleet, demand, policy


@settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=small_fleets())
def test_planner_matches_exhaustive_search_on_random_small_fleets(gpu, want, case) -> None:
    fleet, demand, policy = case
    gpus = [
        gpu("A30", layout, node=node, index=i, pins=pins)
        for i, (layout, pins, node) in enumerate(fleet)
    ]
    items = [
        want(p, n, kind=k, priority=w, alternatives=tuple(sorted(alt - {p})))
        for p, n, k, w, alt in demand
    ]
    assert plan_score(gpus, items, policy) == best_by_vectors(gpus, items, policy)
