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
        self._existing: set[str] | None = None
        """The NodePartitions that existed at the first read (a create of one would only
        find it: AlreadyExists)."""
        self._lock = threading.Lock()

    def ensure(self, *, node: str, uid: str) -> None:
        """Create node `node`'s (uid `uid`) NodePartition if it has none."""
        with self._lock:
            if node in self._seen:
                return
            if self._existing is None:
                self._existing = {
                    str(p["metadata"]["name"]) for p in self._api.plans.list_node_partitions()
                }
            exists = node in self._existing
        if not exists:
            empty = NodePartition.for_node(NodePartitionSpec(node_name=node), node_uid=uid)
            if self._api.plans.create_node_partition(body=empty.body()):
                log.info("node partition created", node=node)
        with self._lock:
            self._seen.add(node)

    def forget(self, node: str) -> None:
        """The node is gone (its NodePartition goes with it)."""
        with self._lock:
            self._seen.discard(node)
            if self._existing is not None:
                self._existing.discard(node)
