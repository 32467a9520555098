"""Prometheus metrics of the operator, served on `--metrics-port`."""

from __future__ import annotations

import contextlib
import threading

from prometheus_client import Counter, Gauge, Histogram

PLANS = Gauge("migplan_plans", "GPUPartitionPlans by phase", ["phase"])
NODES_RECONFIGURED = Counter(
    "migplan_nodes_reconfigured_total", "Nodes whose rollout finished", ["result"]
)
EVICTIONS = Counter("migplan_evictions_total", "Pods evicted through the Eviction API")
EVICTIONS_REFUSED = Counter(
    "migplan_evictions_refused_total", "Evictions refused (429), mostly by disruption budgets"
)
PLANNER_SECONDS = Histogram(
    "migplan_planner_seconds",
    "Wall time of one planning (inventory read, solve, validate)",
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
DEMAND_MET = Gauge("migplan_demand_met_ratio", "Share of the plan's demand met", ["plan"])
STEP_SECONDS = Histogram(
    "migplan_rollout_step_seconds",
    "Time a node spent in a rollout step",
    ["step"],
    buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600),
)

_phases: dict[str, str] = {}
_lock = threading.Lock()


def set_phase(plan: str, phase: str | None) -> None:
    """Record `plan`'s phase (None: the plan is gone) and refresh the per-phase gauge."""
    with _lock:
        if phase is None:
            _phases.pop(plan, None)
            with contextlib.suppress(KeyError):
                DEMAND_MET.remove(plan)
        else:
            _phases[plan] = phase
        counts: dict[str, int] = {}
        for value in _phases.values():
            counts[value] = counts.get(value, 0) + 1
        PLANS.clear()
        for value, count in counts.items():
            PLANS.labels(phase=value).set(count)
