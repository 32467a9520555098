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
    """Creates missing NodePartitions, asking the API once per node per process."""

    def __init__(self, api: Kube) -> None:
        self._api = api
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def ensure(self, *, node: str, uid: str) -> None:
        """Create node `node`'s (uid `uid`) NodePartition if it has none."""
        with self._lock:
            if node in self._seen:
                return
        empty = NodePartition.for_node(NodePartitionSpec(node_name=node), node_uid=uid)
        if self._api.plans.create_node_partition(body=empty.body()):
            log.info("node partition created", node=node)
        with self._lock:
            self._seen.add(node)

    def forget(self, node: str) -> None:
        """The node is gone (its NodePartition goes with it)."""
        with self._lock:
            self._seen.discard(node)
