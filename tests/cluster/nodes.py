"""Simulated GPU nodes for the test cluster: Node objects that kwok keeps alive.

A node carries the labels NVIDIA's GPU feature discovery would set (mixed MIG strategy) and
`nvidia.com/mig-<profile>` capacity, so the real scheduler places MIG pods on it.
"""

from __future__ import annotations

import json
from collections import Counter

POOL = "migplan.io/pool"
KWOK_TOLERATION = {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}
"""What a pod needs to land on a kwok node (kwok taints its nodes)."""


def gpu_node(
    name: str,
    *,
    product: str,
    gpus: int = 1,
    mig: Counter[str] | dict[str, int] | None = None,
    labels: dict[str, str] | None = None,
    pool: str | None = None,
) -> dict:
    """A Node manifest; `mig` maps profile names to instance counts on the node.

    Its labels start with those a kubelet registers a node with: the OS and architecture
    under both their GA and deprecated beta keys (kubelet sets both for compatibility).
    Without the beta ones, kube-controller-manager's node lifecycle controller adds
    `beta.kubernetes.io/os` to each node, a few at a time for minutes after a large fleet
    joins: node labels are planning input, so that fleet's every re-plan saw new inputs.

    A `pool` labels the node and taints it so that only that pool's pods (`mig_pod(pool=)`)
    land there: tests sharing the control plane cannot take each other's instances.
    """
    taints = [{"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}]
    if pool:
        labels = {**(labels or {}), POOL: pool}
        taints.append({"key": POOL, "value": pool, "effect": "NoSchedule"})
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    for profile, count in (mig or {}).items():
        resources["nvidia.com/mig-" + profile.replace("+", ".")] = str(count)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
                "type": "kwok",
                "nvidia.com/gpu.product": product,
                "nvidia.com/gpu.count": str(gpus),
                "nvidia.com/mig.capable": "true",
                "nvidia.com/mig.strategy": "mixed",
                **(labels or {}),
            },
        },
        "spec": {"taints": taints},
        "status": {"capacity": resources, "allocatable": resources},
    }


def mig_pod(
    name: str,
    *,
    profile: str,
    count: int = 1,
    namespace: str = "default",
    pool: str | None = None,
) -> dict:
    """A Pod asking for `count` MIG instances of `profile` (tolerating kwok's node taint; with
    a `pool`, only on that pool's nodes)."""
    resource = "nvidia.com/mig-" + profile.replace("+", ".")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/cuda:latest",
                    "resources": {"limits": {resource: str(count)}},
                }
            ],
            "tolerations": [dict(KWOK_TOLERATION)],
        },
    }
    if pool:
        pod["spec"]["nodeSelector"] = {POOL: pool}
        pod["spec"]["tolerations"].append(
            {"key": POOL, "operator": "Equal", "value": pool, "effect": "NoSchedule"}
        )
    return pod


def report_partition(
    cp,
    name: str,
    *,
    layout: str = "-",
    in_use: dict[str, str] | None = None,
    model: str = "H100-80GB",
) -> None:
    """A one-GPU NodePartition for node `name`, with the status its agent would write."""
    cp.kubectl(
        "apply",
        "-f",
        "-",
        stdin=json.dumps(
            {
                "apiVersion": "migplan.io/v1alpha1",
                "kind": "NodePartition",
                "metadata": {"name": name},
                "spec": {"nodeName": name, "gpus": [{"index": 0, "layout": layout}]},
            }
        ),
    )
    status = {
        "phase": "Applied",
        "gpuCount": 1,
        "gpus": [
            {
                "index": 0,
                "model": model,
                "migEnabled": True,
                "layout": layout,
                "inUse": in_use or {},
            }
        ],
    }
    cp.kubectl(
        "patch",
        "np",
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
    )


def mig_deployment(
    name: str, *, profile: str, namespace: str = "default", pool: str | None = None
) -> dict:
    """A one-replica Deployment of `mig_pod`s (so an evicted pod comes back elsewhere)."""
    template = mig_pod(name, profile=profile, namespace=namespace, pool=pool)
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": template["spec"]},
        },
    }


def reported(cp) -> set[str]:
    """Nodes whose agent has reported its GPUs in the NodePartition status."""
    found = json.loads(cp.kubectl("get", "np", "-o", "json").stdout)["items"]
    return {p["metadata"]["name"] for p in found if (p.get("status") or {}).get("gpus")}


def partition(node: str, layout: str, evicted=()) -> dict:
    """A one-GPU NodePartition manifest for `node`."""
    return {
        "apiVersion": "migplan.io/v1alpha1",
        "kind": "NodePartition",
        "metadata": {"name": node},
        "spec": {
            "nodeName": node,
            "gpus": [{"index": 0, "layout": layout}],
            "evictedPods": list(evicted),
        },
    }


GPU_OPERATOR_NAMESPACE = {
    "apiVersion": "v1",
    "kind": "Namespace",
    "metadata": {"name": "gpu-operator"},
}


def component_pod(node: str, app: str, *, namespace: str = "gpu-operator") -> dict:
    """A GPU Operator component's pod (label `app`) bound to `node`, as its DaemonSet makes
    it; kwok runs it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{app}-{node}", "namespace": namespace, "labels": {"app": app}},
        "spec": {
            "nodeName": node,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "main", "image": "registry.invalid/nvidia:latest"}],
        },
    }
