"""The Pareto filter that keeps a pool's options small: checked against its definition."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from migplan.planner.solver.pools import pareto_rows


def _by_definition(values: list[list[int]]) -> list[int]:
    """Rows no other row matches or beats everywhere, first of equal rows kept, in order."""
    kept = []
    for i, row in enumerate(values):
        if row in values[:i]:
            continue
        beaten = any(
            other != row and all(o >= r for o, r in zip(other, row, strict=True))
            for other in values
        )
        if not beaten:
            kept.append(i)
    return kept


def _tables(high: int) -> st.SearchStrategy[list[list[int]]]:
    return st.integers(1, 5).flatmap(
        lambda columns: st.lists(
            st.lists(st.integers(-high, high), min_size=columns, max_size=columns),
            min_size=1,
            max_size=30,
        )
    )


@settings(max_examples=300, deadline=None, derandomize=True)
@given(values=_tables(3))
def test_pareto_rows_keep_exactly_the_undominated_first_rows(values: list[list[int]]) -> None:
    assert pareto_rows(np.array(values, dtype=np.int64)).tolist() == _by_definition(values)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(values=_tables(2**40))
def test_columns_too_wide_for_one_key_give_the_same_rows(values: list[list[int]]) -> None:
    assert pareto_rows(np.array(values, dtype=np.int64)).tolist() == _by_definition(values)


def test_no_rows_keep_no_rows() -> None:
    assert pareto_rows(np.zeros((0, 3), dtype=np.int64)).tolist() == []
