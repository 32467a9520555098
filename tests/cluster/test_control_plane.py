"""The test control plane itself: healthy, controllers working, MIG pods scheduled for real."""

from __future__ import annotations

import json

import pytest
from nodes import gpu_node, mig_pod
from waiting import wait_for

pytestmark = pytest.mark.cluster


def apply(cp, manifest: dict) -> None:
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(manifest))


def get(cp, *args: str) -> dict:
    return json.loads(cp.kubectl("get", *args, "-o", "json").stdout)


def test_api_server_runs_the_pinned_version_with_rbac(control_plane) -> None:
    version = json.loads(control_plane.kubectl("get", "--raw", "/version").stdout)
    assert version["gitVersion"] == "v1.36.3"
    assert "rbac.authorization.k8s.io/v1" in control_plane.kubectl("api-versions").stdout
    assert control_plane.startup_seconds < 60


def test_mig_pod_lands_only_on_a_node_that_offers_the_profile(control_plane) -> None:
    cp = control_plane
    apply(cp, gpu_node("gpu-a", product="NVIDIA-A100-SXM4-40GB", mig={"3g.20gb": 2}))
    # Profiles no other test's nodes offer: the cluster is shared by the whole session.
    apply(cp, gpu_node("gpu-h", product="NVIDIA-H100-80GB-HBM3", mig={"1g.20gb": 4}))
    wait_for(
        lambda: all(
            any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in get(cp, "node", n)["status"].get("conditions", [])
            )
            for n in ("gpu-a", "gpu-h")
        ),
        "kwok to make the nodes Ready",
    )
    apply(cp, mig_pod("wants-1g", profile="1g.20gb"))
    pod = wait_for(
        lambda: (p := get(cp, "pod", "wants-1g"))["status"].get("phase") == "Running" and p,
        "the pod to run",
    )
    assert pod["spec"]["nodeName"] == "gpu-h"
    apply(cp, mig_pod("wants-2g", profile="2g.24gb"))
    stuck = wait_for(
        lambda: (p := get(cp, "pod", "wants-2g"))["status"].get("conditions") and p,
        "the scheduler to decide about wants-2g",
    )
    assert stuck["status"]["phase"] == "Pending"
    [condition] = [c for c in stuck["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert condition["reason"] == "Unschedulable"
    assert "Insufficient nvidia.com/mig-2g.24gb" in condition["message"]


def test_controller_manager_keeps_pdb_status_and_deletes_namespaces(control_plane) -> None:
    cp = control_plane
    cp.kubectl("create", "namespace", "pdb-check")
    apply(
        cp,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "keep", "namespace": "pdb-check"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "x"}}},
        },
    )
    wait_for(
        lambda: (
            "expectedPods" in get(cp, "pdb", "keep", "-n", "pdb-check").get("status", {})
            and get(cp, "pdb", "keep", "-n", "pdb-check")["status"].get("observedGeneration") == 1
        ),
        "the disruption controller to write PDB status",
    )
    cp.kubectl("delete", "namespace", "pdb-check", "--wait=false")
    wait_for(
        lambda: cp.kubectl("get", "namespace", "pdb-check", check=False).returncode != 0,
        "the namespace controller to finish deleting",
    )


def test_garbage_collector_removes_dependents(control_plane) -> None:
    cp = control_plane
    owner = json.loads(cp.kubectl("create", "configmap", "gc-owner", "-o", "json").stdout)
    apply(
        cp,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "gc-dependent",
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "name": "gc-owner",
                        "uid": owner["metadata"]["uid"],
                    }
                ],
            },
        },
    )
    cp.kubectl("delete", "configmap", "gc-owner")
    wait_for(
        lambda: cp.kubectl("get", "configmap", "gc-dependent", check=False).returncode != 0,
        "the garbage collector to delete the dependent",
    )


def test_lease_heartbeats_renew_a_lease_and_leave_the_node_status_alone(control_plane) -> None:
    # The 5,000-node bench's nodes beat as kubelets do (`heartbeat="lease"`): a Lease renewed
    # every 10 s, the status posted every 5 minutes. With kwok's default stage the node's
    # status is posted every 20-25 s, so three renewals without a status post tell them apart.
    from harness import ControlPlane

    with ControlPlane.up(control_plane.bin_dir, heartbeat="lease") as cp:
        apply(cp, gpu_node("beating", product="NVIDIA-H100-80GB-HBM3"))

        def heartbeat() -> str | None:
            """When the node's status was last posted (its Ready condition's heartbeat; the
            resourceVersion moves with the controller-manager's labels too)."""
            conditions = get(cp, "node", "beating").get("status", {}).get("conditions", [])
            ready = [c for c in conditions if c["type"] == "Ready" and c["status"] == "True"]
            return ready[0].get("lastHeartbeatTime") if ready else None

        posted = wait_for(heartbeat, "the kwok node to be Ready")
        renewals: set[str] = set()

        def renewed_thrice() -> bool:
            lease = cp.kubectl(
                "get", "lease", "beating", "-n", "kube-node-lease", "-o", "json", check=False
            )
            if lease.returncode == 0:
                renewals.add(json.loads(lease.stdout)["spec"]["renewTime"])
            return len(renewals) >= 4

        wait_for(renewed_thrice, "the node's Lease to be renewed three times", timeout=90)
        assert heartbeat() == posted


def test_a_test_node_has_every_label_the_controller_manager_would_add(control_plane) -> None:
    # Node labels are planning input: a label the node lifecycle controller adds after a
    # node joins makes a re-plan's inputs new (the 5,000-node bench's cron passes did so for
    # minutes, each recording its rollout anew). It adds the deprecated beta OS label where a
    # node lacks it, as on the two bare nodes; a node as the tests make it, joining between
    # them, carries the labels a kubelet registers with and stays as made.
    cp = control_plane
    names = ("labels-bare-1", "labels-made", "labels-bare-2")
    nodes = [gpu_node(name, product="NVIDIA-H100-80GB-HBM3") for name in names]
    for node in (nodes[0], nodes[2]):
        del node["metadata"]["labels"]["beta.kubernetes.io/os"]

    def labels(name: str) -> dict[str, str]:
        return get(cp, "node", name)["metadata"]["labels"]

    try:
        for node in nodes:
            apply(cp, node)
        for bare in (names[0], names[2]):
            wait_for(
                lambda bare=bare: labels(bare).get("beta.kubernetes.io/os") == "linux",
                f"the controller-manager to add the beta OS label to {bare}",
            )
        assert labels("labels-made") == nodes[1]["metadata"]["labels"]
    finally:
        cp.kubectl("delete", "node", *names, "--ignore-not-found")
