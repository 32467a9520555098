"""Small integer programs for brute-force checks of the LP-based helpers (`prune.py`,
`neighbourhood.py`): every variable in 0..TOP, so each point can be enumerated."""

from __future__ import annotations

from hypothesis import strategies as st
from ortools.sat.python import cp_model

TOP = 3

Problem = tuple[list[int], list[tuple[list[int], int]], list[int]]
"""Costs, rows (`weights . x <= cap`) and a vector in 0..TOP (a covering row or a hint)."""


def domains(model: cp_model.CpModel) -> list[tuple[int, int]]:
    """Each variable's (lower, upper) bound in the model as it stands."""
    return [(v.domain[0], v.domain[1]) for v in model.proto.variables]


def problems(max_variables: int) -> st.SearchStrategy[Problem]:
    """2..`max_variables` variables, costs in -3..5, one to three rows."""
    return st.integers(min_value=2, max_value=max_variables).flatmap(
        lambda n: st.tuples(
            st.lists(st.integers(-3, 5), min_size=n, max_size=n),
            st.lists(
                st.tuples(st.lists(st.integers(0, 3), min_size=n, max_size=n), st.integers(1, 8)),
                min_size=1,
                max_size=3,
            ),
            st.lists(st.integers(0, TOP), min_size=n, max_size=n),
        )
    )
