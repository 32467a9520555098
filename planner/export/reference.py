"""The GPUPartitionPlan reference (docs/plan-reference.md), generated from the same schema
as the CRD, so the documentation cannot drift from what the API server accepts."""

from __future__ import annotations

from typing import Any

from migplan.planner.api.spec import PlanSpec

HEADER = """# GPUPartitionPlan reference

`migplan.io/v1alpha1`, cluster-scoped, short name `gpp`. Generated from the planner's models by
`migplan reference > docs/plan-reference.md` (a test fails if this file is stale); the
CRD in `crds/` comes from the same models.

| field | type | default | description |
|---|---|---|---|
"""


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """`node` with $ref and `X | None` unwrapped (keeping the outer description/default)."""
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        return {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    options = [o for o in node.get("anyOf", []) if o.get("type") != "null"]
    if len(options) == 1:
        inner = _resolve(options[0], defs)
        return {**inner, **{k: v for k, v in node.items() if k != "anyOf"}}
    return node


def _type(node: dict[str, Any]) -> str:
    if "enum" in node:
        return " \\| ".join(f"`{v}`" for v in node["enum"])
    kind = str(node.get("type", "object"))
    bounds = [
        f"{symbol} {node[key]}"
        for key, symbol in (
            ("minimum", ">="),
            ("exclusiveMinimum", ">"),
            ("maximum", "<="),
            ("maxLength", "length <="),
            ("maxItems", "items <="),
        )
        if key in node
    ]
    return kind + (f" ({', '.join(bounds)})" if bounds else "")


def _default(node: dict[str, Any]) -> str:
    if "default" not in node or isinstance(node["default"], dict | list | type(None)):
        return ""
    value = node["default"]
    return f"`{str(value).lower() if isinstance(value, bool) else value}`"


def _rows(path: str, node: dict[str, Any], defs: dict[str, Any]) -> list[str]:
    node = _resolve(node, defs)
    description = " ".join(str(node.get("description", "")).split()).replace("|", "\\|")
    rows = [f"| `{path}` | {_type(node)} | {_default(node)} | {description} |"]
    for name, child in (node.get("properties") or {}).items():
        rows += _rows(f"{path}.{name}", child, defs)
    items = node.get("items")
    if isinstance(items, dict):
        items = _resolve(items, defs)
        for name, child in (items.get("properties") or {}).items():
            rows += _rows(f"{path}[].{name}", child, defs)
    return rows


def plan_reference() -> str:
    """The reference as Markdown: one row per field of `spec`, in schema order."""
    schema = PlanSpec.model_json_schema(by_alias=True, mode="validation")
    defs = schema.get("$defs", {})
    rows = []
    for name, child in (schema.get("properties") or {}).items():
        rows += _rows(f"spec.{name}", child, defs)
    return HEADER + "\n".join(rows) + "\n"
