"""The API areas the operator plans through, with the whole-cluster lists of a planning pass
answered from informer caches (`informers.ClusterCache`): the MIG-capable nodes, pending
pods, namespaces, the GPU Operator's component pods, NodePartitions, DRA's objects, Kueue's
and the PodGroups, each without its managedFields, kubectl's last-applied annotation and a
Node's image list (`informers.slim`: no reader needs them). Every other call, and a list the
caches cannot answer (other selectors, a first list refused), goes to the API server as
before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from migplan.operator.kube.bodies import NodePartitionBody
from migplan.operator.kube.core import PENDING, Core, labels_by_name
from migplan.operator.kube.dra import DRA_GROUP, DRA_VERSION, Dra
from migplan.operator.kube.gangs import GangApi, Gangs
from migplan.operator.kube.informers import ClusterCache
from migplan.operator.kube.kueue import KUEUE_GROUP, KUEUE_VERSION, Kueue
from migplan.operator.kube.plans import Plans
from migplan.planner.api.group import GROUP, NODE_PARTITIONS, VERSION


@dataclass(frozen=True)
class CachedCore(Core):
    """Core calls; nodes by label, pending pods, namespaces and the pod sets named in
    `pod_sets` from the caches."""

    cache: ClusterCache
    pod_sets: frozenset[tuple[str, str]] = frozenset()
    """(namespace, label selector) of pods a pass lists whole: the GPU Operator's
    components, a pod per GPU node each. Other pod lists stay direct (the scale-out's
    placeholders are listed right after they are made)."""

    def list_pods(
        self, *, namespace: str, label_selector: str, node: str | None = None
    ) -> list[Any]:
        """Pods in `namespace` matching `label_selector` (on `node`, if given)."""
        found = None
        if node is None and (namespace, label_selector) in self.pod_sets:
            found = self.cache.pods(namespace=namespace, label_selector=label_selector)
        if found is None:
            return super().list_pods(namespace=namespace, label_selector=label_selector, node=node)
        return found

    def list_nodes(self, *, label_selector: str) -> list[Any]:
        """Nodes matching `label_selector`."""
        found = self.cache.nodes(label_selector=label_selector)
        return found if found is not None else super().list_nodes(label_selector=label_selector)

    def pending_pods(self) -> list[Any]:
        """Pods in phase Pending, all namespaces."""
        found = self.cache.pods(field_selector=PENDING)
        return found if found is not None else super().pending_pods()

    def namespace_labels(self) -> dict[str, dict[str, str]]:
        """Namespace name -> its labels."""
        found = self.cache.namespaces()
        return labels_by_name(found) if found is not None else super().namespace_labels()


@dataclass(frozen=True)
class CachedPlans(Plans):
    """Plan and NodePartition calls; the list of NodePartitions from a cache (plans are
    few, and the controller re-reads a plan right after writing it: they stay direct)."""

    cache: ClusterCache

    def list_node_partitions(self, *, label_selector: str | None = None) -> list[NodePartitionBody]:
        """Every NodePartition; those a selector selects straight from the API server (a
        rollout's own records are read there, never from a cache that may lag its writes)."""
        if label_selector:
            return super().list_node_partitions(label_selector=label_selector)
        found = self.cache.custom(group=GROUP, version=VERSION, plural=NODE_PARTITIONS)
        if found is None:
            return super().list_node_partitions()
        return cast(list[NodePartitionBody], found)


@dataclass(frozen=True)
class CachedDra(Dra):
    """DRA calls; whole-cluster lists from the caches (a node's slices stay direct)."""

    cache: ClusterCache

    def list_objects(
        self, *, plural: str, field_selector: str | None = None
    ) -> list[dict[str, Any]]:
        """Every object of a resource.k8s.io/v1 kind, as plain dictionaries."""
        found = None
        if field_selector is None:
            found = self.cache.custom(group=DRA_GROUP, version=DRA_VERSION, plural=plural)
        if found is None:
            return super().list_objects(plural=plural, field_selector=field_selector)
        return found


@dataclass(frozen=True)
class CachedKueue(Kueue):
    """Kueue calls; its objects' lists from the caches."""

    cache: ClusterCache

    def list_objects(self, *, plural: str) -> list[dict[str, Any]]:
        """Every Kueue object of a kind, all namespaces, as plain dictionaries."""
        found = self.cache.custom(group=KUEUE_GROUP, version=KUEUE_VERSION, plural=plural)
        return found if found is not None else super().list_objects(plural=plural)


@dataclass(frozen=True)
class CachedGangs(Gangs):
    """PodGroup calls; their lists from the caches."""

    cache: ClusterCache

    def list_pod_groups(self, *, kind: GangApi) -> list[dict[str, Any]]:
        """Every PodGroup of `kind`, all namespaces, as plain dictionaries."""
        group, version = kind.group_version
        found = self.cache.custom(group=group, version=version, plural="podgroups")
        return found if found is not None else super().list_pod_groups(kind=kind)
