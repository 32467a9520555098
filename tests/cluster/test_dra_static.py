"""DRA static mode end to end: the agent lays out the GPU, NVIDIA's DRA kubelet plugin
(simulated) republishes its MIG devices, and the real scheduler allocates a pending claim;
the instance a running claim holds is kept."""

from __future__ import annotations

import json
import time

import pytest
from operator_proc import running_operator
from pools import ALWAYS_OPEN, apply, build_pool, plan_status
from test_dra import MIG_CLASS
from waiting import wait_for

pytestmark = pytest.mark.cluster

NS = "drs"
TOLERATIONS = [
    {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "migplan.io/pool", "operator": "Equal", "value": NS, "effect": "NoSchedule"},
]


def claimed_pod(name: str, profile: str) -> list[dict]:
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "mig.nvidia.com",
                            "selectors": [
                                {
                                    "cel": {
                                        "expression": "device.attributes['gpu.nvidia.com']"
                                        f".profile == '{profile}'"
                                    }
                                }
                            ],
                        },
                    }
                ]
            }
        },
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "nodeSelector": {"migplan.io/pool": NS},
            "tolerations": TOLERATIONS,
            "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/cuda:latest",
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
        },
    }
    return [claim, pod]


def phase(cp, name: str) -> str | None:
    found = cp.kubectl("get", "pod", "-n", NS, name, "-o", "json", check=False)
    return json.loads(found.stdout)["status"].get("phase") if found.returncode == 0 else None


def unschedulable(cp, name: str) -> bool:
    found = json.loads(cp.kubectl("get", "pod", "-n", NS, name, "-o", "json").stdout)
    return any(
        c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in found["status"].get("conditions", [])
    )


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
        wait_for(lambda: unschedulable(cp, "waiting"), "the 2g claim to find no device")
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
