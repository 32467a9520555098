"""Which plans an operator acts on (`--plan-selector`)."""

from __future__ import annotations

import pytest

from migplan.operator.controller.selection import EVERY_PLAN, PlanSelector
from migplan.planner.errors import MigplanInputError


def _plan(name: str, **labels: str) -> dict:
    return {"metadata": {"name": name, "labels": labels}}


def test_a_selector_takes_the_plans_carrying_all_its_labels() -> None:
    selector = PlanSelector.parse("migplan.io/operator=team-a, tier=gold")
    plans = [
        _plan("a", **{"migplan.io/operator": "team-a", "tier": "gold", "extra": "x"}),
        _plan("b", **{"migplan.io/operator": "team-a"}),
        _plan("c", **{"migplan.io/operator": "team-b", "tier": "gold"}),
        {"metadata": {"name": "unlabelled"}},
    ]
    assert [p["metadata"]["name"] for p in selector.plans(plans)] == ["a"]
    assert str(selector) == "migplan.io/operator=team-a,tier=gold"


def test_no_selector_takes_every_plan() -> None:
    assert PlanSelector.parse("") == EVERY_PLAN
    assert EVERY_PLAN.selects(None)
    assert str(EVERY_PLAN) == "every plan"


def test_an_empty_value_matches_only_an_empty_label() -> None:
    selector = PlanSelector.parse("team=")
    assert selector.selects({"team": ""})
    assert not selector.selects({})


@pytest.mark.parametrize(
    "text", ["team", "=a", "team=a b", "-bad=a", "team=a,team=b", "a/b/c=d", "team==a"]
)
def test_a_malformed_selector_is_refused_with_an_example(text: str) -> None:
    with pytest.raises(MigplanInputError, match="--plan-selector"):
        PlanSelector.parse(text)
