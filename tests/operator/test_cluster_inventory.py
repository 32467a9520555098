"""The live inventory, read from the in-memory API server."""

from __future__ import annotations

from migplan.operator.cluster_inventory import read_inventory
from migplan.operator.sim.api_server import InMemoryCluster


def test_a_pending_pods_quantity_is_read_as_kubernetes_writes_it() -> None:
    cluster = InMemoryCluster()
    cluster.add_pod("ml", "pair", requests={"nvidia.com/mig-1g.10gb": "2e0"})
    pending = read_inventory(cluster).inventory.pending_pods
    assert [(p.name, p.requests) for p in pending] == [("pair", {"nvidia.com/mig-1g.10gb": 2})]
