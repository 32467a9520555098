"""Karpenter, as scaling out will use it (#34): built from Go modules with its kwok cloud
provider and run against a control plane of its own, it launches a GPU node of a declared
instance type for a pod that reserves whole GPUs (the placeholders' mechanism: a new node
advertises no MIG instances until it is partitioned, so only whole GPUs can ask for it), and
consolidates the node once the pod is gone (scaling in stays Karpenter's)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import ControlPlane, build_binaries
from waiting import wait_for

pytestmark = pytest.mark.cluster
TYPES = Path(__file__).parent / "karpenter" / "instance-types.json"
TAINT = {"key": "migplan.io/scale-out", "value": "true", "effect": "NoSchedule"}


@pytest.fixture(scope="module")
def karpenter_plane() -> Iterator[ControlPlane]:
    with ControlPlane.up(build_binaries()) as cp:
        cp.start_karpenter(instance_types=TYPES)
        yield cp


def _objects(cp: ControlPlane, kind: str) -> list[dict]:
    return json.loads(cp.kubectl("get", kind, "-o", "json").stdout)["items"]


def test_karpenter_launches_a_gpu_node_for_whole_gpus_and_removes_it_empty(
    karpenter_plane: ControlPlane,
) -> None:
    cp = karpenter_plane
    pool = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "h100-8x"},
        "spec": {
            "template": {
                "metadata": {"labels": {"migplan.io/pool": "scale-out"}},
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.kwok.sh",
                        "kind": "KWOKNodeClass",
                        "name": "default",
                    },
                    "requirements": [
                        {
                            "key": "node.kubernetes.io/instance-type",
                            "operator": "In",
                            "values": ["gpu-h100-8x"],
                        }
                    ],
                    "taints": [TAINT],
                },
            },
            "limits": {"nvidia.com/gpu": "16"},
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s"},
        },
    }
    node_class = {
        "apiVersion": "karpenter.kwok.sh/v1alpha1",
        "kind": "KWOKNodeClass",
        "metadata": {"name": "default"},
    }
    placeholder = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "reserve-8", "namespace": "default"},
        "spec": {
            "containers": [
                {
                    "name": "hold",
                    "image": "registry.invalid/pause",
                    "resources": {"limits": {"nvidia.com/gpu": "8"}},
                }
            ],
            "tolerations": [{**TAINT, "operator": "Equal"}],
            "nodeSelector": {"migplan.io/pool": "scale-out"},
        },
    }
    for obj in (node_class, pool, placeholder):
        cp.kubectl("apply", "-f", "-", stdin=json.dumps(obj))
    bound = wait_for(
        lambda: _objects(cp, "pods")[0]["spec"].get("nodeName"),
        "Karpenter to launch a node the placeholder binds to",
        timeout=90,
    )
    node = json.loads(cp.kubectl("get", "node", bound, "-o", "json").stdout)
    assert node["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "gpu-h100-8x"
    assert node["metadata"]["labels"]["migplan.io/pool"] == "scale-out"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    [claim] = _objects(cp, "nodeclaims")
    assert claim["status"]["nodeName"] == bound
    cp.kubectl("delete", "pod", "reserve-8", "-n", "default", "--wait=true")
    wait_for(
        lambda: not _objects(cp, "nodes") and not _objects(cp, "nodeclaims"),
        "Karpenter to remove the empty node",
        timeout=120,
    )
