"""Karpenter, as scaling out uses it (#34): built from Go modules with its kwok cloud provider
and run against a control plane of its own, it launches a GPU node of a declared instance
type for a pod that reserves whole GPUs (the placeholders' mechanism: a new node advertises
no MIG instances until it is partitioned, so only whole GPUs can ask for it), and
consolidates the node once the pod is gone (scaling in stays Karpenter's). End to end: MIG
pods no node can serve make migplan ask for a node, Karpenter launches it, migplan lays it
out when it joins, the pods run; gone, the node is consolidated."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from harness import ControlPlane, build_binaries
from nodes import POOL, mig_pod
from operator_proc import MIGPLAN, ROOT, install_crds, operator_service_account, running_operator
from pools import ALWAYS_OPEN, apply, build_pool, make_plan, plan_status, running
from waiting import wait_for

from migplan.operator.kube.connect import connect
from migplan.operator.sim.fleet import SimulatedFleet, emulated_node
from migplan.planner.hardware.catalog import default_catalog

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
    pool = node_pool("h100-8x", labels={"migplan.io/pool": "scale-out"}, taint=TAINT)
    pool["spec"]["disruption"]["consolidateAfter"] = "0s"
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


H100 = "NVIDIA-H100-80GB-HBM3"


@contextmanager
def adopting(fleet: SimulatedFleet, cp: ControlPlane, selector: str) -> Iterator[None]:
    """While open, every node matching `selector` that joins gets eight empty H100s (MIG on)
    with an agent and the device plugin in `fleet`: what the GPU node image would run."""
    api = connect(kubeconfig=str(cp.kubeconfig))
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.5):
            for node in api.core.list_nodes(label_selector=selector):
                name = node.metadata.name
                if name not in fleet.nodes:
                    fake = emulated_node(["H100-80GB"] * 8, ["-"] * 8, catalog=default_catalog())
                    fleet.adopt(name, fake)

    thread = threading.Thread(target=watch, name="adopt-joining-nodes", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)


def node_pool(name: str, *, labels: dict[str, str], taint: dict[str, str]) -> dict:
    """A Karpenter NodePool of `gpu-h100-8x` kwok nodes (8 whole H100s each, two at most)
    with `labels` and `taint`, consolidated when empty."""
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": labels},
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
                    "taints": [taint],
                },
            },
            "limits": {"nvidia.com/gpu": "16"},
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "5s"},
        },
    }


def test_mig_pods_no_node_serves_get_a_node_from_karpenter_laid_out_on_arrival(
    karpenter_plane: ControlPlane,
) -> None:
    """One 1-GPU H100 node and four pods of one 3g.40gb: two fit there. migplan lays it out
    and asks for one 8-GPU node for the other two (a placeholder reserving its 8 whole
    GPUs); Karpenter launches it, migplan lays it out when its agent reports, the pods run
    there; once they are gone the node is released to Karpenter, which consolidates it."""
    cp = install_crds(karpenter_plane)
    kubeconfig = operator_service_account(cp)
    cp.kubectl("apply", "-f", str(ROOT / "deploy" / "base" / "priority-class.yaml"))
    pool = "scale"
    fleet = build_pool(cp, pool, {f"{pool}-a": "-"})
    names = [f"job-{i}" for i in range(4)]
    offer = {
        "name": "h100-8x",
        "gpuModel": "H100-80GB",
        "gpusPerNode": 8,
        "maxNodes": 2,
        "nodeSelector": {"karpenter.sh/nodepool": f"{pool}-h100", POOL: pool},
        "tolerations": [{"key": POOL, "operator": "Equal", "value": pool, "effect": "NoSchedule"}],
    }
    node_class = {
        "apiVersion": "karpenter.kwok.sh/v1alpha1",
        "kind": "KWOKNodeClass",
        "metadata": {"name": "default"},
    }
    for example in (
        "nodepool.yaml",
        "plan.yaml",
    ):  # README's, as Karpenter's and our CRDs take them
        path = ROOT / "examples" / "scale-out" / example
        cp.kubectl("apply", "--dry-run=server", "-f", str(path))
    try:
        labels = {
            POOL: pool,
            "nvidia.com/gpu.product": H100,
            "nvidia.com/gpu.count": "8",
            "nvidia.com/mig.capable": "true",
            "nvidia.com/mig.strategy": "mixed",
        }
        taint = {"key": POOL, "value": pool, "effect": "NoSchedule"}
        apply(cp, node_class, node_pool(f"{pool}-h100", labels=labels, taint=taint))
        apply(cp, *(mig_pod(n, profile="3g.40gb", namespace=pool, pool=pool) for n in names))
        joined = f"karpenter.sh/nodepool={pool}-h100"
        with adopting(fleet, cp, joined), running_operator(cp, kubeconfig=kubeconfig):
            plan = make_plan(pool, pool, window=ALWAYS_OPEN, scaleOut={"offers": [offer]})
            plan["spec"]["policy"]["disruption"] = "none"
            apply(cp, plan)
            wait_for(lambda: running(cp, pool, *names), "every pod to run", timeout=240)
            (new,) = _objects_matching(cp, "nodes", joined)
            wait_for(
                lambda: (
                    not _annotations(cp, new["metadata"]["name"]).get("karpenter.sh/do-not-disrupt")
                ),
                "the laid-out node to be released to Karpenter",
                timeout=60,
            )
            status = plan_status(cp, pool)
            reasons = _event_reasons(cp, pool)
            shown = subprocess.run(
                [MIGPLAN, "status", pool, "--kubeconfig", str(cp.kubeconfig)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            columns = cp.kubectl("get", "gpp", pool, "-o", "wide").stdout
        assert status["scaleOut"]["requests"] == []
        assert "Scale-out: no new node needed" in shown
        assert "SCALE-OUT" in columns.splitlines()[0]
        assert {"ScaleOutRequested", "ScaleOutArrived", "ScaleOutLaidOut"} <= reasons
        assert not _objects_matching(cp, "pods", "migplan.io/plan=scale", "migplan-system")
        on_new = [
            n
            for n in names
            if json.loads(cp.kubectl("get", "pod", "-n", pool, n, "-o", "json").stdout)["spec"][
                "nodeName"
            ]
            == new["metadata"]["name"]
        ]
        assert len(on_new) == 2
        cp.kubectl("delete", "pod", "-n", pool, *names, "--wait=true")
        wait_for(
            lambda: not _objects_matching(cp, "nodes", joined),
            "Karpenter to consolidate the empty node",
            timeout=120,
        )
    finally:
        fleet.stop()


def _objects_matching(cp: ControlPlane, kind: str, selector: str, namespace: str = "") -> list:
    where = ("-n", namespace) if namespace else ()
    result = cp.kubectl("get", kind, *where, "-l", selector, "-o", "json")
    return json.loads(result.stdout)["items"]


def _annotations(cp: ControlPlane, node: str) -> dict:
    found = json.loads(cp.kubectl("get", "node", node, "-o", "json").stdout)
    return found["metadata"].get("annotations") or {}


def _event_reasons(cp: ControlPlane, plan: str) -> set[str]:
    events = json.loads(cp.kubectl("get", "events", "-A", "-o", "json").stdout)["items"]
    return {e["reason"] for e in events if e["involvedObject"].get("name") == plan}
