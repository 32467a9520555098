"""A tick that fails is visible on the plan: condition TickFailed and one event per new
message, cleared by the next good tick (real API server, controller in-process)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from nodes import gpu_node, mig_pod, report_partition
from waiting import wait_for

from migplan.operator.controller.reconciler import TICK_FAILED, PlanController
from migplan.operator.kube.connect import connect
from migplan.planner.hardware.catalog import default_catalog

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
    api = connect(kubeconfig=str(cp.kubeconfig))
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


def scheduling_message(cp, namespace: str, name: str) -> str:
    found = json.loads(cp.kubectl("get", "pod", "-n", namespace, name, "-o", "json").stdout)
    conditions = found["status"].get("conditions") or []
    return next((c.get("message", "") for c in conditions if c["type"] == "PodScheduled"), "")


def test_one_tenants_pod_out_of_bounds_is_skipped_not_every_plan(crds) -> None:
    # A pod asking for 1025 instances used to fail every tick of every plan (a ValidationError
    # in the inventory reader): now it is left out with a note and a Warning event on it.
    cp = crds
    ns = "tenant-bounds"
    cp.kubectl("create", "namespace", ns, check=False)
    # No node has 1025 instances: the scheduler turns it away for MIG, so it is demand.
    hostile = mig_pod("greedy", profile="1g.10gb", count=1025, namespace=ns)
    node = gpu_node("tenant-bounds-node", product="NVIDIA-H100-80GB-HBM3")
    plan = {**PLAN, "metadata": {"name": "tenant-bounds"}}
    plan["spec"] = {
        **PLAN["spec"],
        "demand": {"fromPendingPods": {"namespaceSelector": {}}},
    }
    cp.kubectl(
        "apply",
        "-f",
        "-",
        stdin=json.dumps({"kind": "List", "apiVersion": "v1", "items": [node, hostile, plan]}),
    )
    api = connect(kubeconfig=str(cp.kubeconfig))
    events: list[tuple[str, str, str]] = []
    controller = PlanController(
        api=api,
        catalog=default_catalog(),
        events=lambda body, kind, reason, message: events.append((kind, reason, message)),
    )
    try:
        wait_for(
            lambda: "Insufficient nvidia.com/mig-1g.10gb" in scheduling_message(cp, ns, "greedy"),
            "the scheduler to turn the greedy pod away for its MIG request",
        )
        for _ in range(2):
            controller.spec_changed("tenant-bounds")
        doc = json.loads(cp.kubectl("get", "gpp", "tenant-bounds", "-o", "json").stdout)
        status = doc["status"]
        assert status["phase"] == "Planned", status
        note = f"Pod {ns}/greedy skipped: requests.nvidia.com/mig-1g.10gb: Input should be"
        notes = status["plan"]["demandNotes"]
        assert any(n.startswith(note) for n in notes), notes
        assert not [e for e in events if e[1] == "Invalid"]
        warned = json.loads(
            cp.kubectl(
                "get",
                "events",
                "-n",
                ns,
                "--field-selector",
                "involvedObject.name=greedy,reason=MigplanSkipped",
                "-o",
                "json",
            ).stdout
        )["items"]
        assert len(warned) == 1  # two passes, one event
        assert "1024" in warned[0]["message"]
    finally:
        cp.kubectl("delete", "gpp", "tenant-bounds", "--wait=false", check=False)
        cp.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        cp.kubectl("delete", "node", "tenant-bounds-node", "--wait=false", check=False)


def test_one_agents_invalid_report_leaves_its_node_out_not_the_plan(crds) -> None:
    # An agent reporting a layout the GPU cannot have (4g.40gb starts only at 0 on an H100)
    # made every plan that read the fleet Invalid; now only that node is left out.
    cp = crds
    pool = "bad-report"
    nodes = [
        gpu_node(f"{pool}-a", product="NVIDIA-H100-80GB-HBM3", labels={"migplan.io/pool": pool}),
        gpu_node(f"{pool}-b", product="NVIDIA-H100-80GB-HBM3", labels={"migplan.io/pool": pool}),
    ]
    plan = {**PLAN, "metadata": {"name": pool}}
    plan["spec"] = {**PLAN["spec"], "nodeSelector": {"matchLabels": {"migplan.io/pool": pool}}}
    cp.kubectl(
        "apply", "-f", "-", stdin=json.dumps({"kind": "List", "apiVersion": "v1", "items": nodes})
    )
    report_partition(cp, f"{pool}-a", layout="4g.40gb@4")
    report_partition(cp, f"{pool}-b", layout="-")
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(plan))
    api = connect(kubeconfig=str(cp.kubeconfig))
    controller = PlanController(
        api=api, catalog=default_catalog(), events=lambda body, kind, reason, message: None
    )
    try:
        controller.spec_changed(pool)
        status = json.loads(cp.kubectl("get", "gpp", pool, "-o", "json").stdout)["status"]
        assert status["phase"] == "Planned", status
        left_out = status["plan"]["leftOut"]
        assert list(left_out) == [f"{pool}-a"]
        assert "its agent's report is not valid" in left_out[f"{pool}-a"]
        assert "4g.40gb cannot start at slice 4" in left_out[f"{pool}-a"]
        assert status["plan"]["demand"][0]["met"] == 1  # node b serves the demand
    finally:
        cp.kubectl("delete", "gpp", pool, "--wait=false", check=False)
        for node in nodes:
            cp.kubectl("delete", "node", node["metadata"]["name"], "--wait=false", check=False)
