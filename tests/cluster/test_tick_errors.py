"""A tick that fails is visible on the plan: condition TickFailed and one event per new
message, cleared by the next good tick (real API server, controller in-process)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from migplan.operator.controller.reconciler import TICK_FAILED, PlanController
from migplan.operator.kube import client as kube
from migplan.planner.catalog import default_catalog

PLAN = {
    "apiVersion": "migplan.io/v1alpha1",
    "kind": "GPUPartitionPlan",
    "metadata": {"name": "tick-errors"},
    "spec": {
        "nodeSelector": {"matchLabels": {"migplan.io/pool": "tick-errors-none"}},
        "demand": {"profiles": [{"resource": "nvidia.com/mig-1g.10gb", "count": 1}]},
        "dryRun": True,
    },
}


def _tick_failed(cp) -> dict | None:
    doc = json.loads(cp.kubectl("get", "gpp", "tick-errors", "-o", "json").stdout)
    found = [c for c in doc["status"].get("conditions", []) if c["type"] == TICK_FAILED]
    return found[0] if found else None


def test_a_failing_tick_sets_a_condition_and_one_event_then_clears(crds) -> None:
    cp = crds
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(PLAN))
    api = kube.connect(kubeconfig=str(cp.kubeconfig))
    events: list[tuple[str, str, str]] = []

    def record(body, kind, reason, message) -> None:
        events.append((kind, reason, message))

    def broken_clock() -> datetime:
        raise OverflowError("date value out of range")

    def controller(clock) -> PlanController:
        return PlanController(api=api, catalog=default_catalog(), events=record, clock=clock)

    try:
        controller(lambda: datetime.now(UTC)).spec_changed("tick-errors")
        failing = controller(broken_clock)
        for _ in range(2):
            with pytest.raises(OverflowError):
                failing.tick("tick-errors")
        cond = _tick_failed(cp)
        assert cond["status"] == "True"
        assert cond["reason"] == "OverflowError"
        assert cond["message"] == "OverflowError: date value out of range"
        assert [e for e in events if e[1] == TICK_FAILED] == [
            ("Warning", TICK_FAILED, "OverflowError: date value out of range")
        ]  # two failing ticks, one event
        controller(lambda: datetime.now(UTC)).tick("tick-errors")
        assert _tick_failed(cp)["status"] == "False"
    finally:
        cp.kubectl("delete", "gpp", "tick-errors", "--wait=false", check=False)
