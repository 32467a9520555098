"""The planner's plan is as good as the best of all layout combinations, found by brute force.

The brute force scores plans with its own implementation of the lexicographic objective:
priority x compute weighted demand met, then fewest evictions, GPUs changed, nodes touched,
then most headroom (largest profile still placeable in free slices), fewest operations.
"""

from __future__ import annotations

from collections import Counter
from itertools import product

import pytest

from migplan.planner.demand import DemandKind
from migplan.planner.enumeration import enumerate_layouts
from migplan.planner.solver import plan
from migplan.planner.spec import Disruption, PolicySpec

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
    weighted = 0
    for (profile, kind), items in _groups(demand).items():
        left = total[profile] - (pins[profile] if kind is DemandKind.FREE else 0)
        for item in sorted(items, key=lambda d: -d.priority):
            got = max(min(item.count, left), 0)
            left -= got
            weighted += got * item.priority * int(profile.split("g.")[0])
    return (weighted, -evictions, -changed_gpus, -len(nodes), room, -ops)


def _groups(demand):
    groups = {}
    for item in demand:
        groups.setdefault((item.profile, item.kind), []).append(item)
    return groups


def best_by_brute_force(gpus, demand, policy):
    options = [enumerate_layouts(g.model) for g in gpus]
    return max(
        s for combo in product(*options) if (s := score(gpus, combo, demand, policy)) is not None
    )


def plan_score(gpus, demand, policy):
    from migplan.planner.layout import Layout

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
    ],
)
def test_planner_matches_exhaustive_search(gpu, want, fleet, demand, policy) -> None:
    gpus = [
        gpu(m, layout, node=node, index=i, pins=pins)
        for i, (m, layout, pins, node) in enumerate(fleet)
    ]
    items = [want(p, n, kind=k, priority=w) for p, n, k, w in demand]
    assert plan_score(gpus, items, policy) == best_by_brute_force(gpus, items, policy)


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
