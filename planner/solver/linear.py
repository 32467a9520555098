"""Linear expressions for the CP-SAT models, built in one call."""

from __future__ import annotations

from collections.abc import Sequence

from ortools.sat.python import cp_model
from ortools.sat.python import cp_model_helper as cmh

Expr = cp_model.LinearExprT


def linear_sum(terms: Sequence[tuple[Expr, int]], constant: int = 0) -> Expr:
    """sum(coefficient * variable) + constant as one expression (0 terms: the constant)."""
    live = [(v, k) for v, k in terms if k]
    if not live:
        return constant
    variables, coefficients = zip(*live, strict=True)
    return cp_model.LinearExpr.weighted_sum(list(variables), list(coefficients)) + constant


def maximize(model: cp_model.CpModel, expr: Expr) -> None:
    """`model.maximize(expr)`, the terms written into the proto in two batches: OR-Tools
    appends them one by one (a stage's objective on 2,000 GPUs of three models, 8,737 terms:
    64 ms instead of about 17 ms)."""
    if not isinstance(expr, cp_model.LinearExpr) or not expr.is_integer():
        model.maximize(expr)
        return
    flat = cmh.FlatIntExpr(expr)
    model.clear_objective()  # type: ignore[no-untyped-call]  # OR-Tools lacks a type hint here
    objective = model.proto.objective
    objective.vars.extend([v.index for v in flat.vars])
    objective.coeffs.extend([-c for c in flat.coeffs])
    objective.scaling_factor = -1.0
    objective.offset = -flat.offset
