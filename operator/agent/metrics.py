"""Prometheus metrics of the node agent (with the NVML call metrics of `nvml/metrics.py`),
served on `migplan agent --metrics-port`."""

from __future__ import annotations

import time
from collections import Counter as Tally
from collections.abc import Sequence

from prometheus_client import Counter, Gauge

from migplan.planner.api.nodepartition import GpuObserved
from migplan.planner.hardware.layout import Layout

PASSES = Counter(
    "migplan_agent_passes_total",
    "Reconcile passes of the node's NodePartition, by result (ok, error, no-partition)",
    ["result"],
)
PHASE = Gauge(
    "migplan_agent_phase",
    "1 for the phase the node's NodePartition is in after the last pass",
    ["phase"],
)
INSTANCES = Gauge(
    "migplan_agent_instances",
    "MIG instances on this node's GPUs after the last pass, by profile",
    ["profile"],
)
LAST_APPLY = Gauge(
    "migplan_agent_last_apply_timestamp_seconds",
    "When the agent last reached Applied for a new NodePartition generation (Unix time)",
)


def record_pass(*, phase: str, observed: Sequence[GpuObserved], newly_applied: bool) -> None:
    """After a pass that reported `phase`: phase, instances by profile, and the last apply
    when this pass reached Applied for a spec generation not applied before (a change often
    becomes Applied a pass later, once the device plugin shows it)."""
    PHASE.clear()
    PHASE.labels(phase=phase).set(1)
    counts: Tally[str] = Tally()
    for gpu in observed:
        counts.update(Layout.parse(gpu.layout).profile_counts())
    INSTANCES.clear()
    for profile, count in sorted(counts.items()):
        INSTANCES.labels(profile=profile).set(count)
    if newly_applied:
        LAST_APPLY.set(time.time())
