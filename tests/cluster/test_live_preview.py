"""`migplan preview` on the live cluster plans the same as on the inventory it dumps."""

from __future__ import annotations

import json

import pytest
from nodes import gpu_node, mig_pod, report_partition
from waiting import wait_for

from migplan.operator.cli.app import run

pytestmark = pytest.mark.cluster

PLAN = """
apiVersion: migplan.io/v1alpha1
kind: GPUPartitionPlan
metadata: {name: live-pool}
spec:
  nodeSelector: {matchLabels: {migplan.io/pool: live}}
  demand:
    fromPendingPods:
      namespaceSelector: {matchLabels: {team: live}}
  dryRun: true
"""


def test_live_preview_matches_the_dumped_inventory(crds, tmp_path, capsys) -> None:
    cp = crds
    cp.kubectl(
        "apply",
        "-f",
        "-",
        stdin=json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": "live-ns", "labels": {"team": "live"}},
            }
        ),
    )
    for name in ("live-1", "live-2", "live-silent"):
        cp.kubectl(
            "apply",
            "-f",
            "-",
            stdin=json.dumps(
                gpu_node(name, product="NVIDIA-H100-80GB-HBM3", labels={"migplan.io/pool": "live"})
            ),
        )
    report_partition(cp, "live-1", layout="3g.40gb@0", in_use={"3g.40gb@0": "live-ns/busy"})
    report_partition(cp, "live-2")
    # a profile no node in the session advertises, so the pod stays Pending
    cp.kubectl(
        "apply",
        "-f",
        "-",
        stdin=json.dumps(mig_pod("wants-me", profile="1g.10gb+me", namespace="live-ns")),
    )
    wait_for(
        lambda: (
            "Unschedulable"
            in cp.kubectl(
                "get",
                "pod",
                "wants-me",
                "-n",
                "live-ns",
                "-o",
                "jsonpath={.status.conditions[?(@.type=='PodScheduled')].reason}",
            ).stdout
        ),
        "the scheduler to give up on the pod",
    )
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN)
    kubeconfig = str(cp.kubeconfig)

    def dumped() -> str:
        assert run(["inventory", "--kubeconfig", kubeconfig]) == 0
        return capsys.readouterr().out

    # The controller-manager goes on changing a node after it joins (the not-ready taint
    # taken off; the deprecated beta.kubernetes.io/os label added where a node lacks it):
    # about a second here, longer on a busy control plane, where the inventory dumped after
    # the live preview once hashed differently. A preview between two equal dumps read the
    # cluster as the dump has it.
    for _ in range(10):
        before = dumped()
        assert run(["preview", str(plan), "--kubeconfig", kubeconfig, "-o", "json"]) == 0
        live_out, live_err = capsys.readouterr()
        if dumped() == before:
            break
    else:
        pytest.fail("the cluster changed between every two inventory dumps")
    assert "node live-silent left out: its agent has not reported" in live_err
    live = json.loads(live_out)
    assert [(g["node"], g["before"]) for g in live["gpus"]] == [
        ("live-1", "3g.40gb@0"),
        ("live-2", "-"),
    ]
    assert live["gpus"][0]["inUse"] == {"3g.40gb@0": "live-ns/busy"}
    [want] = live["demand"]
    assert (want["resource"], want["requested"], want["met"]) == ("nvidia.com/mig-1g.10gb.me", 1, 1)
    assert want["pods"] == ["live-ns/wants-me"]

    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(before)
    assert run(["preview", str(plan), "--cluster", str(inventory), "-o", "json"]) == 0
    offline = json.loads(capsys.readouterr().out)
    for doc in (live, offline):
        doc["solver"].pop("wallSeconds")
        doc["solver"].pop("buildSeconds")
        doc["solver"].pop("stages")
    assert offline == live


def test_preview_finds_the_gpu_operator_as_it_is_told(crds, tmp_path, capsys) -> None:
    """The GPU Operator settings the operator takes (here the label GFD's MIG strategy is
    read from) are preview's too, so both leave out the same nodes."""
    cp = crds
    node = gpu_node("strat-1", product="NVIDIA-H100-80GB-HBM3", labels={"migplan.io/pool": "strat"})
    node["metadata"]["labels"]["example.com/mig.strategy"] = "single"
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(node))
    report_partition(cp, "strat-1")
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN.replace("live-pool", "strat-pool").replace("pool: live", "pool: strat"))
    kubeconfig = str(cp.kubeconfig)
    assert run(["preview", str(plan), "--kubeconfig", kubeconfig, "-o", "json"]) == 0
    _, err = capsys.readouterr()
    assert "strat-1 left out" not in err
    told = ["--mig-strategy-label", "example.com/mig.strategy"]
    assert run(["preview", str(plan), "--kubeconfig", kubeconfig, "-o", "json", *told]) == 0
    out, err = capsys.readouterr()
    assert "node strat-1 left out: preflight: MIG strategy single" in err
    assert json.loads(out)["gpus"] == []
    assert run(["export", "mig-parted", str(plan), "--kubeconfig", kubeconfig, *told]) == 0
    assert "node strat-1 left out: preflight: MIG strategy single" in capsys.readouterr().err
