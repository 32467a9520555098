"""The facts preflight checks, read from the live cluster (an inventory file's are in
`screen.inventory_facts`, which needs no Kubernetes client)."""

from __future__ import annotations

from collections.abc import Iterable

from migplan.operator.cluster_inventory import MIG_CAPABLE
from migplan.operator.gpu_operator import GpuOperatorSettings
from migplan.operator.kube.seam import Kube
from migplan.operator.preflight.checks import ClusterFacts, NodeFacts


def live_facts(
    api: Kube, *, settings: GpuOperatorSettings, nodes: Iterable[str] | None = None
) -> ClusterFacts:
    """Facts of the MIG-capable nodes (only `nodes`, if given): labels, which GPU Operator
    components have a pod there, the agent's report; and the ClusterPolicy."""
    wanted = set(nodes) if nodes is not None else None
    partitions = {
        str(p["metadata"]["name"]): p.get("status") or {} for p in api.plans.list_node_partitions()
    }
    placed: dict[str, set[str]] = {}
    for component, selector in settings.components().items():
        for pod in api.core.list_pods(namespace=settings.namespace, label_selector=selector):
            if pod.spec.node_name:
                placed.setdefault(str(pod.spec.node_name), set()).add(component)
    policies = api.core.list_cluster_policies()
    found = []
    for node in api.core.list_nodes(label_selector=MIG_CAPABLE):
        name = str(node.metadata.name)
        if wanted is not None and name not in wanted:
            continue
        found.append(
            NodeFacts(
                name=name,
                labels=dict(node.metadata.labels or {}),
                annotations=dict(node.metadata.annotations or {}),
                components=frozenset(placed.get(name, ())),
                partition=partitions.get(name),
            )
        )
    return ClusterFacts(
        nodes=tuple(found),
        live=True,
        cluster_policy=(policies[0].get("spec") or {}) if policies else None,
    )
