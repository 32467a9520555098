"""Every MIG-capable node gets a NodePartition, so its agent has somewhere to report.

The operator creates it with no targets (the agent then only reports what NVML shows) and
owned by the Node, so it goes when the node goes. Planning leaves a node out until its agent
has reported, so a new node is never planned blind.
"""

from __future__ import annotations

import threading

import structlog

from migplan.operator.kube.seam import Kube
from migplan.planner.api.nodepartition import NodePartition, NodePartitionSpec

log = structlog.get_logger("migplan.operator")


class PartitionBootstrap:
    """Creates missing NodePartitions, asking the API at most once per node per process:
    the NodePartitions that exist are read once (from the informer cache, in the operator),
    so a restarted operator on 5,000 nodes does not try 5,000 creates that all find one."""

    def __init__(self, api: Kube) -> None:
        self._api = api
        self._seen: set[str] = set()
        self._owners: dict[str, str] | None = None
        """NodePartition name -> the uid of the Node that owns it, as first read."""
        self._lock = threading.Lock()

    def ensure(self, *, node: str, uid: str) -> None:
        """Create node `node`'s (uid `uid`) NodePartition if it has none."""
        with self._lock:
            if node in self._seen:
                return
            if self._owners is None:
                self._owners = _owners(self._api)
            known = self._owners.get(node) == uid
        if not known:
            empty = NodePartition.for_node(NodePartitionSpec(node_name=node), node_uid=uid)
            if self._api.plans.create_node_partition(body=empty.body()):
                log.info("node partition created", node=node)
        with self._lock:
            self._seen.add(node)

    def forget(self, node: str) -> None:
        """The node is gone (its NodePartition goes with it)."""
        with self._lock:
            self._seen.discard(node)


def _owners(api: Kube) -> dict[str, str]:
    """NodePartition name -> the uid of its owning Node (those a Node owns)."""
    found = {}
    for partition in api.plans.list_node_partitions():
        meta = partition["metadata"]
        for owner in meta.get("ownerReferences") or []:
            if owner.get("kind") == "Node" and owner.get("uid"):
                found[str(meta["name"])] = str(owner["uid"])
    return found
