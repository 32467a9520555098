"""Every MIG-capable node gets a NodePartition; a restarted operator asks for none that exist."""

from __future__ import annotations

from migplan.operator.controller.partitions import PartitionBootstrap
from migplan.operator.sim.api_server import InMemoryCluster
from migplan.planner.api.group import NODE_PARTITIONS


class CountingCluster(InMemoryCluster):
    """The in-memory API server, counting NodePartition creates."""

    def __init__(self) -> None:
        super().__init__()
        self.creates = 0
        create = self.plans.create_node_partition

        def counted(*, body: dict) -> bool:
            self.creates += 1
            return create(body=body)

        self.plans.create_node_partition = counted  # type: ignore[method-assign]


def _owned(cluster: InMemoryCluster, name: str) -> list[tuple[str, str]]:
    body = cluster.plans.get_node_partition(name=name)
    assert body is not None
    return [(o["kind"], o["uid"]) for o in body["metadata"]["ownerReferences"]]


def test_a_node_without_one_gets_one_owned_by_it_once() -> None:
    cluster = CountingCluster()
    boot = PartitionBootstrap(cluster)
    boot.ensure(node="gpu-1", uid="uid-1")
    boot.ensure(node="gpu-1", uid="uid-1")  # its next event
    assert _owned(cluster, "gpu-1") == [("Node", "uid-1")]
    assert cluster.creates == 1


def test_a_restarted_operator_creates_none_that_exist() -> None:
    cluster = CountingCluster()
    first = PartitionBootstrap(cluster)
    for i in range(3):
        first.ensure(node=f"gpu-{i}", uid=f"uid-{i}")
    assert cluster.creates == 3
    again = PartitionBootstrap(cluster)  # the operator restarted
    for i in range(3):
        again.ensure(node=f"gpu-{i}", uid=f"uid-{i}")
    again.ensure(node="gpu-new", uid="uid-new")
    assert cluster.creates == 4, "a NodePartition that existed was asked for again"
    assert len(cluster.plans.list_node_partitions()) == 4


def test_a_node_made_again_gets_one_once_the_old_one_is_collected() -> None:
    cluster = CountingCluster()
    boot = PartitionBootstrap(cluster)
    boot.ensure(node="gpu-1", uid="old")
    boot.forget("gpu-1")  # the node was deleted; its NodePartition is collected with it
    cluster.store.delete(NODE_PARTITIONS, "gpu-1")
    boot.ensure(node="gpu-1", uid="new")  # and made again
    assert _owned(cluster, "gpu-1") == [("Node", "new")]
    assert cluster.creates == 2
