"""The CRDs in crds/ are exactly what the models generate (run `migplan crds --output-dir
crds/` after changing planner/api/spec.py or planner/api/nodepartition.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from migplan.operator.cli.crds import render
from migplan.planner.api.spec import PlanSpec
from migplan.planner.export.crd import all_crds, openapi

CRDS = Path(__file__).resolve().parents[3] / "crds"


@pytest.mark.parametrize("name", sorted(all_crds()))
def test_committed_crd_matches_the_models(name) -> None:
    assert (CRDS / name).read_text() == render(all_crds()[name]), (
        f"crds/{name} is stale: run `migplan crds --output-dir crds/`"
    )


def test_schema_is_structural() -> None:
    def walk(node, path="spec"):
        if isinstance(node, dict):
            assert "$ref" not in node, path
            assert "anyOf" not in node, path
            if node.get("type") == "object" and "properties" in node:
                assert "additionalProperties" not in node, path
            for key, value in node.items():
                walk(value, f"{path}.{key}")
        elif isinstance(node, list):
            for item in node:
                walk(item, path)

    walk(openapi(PlanSpec))


def test_committed_plan_reference_matches_the_models() -> None:
    from migplan.planner.export.reference import plan_reference

    committed = (CRDS.parent / "docs" / "plan-reference.md").read_text()
    assert committed == plan_reference(), (
        "docs/plan-reference.md is stale: run `migplan reference > docs/plan-reference.md`"
    )
    assert "| `spec.rollout.drainTimeout` | string" in committed
