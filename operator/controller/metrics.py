"""Prometheus metrics of the operator, served on `--metrics-port`."""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass

from prometheus_client import Counter, Gauge, Histogram

from migplan.planner.rollout.records import FINISHED, NodeStep

FINISHED_STEPS = tuple(step.value for step in FINISHED)
ALL_STEPS = tuple(step.value for step in NodeStep)
PLANS = Gauge("migplan_plans", "GPUPartitionPlans by phase", ["phase"])
NODES_RECONFIGURED = Counter(
    "migplan_nodes_reconfigured_total", "Nodes whose rollout finished", ["plan", "result"]
)
EVICTIONS = Counter("migplan_evictions_total", "Pods evicted through the Eviction API", ["plan"])
EVICTIONS_REFUSED = Counter(
    "migplan_evictions_refused_total",
    "Evictions refused (429), mostly by disruption budgets",
    ["plan"],
)
PASS_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


def _per_pass(name: str, documentation: str) -> Histogram:
    """Seconds of some kind, one observation per planning pass of a plan."""
    return Histogram(name, documentation, ["plan"], buckets=PASS_BUCKETS)


PLANNER_SECONDS = _per_pass(
    "migplan_planner_seconds", "Wall time of one planning (inventory read, solve, validate)"
)
PLANNER_CPU_SECONDS = _per_pass(
    "migplan_planner_cpu_seconds",
    "CPU time of the thread that plans, per planning (the solver's helper threads not "
    "counted): beside migplan_planner_seconds, how much of a pass waited for a core",
)
PLANNER_READ_SECONDS = _per_pass(
    "migplan_planner_read_seconds",
    "Wall time of a planning pass's reads (informer caches or lists, live facts) and "
    "screening, before the planner starts: part of migplan_planner_seconds",
)
PLANS_KEPT = Counter(
    "migplan_plans_kept_total",
    "Planning passes whose inputs were the last pass's, which took its plan (proven best) "
    "instead of solving again; the rest of migplan_planner_seconds_count solved",
    ["plan"],
)
DEMAND_MET = Gauge("migplan_demand_met_ratio", "Share of the plan's demand met", ["plan"])
STEP_SECONDS = Histogram(
    "migplan_rollout_step_seconds",
    "Time a node spent in a rollout step",
    ["plan", "step"],
    buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600),
)

CORDONED = Gauge("migplan_nodes_cordoned", "GPU nodes migplan holds cordoned, all plans")
NODES_IN_STEP = Gauge(
    "migplan_rollout_nodes", "Nodes of current rollouts in each step, all plans", ["step"]
)
OLDEST_STEP = Gauge(
    "migplan_rollout_oldest_step_seconds",
    "How long the longest-running unfinished rollout step has lasted (0: none in hand)",
)
TICKER_LAST = Gauge(
    "migplan_ticker_last_tick_timestamp_seconds", "When the plan ticker last made progress"
)


@dataclass(frozen=True)
class Invariants:
    """The rollout invariants one ticker round observed."""

    cordoned: int
    steps: dict[str, int]
    oldest_step_seconds: float


def set_invariants(found: Invariants) -> None:
    """Publish one round's invariants (steps no node is in drop out)."""
    CORDONED.set(found.cordoned)
    NODES_IN_STEP.clear()
    for step, count in found.steps.items():
        NODES_IN_STEP.labels(step=step).set(count)
    OLDEST_STEP.set(found.oldest_step_seconds)
    TICKER_LAST.set_to_current_time()


_phases: dict[str, str] = {}
_lock = threading.Lock()


def set_phase(plan: str, phase: str | None) -> None:
    """Record `plan`'s phase (None: the plan is gone) and refresh the per-phase gauge."""
    with _lock:
        if phase is None:
            _phases.pop(plan, None)
            _forget(plan)
        else:
            _phases[plan] = phase
        counts: dict[str, int] = {}
        for value in _phases.values():
            counts[value] = counts.get(value, 0) + 1
        PLANS.clear()
        for value, count in counts.items():
            PLANS.labels(phase=value).set(count)


def observe_pass(plan: str, *, seconds: float, cpu: float, read: float, kept: bool) -> None:
    """One planning pass of `plan`: its wall time, its thread's CPU time and its reads, and
    whether it kept the last plan (`PLANS_KEPT`)."""
    PLANNER_SECONDS.labels(plan=plan).observe(seconds)
    PLANNER_CPU_SECONDS.labels(plan=plan).observe(cpu)
    PLANNER_READ_SECONDS.labels(plan=plan).observe(read)
    kept_total = PLANS_KEPT.labels(plan=plan)
    if kept:
        kept_total.inc()


def _forget(plan: str) -> None:
    """Drop a deleted plan's series (a counter of a plan that is gone only misleads)."""
    for metric in (
        DEMAND_MET,
        EVICTIONS,
        EVICTIONS_REFUSED,
        PLANNER_SECONDS,
        PLANNER_CPU_SECONDS,
        PLANNER_READ_SECONDS,
        PLANS_KEPT,
    ):
        with contextlib.suppress(KeyError):
            metric.remove(plan)
    for result in FINISHED_STEPS:
        with contextlib.suppress(KeyError):
            NODES_RECONFIGURED.remove(plan, result)
    for step in ALL_STEPS:
        with contextlib.suppress(KeyError):
            STEP_SECONDS.remove(plan, step)
