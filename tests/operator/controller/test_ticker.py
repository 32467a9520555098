"""The ticker's liveness and the rollout invariants it publishes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import REGISTRY

from migplan.operator.controller import metrics
from migplan.operator.controller.cordons import CordonIndex
from migplan.operator.controller.planning import PASS_MEMOS
from migplan.operator.controller.reconciler import rollout_summary
from migplan.operator.controller.rollout import CORDONED_BY
from migplan.operator.controller.selection import PlanSelector
from migplan.operator.controller.ticker import STALL_FLOOR, PlanTicker, rollout_invariants
from migplan.planner.rollout.records import NodeRollout

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(("interval", "limit"), [(10.0, STALL_FLOOR), (60.0, 180.0)])
def test_the_ticker_is_stalled_after_three_quiet_intervals(interval: float, limit: float) -> None:
    clock = Clock()
    ticker = PlanTicker(controller=None, interval=interval, clock=clock)  # type: ignore[arg-type]
    clock.now += 10 * limit
    assert ticker.stalled() is None  # never started: a follower waiting for the lease
    ticker.started = True
    ticker.beat()
    clock.now += limit - 1
    assert ticker.stalled() is None
    clock.now += 2
    assert f"has not ticked for {limit + 1:.0f} s" in (ticker.stalled() or "")
    ticker.beat()
    assert ticker.stalled() is None


def record(node: str, step: str, minutes_ago: int | None = None) -> dict:
    found = {"node": node, "step": step, "before": [], "gpus": [], "disruptive": True}
    if minutes_ago is not None:
        found["since"] = (NOW - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return found


def plan(*records: dict) -> dict:
    """A plan whose status summarises these records, as the reconciler writes it."""
    summary = rollout_summary([NodeRollout.model_validate(r) for r in records], now=NOW)
    return {"status": {"rollout": summary}}


def test_invariants_count_steps_and_age_only_unfinished_ones() -> None:
    found = rollout_invariants(
        plans=[
            plan(record("a", "Evicting", 7), record("b", "Done", 60)),
            plan(record("c", "Evicting", 2), record("d", "Pending")),
            {"status": {}},
            {"status": {"rollout": {"nodes": {"gone": None}}}},  # an older migplan's
        ],
        cordoned=["a", "c"],
        now=NOW,
    )
    assert found.cordoned == 2
    assert found.steps == {"Evicting": 2, "Done": 1, "Pending": 1}
    assert found.oldest_step_seconds == 7 * 60  # Done's hour does not count


def test_published_invariants_replace_the_previous_round() -> None:
    metrics.set_invariants(metrics.Invariants(3, {"Evicting": 2, "Verifying": 1}, 42.0))
    metrics.set_invariants(metrics.Invariants(1, {"Verifying": 1}, 5.0))
    value = REGISTRY.get_sample_value
    assert value("migplan_nodes_cordoned") == 1
    assert value("migplan_rollout_nodes", {"step": "Verifying"}) == 1
    assert value("migplan_rollout_nodes", {"step": "Evicting"}) is None
    assert value("migplan_rollout_oldest_step_seconds") == 5.0


class _Recorder:
    """The controller and API as far as a round reaches them: plans listed, ticks and
    Kueue activations recorded; no DRA rules; releasing a node fails the test."""

    def __init__(self, plans: list[dict]) -> None:
        self.ticked: list[str] = []
        self.activated: set[str] = set()
        self.api = self
        self.plans = self
        self.dra = self
        self.kueue = self
        self._plans = plans
        self.clock = lambda: NOW

    def list_plans(self) -> list[dict]:
        return self._plans

    def taint_rules_served(self) -> bool:
        return False

    def tick(self, name: str) -> None:
        self.ticked.append(name)

    def activate(self, *, plans: set[str]) -> None:
        self.activated = set(plans)


def test_an_operator_with_a_selector_ticks_its_plans_and_leaves_the_others_nodes() -> None:
    plans = [
        {"metadata": {"name": "ours", "labels": {"migplan.io/operator": "a"}}, "status": {}},
        {"metadata": {"name": "theirs", "labels": {"migplan.io/operator": "b"}}, "status": {}},
    ]
    fake = _Recorder(plans)
    cordons = CordonIndex()
    cordons.saw(name="node-b", annotations={CORDONED_BY: "theirs"}, owner_key=CORDONED_BY)
    ticker = PlanTicker(
        controller=fake,  # type: ignore[arg-type]
        interval=1,
        cordons=cordons,
        selector=PlanSelector.parse("migplan.io/operator=a"),
    )
    ticker.tick_all()
    assert fake.ticked == ["ours"]
    # the other operator's plan still exists: its cordoned node is not an orphan, and a
    # Kueue check naming it stays active
    assert cordons.cordoned() == {"node-b": "theirs"}
    assert fake.activated == {"ours", "theirs"}


def test_a_round_forgets_what_passes_kept_for_deleted_plans() -> None:
    plans = [{"metadata": {"name": "kept"}, "status": {}}]
    kept = PASS_MEMOS.of("kept")
    PASS_MEMOS.of("deleted")
    cordons = CordonIndex()
    cordons.saw(name="node-a", annotations={}, owner_key=CORDONED_BY)  # none cordoned
    ticker = PlanTicker(
        controller=_Recorder(plans),  # type: ignore[arg-type]
        interval=1,
        cordons=cordons,
    )
    ticker.tick_all()
    assert "deleted" not in PASS_MEMOS
    assert PASS_MEMOS.of("kept") is kept
