"""Linear expressions for the CP-SAT models, built in one call."""

from __future__ import annotations

from collections.abc import Sequence

from ortools.sat.python import cp_model

Expr = cp_model.LinearExprT


def linear_sum(terms: Sequence[tuple[Expr, int]], constant: int = 0) -> Expr:
    """sum(coefficient * variable) + constant as one expression (0 terms: the constant)."""
    live = [(v, k) for v, k in terms if k]
    if not live:
        return constant
    variables, coefficients = zip(*live, strict=True)
    return cp_model.LinearExpr.weighted_sum(list(variables), list(coefficients)) + constant
