"""The live inventory, read from the in-memory API server."""

from __future__ import annotations

from migplan.operator.cluster_inventory import read_inventory
from migplan.operator.sim.api_server import InMemoryCluster


def test_a_pending_pods_quantity_is_read_as_kubernetes_writes_it() -> None:
    cluster = InMemoryCluster()
    cluster.add_pod("ml", "pair", requests={"nvidia.com/mig-1g.10gb": "2e0"})
    pending = read_inventory(cluster).inventory.pending_pods
    assert [(p.name, p.requests) for p in pending] == [("pair", {"nvidia.com/mig-1g.10gb": 2})]


H100 = "NVIDIA-H100-80GB-HBM3"


def _gpu_node(cluster: InMemoryCluster, name: str, *, layout: str) -> None:
    cluster.add_node(
        name,
        labels={
            "nvidia.com/mig.capable": "true",
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        },
    )
    cluster.add_node_partition(name)
    _report(cluster, name, layout=layout)


def _report(cluster: InMemoryCluster, name: str, *, layout: str, index: int = 0) -> None:
    cluster.plans.patch_node_partition_status(
        name=name, status={"gpus": [{"index": index, "layout": layout, "inUse": {}}]}
    )


def test_a_report_read_again_unchanged_gives_the_same_nodes_and_a_changed_one_is_read_anew() -> (
    None
):
    cluster = InMemoryCluster()
    _gpu_node(cluster, "a", layout="3g.40gb@0+3g.40gb@4")
    _gpu_node(cluster, "b", layout="7g.80gb@0")
    first = read_inventory(cluster)
    second = read_inventory(cluster)
    assert second.inventory == first.inventory
    # The very report objects: a planning pass then resolves none of them again
    # (`ResolvedNodes`).
    assert all(
        x.gpus[0] is y.gpus[0]
        for x, y in zip(first.inventory.nodes, second.inventory.nodes, strict=True)
    )
    _report(cluster, "a", layout="7g.80gb@0")
    _report(cluster, "b", layout="3g.40gb@0+9g.80gb@4")  # not an H100 layout
    again = read_inventory(cluster)
    assert [(n.name, n.gpus[0].layout) for n in again.inventory.nodes] == [("a", "7g.80gb@0")]
    assert "not valid" in again.left_out["b"]
    _report(cluster, "b", layout="3g.40gb@0", index=0)
    assert {n.name for n in read_inventory(cluster).inventory.nodes} == {"a", "b"}


def test_a_node_relabelled_to_another_product_is_checked_against_it() -> None:
    cluster = InMemoryCluster()
    _gpu_node(cluster, "a", layout="7g.80gb@0")
    assert [n.name for n in read_inventory(cluster).inventory.nodes] == ["a"]
    node = cluster.store.get("nodes", "a")
    node["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-A100-SXM4-40GB"
    cluster.store.objects["nodes", "", "a"] = node
    snapshot = read_inventory(cluster)
    assert snapshot.inventory.nodes == ()
    assert "not valid" in snapshot.left_out["a"]
