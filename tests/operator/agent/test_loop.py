"""The agent's loop waits for its NodePartition to change (or for the interval) between
passes, instead of passing again at once."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import pytest

from migplan.operator.agent import loop
from migplan.operator.agent.loop import Health, run
from migplan.operator.sim.api_server import InMemoryCluster
from migplan.planner.api.group import API_VERSION
from migplan.planner.api.nodepartition import (
    EVICTED_PODS_STOPPING,
    Condition,
    NodePartitionStatus,
    NodePhase,
)

NODE = "n1"


@dataclass
class CountingAgent:
    """The NodeAgent's part in the loop: a pass reads the NodePartition and notes its
    version; here it only counts."""

    api: InMemoryCluster
    node: str = NODE
    phase: NodePhase = NodePhase.APPLIED
    reason: str | None = None
    """The Ready condition's reason the pass reports."""
    seen_version: str | None = None
    passes: list[float] = field(default_factory=list)

    def run_once(self) -> NodePartitionStatus | None:
        found = self.api.plans.get_node_partition(name=self.node)
        self.seen_version = None if found is None else found["metadata"]["resourceVersion"]
        self.passes.append(time.monotonic())
        ready = Condition(type="Ready", status="False", reason=self.reason)
        return NodePartitionStatus(phase=self.phase, gpu_count=0, conditions=(ready,))


def _running(agent: CountingAgent, interval: float) -> tuple[threading.Event, threading.Thread]:
    stop = threading.Event()
    thread = threading.Thread(
        target=run,
        kwargs={"agent": agent, "stop": stop, "interval": interval, "health": Health(interval)},
        daemon=True,
    )
    thread.start()
    return stop, thread


def _partition(cluster: InMemoryCluster, layout: str) -> None:
    cluster.plans.apply_node_partition(
        body={
            "apiVersion": API_VERSION,
            "metadata": {"name": NODE},
            "spec": {"nodeName": NODE, "gpus": [{"index": 0, "layout": layout}]},
        }
    )


def test_a_pass_waits_for_the_partition_to_change() -> None:
    cluster = InMemoryCluster()
    _partition(cluster, "-")
    agent = CountingAgent(cluster)
    stop, thread = _running(agent, interval=30)
    try:
        time.sleep(0.5)
        assert len(agent.passes) == 1  # nothing changed: no second pass
        _partition(cluster, "7g.80gb@0")
        deadline = time.monotonic() + 2
        while len(agent.passes) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(agent.passes) == 2  # the change woke it
    finally:
        stop.set()
        _partition(cluster, "-")  # wakes the watch so the thread ends
        thread.join(timeout=5)


def test_waiting_for_the_device_plugin_passes_again_soon_not_at_once() -> None:
    cluster = InMemoryCluster()
    _partition(cluster, "-")
    agent = CountingAgent(cluster, phase=NodePhase.WAITING_FOR_DEVICE_PLUGIN)
    stop, thread = _running(agent, interval=30)
    try:
        time.sleep(0.5)
        assert len(agent.passes) == 1
    finally:
        stop.set()
        thread.join(timeout=5)


@pytest.mark.parametrize(("reason", "soon"), [(EVICTED_PODS_STOPPING, True), ("Blocked", False)])
def test_evicted_pods_stopping_are_looked_at_again_soon(monkeypatch, reason, soon) -> None:
    """Blocked by evicted pods' processes, the agent passes again soon (they are stopping);
    blocked otherwise, it waits for the partition to change or the interval."""
    monkeypatch.setattr(loop, "FOLLOW_UP_SECONDS", 0.2)
    cluster = InMemoryCluster()
    _partition(cluster, "-")
    agent = CountingAgent(cluster, phase=NodePhase.BLOCKED, reason=reason)
    stop, thread = _running(agent, interval=30)
    try:
        time.sleep(1.0)
        assert (len(agent.passes) >= 3) is soon
        assert len(agent.passes) >= 1
    finally:
        stop.set()
        thread.join(timeout=5)
