"""What every rollout must end in, whatever went wrong on the way: the check the fault, HA
(and soak) suites share."""

from __future__ import annotations

import json
from collections import Counter

from rollout_records import rollout_nodes

from migplan.operator.controller.rollout import CORDONED_BY
from migplan.operator.sim.fleet import SimulatedFleet
from migplan.planner.hardware.layout import Layout

FINISHED = {"Done", "RolledBack", "Failed"}


def plan_events(cp, plan: str) -> list[dict]:
    return json.loads(
        cp.kubectl(
            "get", "events", "--field-selector", f"involvedObject.name={plan}", "-o", "json"
        ).stdout
    )["items"]


def assert_converged(cp, plan: str, fleet: SimulatedFleet, *, rolled_out: bool = True) -> dict:
    """The plan's rollout finished by its rules and left the cluster as its status says:
    every node finished; no node left cordoned; no pod evicted twice, and none the plan did
    not name; every instance a pod holds still exists; a Done node has exactly its target.
    With `rolled_out` the last plan must have changed something (the fault suites); the
    soak's last plan may have had nothing to do. Returns the plan's status."""
    status = json.loads(cp.kubectl("get", "gpp", plan, "-o", "json").stdout)["status"]
    records = rollout_nodes(cp, plan, status)
    assert records or not rolled_out, status
    assert {r["step"] for r in records.values()} <= FINISHED, records
    for name in fleet.nodes:
        node = json.loads(cp.kubectl("get", "node", name, "-o", "json").stdout)
        assert not node["spec"].get("unschedulable"), f"{name} left cordoned"
        assert CORDONED_BY not in node["metadata"].get("annotations", {}), name
    evictions = [e for e in plan_events(cp, plan) if e["reason"] == "Evicted"]
    evicted = Counter(e["message"].split(" evicted from ")[0] for e in evictions)
    twice = {pod: n for pod, n in evicted.items() if n > 1}
    twice |= {e["message"]: e["count"] for e in evictions if e.get("count", 1) > 1}
    assert not twice, f"evicted more than once: {twice}"
    named = {pod for r in records.values() for pod in r.get("evict", [])}
    assert set(evicted) <= named, f"evicted but not named by the plan: {set(evicted) - named}"
    for name, fake in fleet.nodes.items():
        held = fleet.plugin.bindings(name)
        for (gpu, instance), pod in held.items():
            assert instance in fake.layout(gpu).instances, f"{pod}'s {instance} was destroyed"
        record = records.get(name)
        if record and record["step"] == "Done":
            for target in record["gpus"]:
                have = fake.layout(target["index"])
                assert have == Layout.parse(target["layout"]), (name, str(have), target)
    return status
