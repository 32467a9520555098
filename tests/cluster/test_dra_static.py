"""DRA static mode end to end: the agent lays out the GPU, NVIDIA's DRA kubelet plugin
(simulated) republishes its MIG devices, and the real scheduler allocates a pending claim;
the instance a running claim holds is kept."""

from __future__ import annotations

import json
import time

import pytest
from dra_objects import MIG_CLASS, claim_and_pod, pod_phase, unschedulable
from operator_proc import running_operator
from pools import ALWAYS_OPEN, apply, build_pool, plan_status
from waiting import wait_for

pytestmark = pytest.mark.cluster

NS = "drs"
POOL = {"key": "migplan.io/pool", "operator": "Equal", "value": NS, "effect": "NoSchedule"}


def claimed_pod(name: str, profile: str) -> list[dict]:
    return claim_and_pod(
        name, profile, namespace=NS, node_selector={"migplan.io/pool": NS}, tolerations=(POOL,)
    )


def phase(cp, name: str) -> str | None:
    return pod_phase(cp, name, namespace=NS)


def published(cp) -> dict[str, str]:
    """Device name -> MIG device UUID, as the node's ResourceSlice publishes them."""
    slices = json.loads(cp.kubectl("get", "resourceslices", "-o", "json").stdout)["items"]
    return {
        d["name"]: d["attributes"]["uuid"]["string"]
        for s in slices
        if s["spec"].get("nodeName") == f"{NS}-a"
        for d in s["spec"].get("devices", [])
    }


def test_static_mode_lays_out_and_the_dra_plugin_republishes(crds, operator_kubeconfig) -> None:
    cp = crds
    apply(cp, MIG_CLASS)
    fleet = build_pool(cp, NS, {f"{NS}-a": "1g.10gb@0+3g.40gb@4"}, dra=True)
    try:
        apply(cp, *claimed_pod("busy", "3g.40gb"))
        wait_for(lambda: phase(cp, "busy") == "Running", "the 3g claim's pod to run")
        before = published(cp)
        assert set(before) == {"gpu-0-mig-19-0-1", "gpu-0-mig-9-4-4"}
        apply(cp, *claimed_pod("waiting", "2g.20gb"))
        wait_for(
            lambda: unschedulable(cp, "waiting", namespace=NS), "the 2g claim to find no device"
        )
        pending_since = time.monotonic()
        with running_operator(cp, kubeconfig=operator_kubeconfig):
            apply(
                cp,
                {
                    "apiVersion": "migplan.io/v1alpha1",
                    "kind": "GPUPartitionPlan",
                    "metadata": {"name": NS},
                    "spec": {
                        "nodeSelector": {"matchLabels": {"migplan.io/pool": NS}},
                        "demand": {
                            "fromPendingPods": {
                                "namespaceSelector": {
                                    "matchLabels": {"kubernetes.io/metadata.name": NS}
                                }
                            }
                        },
                        "window": ALWAYS_OPEN,
                        "dra": {"mode": "static"},
                    },
                },
            )
            wait_for(lambda: phase(cp, "waiting") == "Running", "the 2g claim's pod", timeout=90)
            waited = time.monotonic() - pending_since
            status = wait_for(
                lambda: (s := plan_status(cp, NS)).get("phase") == "Ready" and s, "Ready"
            )
        record = status["rollout"]["nodes"][f"{NS}-a"]
        assert record["step"] == "Done", record
        after = published(cp)
        # The held 3g instance is the same MIG device; the 2g is new.
        assert after["gpu-0-mig-9-4-4"] == before["gpu-0-mig-9-4-4"]
        assert any(name.startswith("gpu-0-mig-14-") for name in after)
        assert phase(cp, "busy") == "Running"
        assert fleet.dra.publications.count(f"{NS}-a") >= 2  # published again after the change
        print(f"static: pending -> Running {waited:.1f} s (operator start and planning included)")
    finally:
        fleet.stop()
