"""`migplan operator` (kopf) on the real control plane: a dryRun plan is planned and its
status, printer columns and event say so."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from nodes import gpu_node, report_partition
from waiting import wait_for

pytestmark = pytest.mark.cluster

PLAN = {
    "apiVersion": "migplan.io/v1alpha1",
    "kind": "GPUPartitionPlan",
    "metadata": {"name": "op-pool"},
    "spec": {
        "nodeSelector": {"matchLabels": {"migplan.io/pool": "op"}},
        "demand": {"profiles": [{"resource": "nvidia.com/mig-3g.40gb", "count": 3}]},
        "dryRun": True,
    },
}


def plan_status(cp) -> dict:
    return json.loads(cp.kubectl("get", "gpp", "op-pool", "-o", "json").stdout).get("status", {})


def test_operator_plans_a_dry_run_plan(crds) -> None:
    cp = crds
    for name in ("op-1", "op-2"):
        cp.kubectl(
            "apply",
            "-f",
            "-",
            stdin=json.dumps(
                gpu_node(name, product="NVIDIA-H100-80GB-HBM3", labels={"migplan.io/pool": "op"})
            ),
        )
        report_partition(cp, name)
    migplan = str(Path(sys.executable).parent / "migplan")
    proc = subprocess.Popen(
        [migplan, "operator", "--standalone", "--kubeconfig", str(cp.kubeconfig)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ),
    )
    try:
        cp.kubectl("apply", "-f", "-", stdin=json.dumps(PLAN))
        status = wait_for(
            lambda: (s := plan_status(cp)).get("phase") == "Planned" and s,
            "the operator to plan",
            timeout=60,
        )
        assert status["demandMet"] == "3/3"
        assert status["nodes"] == 2
        assert status["plan"]["solver"]["status"] == "OPTIMAL"
        conditions = {c["type"]: c["status"] for c in status["conditions"]}
        assert conditions == {
            "Planned": "True",
            "Infeasible": "False",
            "Conflict": "False",
            "NodesLeftOut": "False",
            "Preflight": "True",  # passed, with warnings: no device plugin or GFD pods here
        }
        row = cp.kubectl("get", "gpp", "op-pool").stdout.splitlines()[1].split()
        assert row[:4] == ["op-pool", "Planned", "2", "3/3"]
        events = cp.kubectl(
            "get", "events", "--field-selector", "involvedObject.name=op-pool", "-o", "json"
        ).stdout
        assert "planned: demand 3/3 met" in events

        # A spec change is planned again: ask for more than two H100s can hold.
        cp.kubectl(
            "patch",
            "gpp",
            "op-pool",
            "--type=merge",
            "-p",
            json.dumps(
                {
                    "spec": {
                        "demand": {"profiles": [{"resource": "nvidia.com/mig-3g.40gb", "count": 5}]}
                    }
                }
            ),
        )
        status = wait_for(
            lambda: (s := plan_status(cp)).get("demandMet") == "4/5" and s,
            "the operator to re-plan",
            timeout=60,
        )
        conditions = {c["type"]: c for c in status["conditions"]}
        assert conditions["Infeasible"]["status"] == "True"
        assert "at most 4 instances of 3g.40gb" in conditions["Infeasible"]["message"]
    finally:
        cp.kubectl("delete", "gpp", "--all", "--wait=true", "--timeout=60s", check=False)
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, output[-3000:]


def test_peering_lets_one_operator_take_over_from_another(crds) -> None:
    cp = crds
    cp.kubectl(
        "apply", "-f", str(Path(__file__).parents[2] / "deploy" / "optional" / "kopf-peering.yaml")
    )
    cp.kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/clusterkopfpeerings.kopf.dev",
    )
    migplan = str(Path(sys.executable).parent / "migplan")

    def start(priority: int) -> subprocess.Popen:
        return subprocess.Popen(
            [
                migplan,
                "operator",
                "--kubeconfig",
                str(cp.kubeconfig),
                "--metrics-port",
                "0",
                "--priority",
                str(priority),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "MIGPLAN_LOG_LEVEL": "info"},
        )

    def peers() -> dict:
        found = cp.kubectl("get", "clusterkopfpeering", "migplan", "-o", "json", check=False)
        return json.loads(found.stdout).get("status", {}) if found.returncode == 0 else {}

    first = start(0)
    second = None
    try:
        wait_for(lambda: len(peers()) == 1, "the operator to join the peering object")
        second = start(100)
        status = wait_for(lambda: len(s := peers()) == 2 and s, "the second operator to join")
        assert sorted(p["priority"] for p in status.values()) == [0, 100]
    finally:
        outputs = []
        for proc in (p for p in (second, first) if p is not None):
            proc.send_signal(signal.SIGTERM)
            outputs.append(proc.communicate(timeout=60)[0])
    # The lower-priority operator paused in favour of the other; the higher one did not.
    assert "Pausing operations in favour of" in outputs[-1], outputs[-1][-3000:]
    assert "Pausing operations" not in outputs[0], outputs[0][-3000:]
