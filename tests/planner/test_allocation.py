"""Giving a fixed supply to demand items: greedy for plain items, exact with either/or."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from migplan.planner.allocation import _flow, _greedy, allocate
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
