"""Giving a fixed supply to demand items: greedy for plain items, exact with either/or."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migplan.planner.allocation import EXACT_NODES, _flow, _greedy, allocate
from migplan.planner.demand import DemandItem, DemandKind

PROFILES = ["1g.10gb", "2g.20gb", "3g.40gb"]


def supply(total=None, free=None):
    return {DemandKind.TOTAL: total or {}, DemandKind.FREE: free or {}}


def test_an_either_or_item_takes_what_the_others_cannot_use(want) -> None:
    # Greedy by priority would give the 1g to the either/or item and starve the plain one.
    demand = [
        want("1g.10gb", 1, priority=2, alternatives=("2g.20gb",)),
        want("1g.10gb", 1, priority=1),
    ]
    result = allocate(demand, supply(free={"1g.10gb": 1, "2g.20gb": 1}))
    assert result.met == (1, 1)
    assert result.served == ({"2g.20gb": 1}, {"1g.10gb": 1})


def test_higher_weight_first_when_supply_is_short(want) -> None:
    demand = [want("1g.10gb", 2, alternatives=("2g.20gb",)), want("2g.20gb", 2, priority=5)]
    result = allocate(demand, supply(free={"1g.10gb": 1, "2g.20gb": 2}))
    assert result.met == (1, 2)
    assert result.served[0] == {"1g.10gb": 1}


def test_kinds_draw_on_their_own_supply(want) -> None:
    demand = [
        want("1g.10gb", 2, kind="total", alternatives=("2g.20gb",)),
        want("1g.10gb", 2, alternatives=("2g.20gb",)),
    ]
    result = allocate(demand, supply(total={"1g.10gb": 2}, free={"2g.20gb": 1}))
    assert result.met == (2, 1)
    assert result.served == ({"1g.10gb": 2}, {"2g.20gb": 1})


def test_negative_supply_counts_as_none(want) -> None:
    demand = [want("1g.10gb", 1, alternatives=("2g.20gb",))]
    assert allocate(demand, supply(free={"1g.10gb": -2})).met == (0,)


@st.composite
def plain_problems(draw):
    items = [
        DemandItem(
            draw(st.sampled_from(PROFILES)),
            draw(st.integers(0, 6)),
            draw(st.integers(1, 4)),
            draw(st.sampled_from(list(DemandKind))),
        )
        for _ in range(draw(st.integers(1, 6)))
    ]
    counts = st.dictionaries(st.sampled_from(PROFILES), st.integers(-1, 8))
    return items, {DemandKind.TOTAL: draw(counts), DemandKind.FREE: draw(counts)}


@settings(max_examples=200)
@given(plain_problems())
def test_the_flow_agrees_with_greedy_on_plain_items(case) -> None:
    # Without alternatives, priority-first greedy is optimal and the flow keeps its ties.
    demand, available = case
    assert _flow(demand, available) == _greedy(demand, available)


def test_a_bundle_needs_one_node_that_holds_all_its_instances(bundle) -> None:
    demand = [bundle(1, {"1g.10gb": 2})]
    spread = {"a": {"1g.10gb": 1}, "b": {"1g.10gb": 1}}
    available = supply(free={"1g.10gb": 2})
    assert allocate(demand, available, nodes=spread).met == (0,)
    # The whole fleet as one node: the solver's relaxation.
    assert allocate(demand, available).met == (1,)
    together = {"a": {"1g.10gb": 2}, "b": {}}
    result = allocate(demand, available, nodes=together)
    assert result.met == (1,)
    assert result.served == ({"1g.10gb": 2},)


@pytest.mark.parametrize("pairs_first", [True, False])
def test_bundles_of_more_instances_are_packed_first(bundle, pairs_first) -> None:
    # Node a is the tightest: pairs packed there first would leave the triple no node. A
    # fleet past EXACT_NODES, where the packing is greedy (nodes with nothing free count).
    demand = [bundle(1, {"7g.80gb": 2}), bundle(1, {"7g.80gb": 3})]
    if not pairs_first:
        demand.reverse()
    nodes = {"a": {"7g.80gb": 3}, "b": {"7g.80gb": 2, "1g.10gb": 5}}
    nodes |= {f"idle-{n}": {} for n in range(EXACT_NODES)}
    free = {"7g.80gb": 5, "1g.10gb": 5}
    result = allocate(demand, supply(free=free), nodes=nodes)
    assert result.met == (1, 1)


def test_single_instances_come_from_the_nodes_with_least_free(want, bundle) -> None:
    # Taking the single from node a would leave no node with two free.
    demand = [want("1g.10gb", 1), bundle(2, {"1g.10gb": 2})]
    nodes = {"a": {"1g.10gb": 1}, "b": {"1g.10gb": 2}}
    result = allocate(demand, supply(free={"1g.10gb": 3}), nodes=nodes)
    assert result.met == (1, 1)


def test_a_higher_priority_bundle_goes_before_lower_singles(want, bundle) -> None:
    demand = [want("1g.10gb", 2), bundle(1, {"1g.10gb": 2}, priority=5)]
    result = allocate(demand, supply(free={"1g.10gb": 2}), nodes={"a": {"1g.10gb": 2}})
    assert result.met == (0, 1)


def test_with_bundles_a_levels_singles_leave_lower_levels_what_they_need(want, bundle) -> None:
    # The priority-2 either/or item could take the one 1g.10gb, which the priority-1 item
    # needs; allocated together with the levels below, it takes the 2g.20gb instead.
    demand = [
        want("1g.10gb", 1, priority=2, alternatives=("2g.20gb",)),
        want("1g.10gb", 1),
        bundle(1, {"3g.40gb": 1}),
    ]
    free = {"1g.10gb": 1, "2g.20gb": 1, "3g.40gb": 1}
    result = allocate(demand, supply(free=free), nodes={"a": free})
    assert result.met == (1, 1, 1)
    assert result.served[0] == {"2g.20gb": 1}


def test_bundle_parts_with_alternatives(bundle) -> None:
    demand = [bundle(2, {("1g.10gb", "2g.20gb"): 1, "3g.40gb": 1})]
    nodes = {"a": {"2g.20gb": 1, "3g.40gb": 1}, "b": {"1g.10gb": 1, "3g.40gb": 1}}
    result = allocate(demand, supply(free={"1g.10gb": 1, "2g.20gb": 1, "3g.40gb": 2}), nodes=nodes)
    assert result.met == (2,)
    assert result.served == ({"1g.10gb": 1, "2g.20gb": 1, "3g.40gb": 2},)
    assert result.parts == (({"1g.10gb": 1, "2g.20gb": 1}, {"3g.40gb": 2}),)


def test_explicit_totals_are_not_taken_from_nodes(want, bundle) -> None:
    demand = [want("1g.10gb", 2, kind="total", priority=9), bundle(1, {"1g.10gb": 2})]
    nodes = {"a": {"1g.10gb": 2}}
    result = allocate(demand, supply(total={"1g.10gb": 2}, free={"1g.10gb": 2}), nodes=nodes)
    assert result.met == (2, 1)


@st.composite
def bundle_problems(draw):
    from migplan.planner.demand import Part

    items = []
    for _ in range(draw(st.integers(1, 5))):
        profiles = draw(st.lists(st.sampled_from(PROFILES), min_size=1, max_size=2, unique=True))
        count = draw(st.integers(0, 4))
        priority = draw(st.integers(1, 3))
        if draw(st.booleans()):
            parts = draw(
                st.lists(
                    st.builds(
                        Part,
                        st.lists(st.sampled_from(PROFILES), min_size=1, max_size=2, unique=True)
                        .map(sorted)
                        .map(tuple),
                        st.integers(1, 3),
                    ),
                    min_size=1,
                    max_size=2,
                )
            )
            items.append(
                DemandItem(
                    parts[0].profiles[0], count, priority, DemandKind.FREE, per_pod=tuple(parts)
                )
            )
        else:
            items.append(
                DemandItem(
                    profiles[0], count, priority, DemandKind.FREE, alternatives=tuple(profiles[1:])
                )
            )
    free = st.dictionaries(st.sampled_from(PROFILES), st.integers(0, 4))
    nodes = draw(st.dictionaries(st.sampled_from("abcd"), free, max_size=4))
    return items, nodes


@settings(max_examples=300)
@given(bundle_problems())
def test_bundles_never_take_more_than_their_nodes_hold(case) -> None:
    from collections import Counter

    from migplan.planner.allocation import hostable

    demand, nodes = case
    fleet = sum((Counter(free) for free in nodes.values()), Counter())
    result = allocate(demand, supply(free=fleet), nodes=nodes)
    taken = sum((Counter(s) for s in result.served), Counter())
    assert all(taken[p] <= fleet[p] for p in taken)
    for item, met, served, parts in zip(
        demand, result.met, result.served, result.parts, strict=True
    ):
        assert 0 <= met <= item.count
        assert sum(served.values()) == met * item.per_unit
        assert set(served) <= set(item.profiles)
        if item.per_pod:
            assert met <= hostable(item.per_pod, nodes)
            for part, got in zip(item.per_pod, parts, strict=True):
                assert sum(got.values()) == part.count * met
                assert set(got) <= set(part.profiles)


# ---- optimality against a brute force (#35 item 4) ------------------------------------------


def tie_rank(demand) -> list[int]:
    """Per item, how it ranks when weights tie: higher priority first, then earlier items
    (len(demand) for the first, 1 for the last)."""
    order = sorted(range(len(demand)), key=lambda n: (-demand[n].priority, n))
    rank = [0] * len(demand)
    for position, n in enumerate(order):
        rank[n] = len(demand) - position
    return rank


def brute_force(demand, available) -> tuple[int, int]:
    """The best allocation's (weighted demand met, units met times their tie rank), by trying
    every way to serve every unit: the most weighted demand, ties to higher priority, then to
    earlier items."""
    import itertools

    from migplan.planner.demand import demand_weight

    rank = tie_rank(demand)
    options = []  # per item: every (units per profile) it could take, unmet allowed
    for item in demand:
        ways = []
        for split in itertools.product(range(item.count + 1), repeat=len(item.profiles)):
            if sum(split) <= item.count:
                ways.append(dict(zip(item.profiles, split, strict=True)))
        options.append(ways)
    best = (0, 0)
    for choice in itertools.product(*options):
        used = {kind: Counter() for kind in DemandKind}
        for item, taken in zip(demand, choice, strict=True):
            used[item.kind].update(taken)
        if all(
            n <= max(available[kind].get(p, 0), 0) for kind in used for p, n in used[kind].items()
        ):
            units = [sum(t.values()) for t in choice]
            score = (
                sum(u * demand_weight(i) for u, i in zip(units, demand, strict=True)),
                sum(u * r for u, r in zip(units, rank, strict=True)),
            )
            best = max(best, score)
    return best


items = st.builds(
    lambda profile, count, priority, kind, others: DemandItem(
        profile,
        count,
        priority,
        kind,
        alternatives=tuple(p for p in PROFILES if p in others and p != profile),
    ),
    st.sampled_from(PROFILES),
    st.integers(1, 2),
    st.integers(1, 3),
    st.sampled_from(list(DemandKind)),
    st.sets(st.sampled_from(PROFILES), max_size=2),
)
supplies = st.fixed_dictionaries(
    {kind: st.dictionaries(st.sampled_from(PROFILES), st.integers(0, 3)) for kind in DemandKind}
)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(demand=st.lists(items, min_size=1, max_size=4), available=supplies)
def test_allocation_is_optimal_with_priorities_and_either_or_items(demand, available) -> None:
    found = allocate(demand, available)
    ranked = sum(m * r for m, r in zip(found.met, tie_rank(demand), strict=True))
    assert (found.weighted(demand), ranked) == brute_force(demand, available)
    for item, met, served in zip(demand, found.met, found.served, strict=True):
        assert 0 <= met <= item.count
        assert set(served) <= set(item.profiles)


# ---- what the brute force's small cases do not reach (scripts/mutation, #35) ---------------


def test_weight_decides_before_tie_rank_however_far_apart_the_ranks(want) -> None:
    # The either/or item ranks first (earlier, same priority) but is worth 1 (its 1g); the
    # 2g item is worth 2. A cost mixing the two criteria would give the 2g to the first.
    demand = [
        want("1g.10gb", 1, alternatives=("2g.20gb",)),
        want("3g.40gb", 1),
        want("2g.20gb", 1),
    ]
    result = allocate(demand, supply(free={"2g.20gb": 1}))
    assert result.met == (0, 0, 1)


def test_a_bundle_of_hundreds_of_pods_stops_at_its_count(bundle) -> None:
    # Past 256, equal ints are distinct objects: the count must be compared by value.
    # Four pods fit a node, so the 301st is alone on the 76th with room for three more.
    nodes = {f"n{i:03}": {"1g.10gb": 8} for i in range(100)}
    demand = [bundle(301, {"1g.10gb": 2})]
    result = allocate(demand, supply(free={"1g.10gb": 800}), nodes=nodes)
    assert result.met == (301,)
    assert result.served == ({"1g.10gb": 602},)


def test_scattered_instances_are_taken_from_as_many_nodes_as_it_needs() -> None:
    from migplan.planner.allocation import take_scattered

    nodes = {"a": Counter({"1g.10gb": 1}), "b": Counter({"1g.10gb": 2}), "c": Counter()}
    take_scattered(nodes, "1g.10gb", 3)
    assert nodes == {"a": Counter({"1g.10gb": 0}), "b": Counter({"1g.10gb": 0}), "c": Counter()}


def test_hostable_counts_pods_node_by_node_and_reads_a_deficit_as_none() -> None:
    from migplan.planner.allocation import hostable
    from migplan.planner.demand import Part

    two = (Part(("1g.10gb",), 2),)
    assert hostable(two, {"a": {"1g.10gb": 5}, "b": {"1g.10gb": 2}, "c": {"1g.10gb": 1}}) == 3
    either = (Part(("1g.10gb", "2g.20gb"), 1),)
    # A pinned pod left without its instance shows as -1 free: no instance to give.
    assert hostable(either, {"a": {"1g.10gb": -1, "2g.20gb": 1}}) == 1


@pytest.mark.parametrize("bundle_first", [True, False])
def test_priorities_past_256_are_levels_by_value(want, bundle, bundle_first) -> None:
    # Priorities read from separate objects are equal ints, not the same object.
    high = [int("1000"), int("1000")]
    demand = [bundle(1, {"1g.10gb": 2}, priority=high[0]), want("1g.10gb", 1, priority=high[1])]
    if not bundle_first:
        demand.reverse()
    result = allocate(demand, supply(free={"1g.10gb": 3}), nodes={"a": {"1g.10gb": 3}})
    assert result.met == (1, 1)


def test_a_total_item_next_to_bundles_gets_no_supply_that_is_not_there(want, bundle) -> None:
    demand = [bundle(1, {"1g.10gb": 1}), want("3g.40gb", 1, kind="total")]
    available = supply(total={"3g.40gb": 0}, free={"1g.10gb": 1})
    assert allocate(demand, available, nodes={"a": {"1g.10gb": 1}}).met == (1, 0)


def test_a_deficit_of_one_profile_does_not_shrink_a_node_for_another(bundle) -> None:
    nodes = {"a": {"1g.10gb": 2, "2g.20gb": -1}}
    demand = [bundle(1, {"1g.10gb": 2})]
    assert allocate(demand, supply(free={"1g.10gb": 2}), nodes=nodes).met == (1,)


def test_a_bundle_part_lists_only_the_profiles_that_served_it(bundle) -> None:
    demand = [bundle(1, {("1g.10gb", "2g.20gb"): 2})]
    result = allocate(demand, supply(free={"2g.20gb": 2}), nodes={"a": {"2g.20gb": 2}})
    assert result.served == ({"2g.20gb": 2},)
    assert result.parts == (({"2g.20gb": 2},),)


def test_many_either_or_items_of_high_priority_keep_costs_in_range(want) -> None:
    demand = [want("1g.10gb", 1, priority=1000, alternatives=("7g.80gb",)) for _ in range(20)]
    result = allocate(demand, supply(free={"1g.10gb": 7, "7g.80gb": 1}))
    assert sum(result.met) == 8


def test_scattered_instances_skip_a_node_in_deficit() -> None:
    from migplan.planner.allocation import take_scattered

    nodes = {"a": Counter({"1g.10gb": -1}), "b": Counter({"1g.10gb": 2})}
    take_scattered(nodes, "1g.10gb", 1)
    assert nodes == {"a": Counter({"1g.10gb": -1}), "b": Counter({"1g.10gb": 1})}


def test_a_levels_singles_are_served_whatever_comes_before_them(want, bundle) -> None:
    # With a bundle present, each level serves its own singles; a lower one listed first
    # must not stop the walk.
    demand = [
        want("1g.10gb", 1, priority=1),
        bundle(1, {"2g.20gb": 1}),
        want("1g.10gb", 1, priority=2),
    ]
    nodes = {"a": {"1g.10gb": 2, "2g.20gb": 1}}
    result = allocate(demand, supply(free={"1g.10gb": 2, "2g.20gb": 1}), nodes=nodes)
    assert result.met == (1, 1, 1)


def test_on_a_large_fleet_a_gang_packed_only_in_part_gets_nothing(bundle, want) -> None:
    """Past EXACT_NODES nodes bundles are packed greedily; a gang of three pods of 2 x 1g.10gb
    finds two nodes that host one each, so it gets nothing, and the plain pods take the
    instances it would have left idle."""
    from dataclasses import replace

    from migplan.planner.allocation import EXACT_NODES

    gang = replace(bundle(3, {"1g.10gb": 2}), gang="PodGroup ml/g", gang_minimum=3)
    plain = want("1g.10gb", 4)
    nodes = {f"n{i:03d}": {"1g.10gb": 2 if i < 2 else 0} for i in range(EXACT_NODES + 1)}
    result = allocate([gang, plain], supply(free={"1g.10gb": 4}), nodes=nodes)
    assert result.met == (0, 4)
    whole = replace(gang, count=2, gang_minimum=2)
    assert allocate([whole, plain], supply(free={"1g.10gb": 4}), nodes=nodes).met == (2, 0)


def test_an_exact_allocation_asked_again_is_the_same_and_each_caller_owns_its_copy(
    bundle,
) -> None:
    demand = [bundle(2, {"1g.10gb": 2})]
    available = {DemandKind.TOTAL: {}, DemandKind.FREE: {"1g.10gb": 4}}
    nodes = {"a": {"1g.10gb": 2}, "b": {"1g.10gb": 2}}
    first = allocate(demand, available, nodes=nodes)
    first.parts[0][0]["1g.10gb"] = 99
    first.served[0].clear()
    again = allocate(demand, available, nodes=nodes)
    assert again.met == (2,)
    assert again.parts == (({"1g.10gb": 4},),)
    assert again.served == ({"1g.10gb": 4},)
    # Other supply, another answer: one node holds only one instance now.
    assert allocate(demand, available, nodes={**nodes, "b": {"1g.10gb": 1}}).met == (1,)
