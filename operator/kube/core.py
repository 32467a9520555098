"""Core API calls: nodes, pods, evictions, ConfigMaps, events, and the few other
objects migplan reads or makes (the GPU Operator's ClusterPolicy, kopf's peering object)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from migplan.operator.kube.retry import retrying

PENDING = "status.phase=Pending"
"""The field selector of pods waiting to be scheduled (or to start)."""


def labels_by_name(objects: list[Any]) -> dict[str, dict[str, str]]:
    """Name -> labels of the (generated-model) objects."""
    return {
        o.metadata.name: dict(o.metadata.labels or {})
        for o in objects
        if o.metadata is not None and o.metadata.name
    }


class PodReplacedError(Exception):
    """The pod an eviction named by UID is not that pod any more (deleted and made again)."""


@dataclass(frozen=True)
class Core:
    """Calls to the core API group (and the other objects migplan only reads or makes)."""

    api: client.ApiClient

    def get_node(self, *, name: str) -> Any:
        """The Node `name`."""
        return client.CoreV1Api(self.api).read_node(name)

    def list_nodes(self, *, label_selector: str) -> list[Any]:
        """Nodes matching `label_selector`."""
        return list(client.CoreV1Api(self.api).list_node(label_selector=label_selector).items)

    @retrying
    def patch_node(self, *, name: str, body: dict[str, Any]) -> Any:
        """Merge `body` into the Node (spec.unschedulable, annotations); the node after."""
        return client.CoreV1Api(self.api).patch_node(name, body)

    @retrying
    def patch_node_status(self, *, name: str, status: dict[str, Any]) -> None:
        """Merge `status` into the Node's status (the simulated device plugin's capacity)."""
        client.CoreV1Api(self.api).patch_node_status(name, {"status": status})

    @retrying
    def cordon_node(self, *, name: str, annotation: str, owner: str) -> bool:
        """Cordon the node for `owner` (marked with `annotation` in the same write), unless
        someone else has it cordoned: True when it is `owner`'s cordon now. The write carries the
        resourceVersion read, so a cordon that lands in between makes it fail (409) and the
        whole decision is taken again from a fresh read: another's cordon is never taken over."""
        node = self.get_node(name=name)
        if (node.metadata.annotations or {}).get(annotation) == owner:
            return True
        if node.spec.unschedulable:
            return False
        self._patch_cordon(node, unschedulable=True, annotations={annotation: owner})
        return True

    @retrying
    def uncordon_node(self, *, name: str, annotation: str, owner: str) -> bool:
        """Uncordon the node if `owner` cordoned it (the annotation says so in the version read;
        a write in between makes it read and decide again); True when it did."""
        node = self.get_node(name=name)
        if (node.metadata.annotations or {}).get(annotation) != owner:
            return False
        self._patch_cordon(node, unschedulable=False, annotations={annotation: None})
        return True

    def _patch_cordon(
        self, node: Any, *, unschedulable: bool, annotations: dict[str, str | None]
    ) -> None:
        """Set the cordon and its mark in one write, only on the version of `node` read (409
        when it changed since)."""
        body = {
            "spec": {"unschedulable": unschedulable},
            "metadata": {
                "annotations": annotations,
                "resourceVersion": node.metadata.resource_version,
            },
        }
        client.CoreV1Api(self.api).patch_node(node.metadata.name, body)

    def get_pod(self, *, namespace: str, name: str) -> Any | None:
        """The pod, or None if it is gone."""
        try:
            return client.CoreV1Api(self.api).read_namespaced_pod(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def pods_on_node(self, *, node: str) -> list[Any]:
        """Every pod bound to `node`."""
        return list(
            client.CoreV1Api(self.api)
            .list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}")
            .items
        )

    def list_deployments(self, *, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        """Deployments in `namespace` matching `label_selector`, as plain dictionaries (the
        CLI's `status -n` finds the operator a chart release runs there)."""
        response = client.AppsV1Api(self.api).list_namespaced_deployment(
            namespace, label_selector=label_selector, _preload_content=False
        )
        return list(json.loads(cast(Any, response).data)["items"])

    def list_pods(
        self, *, namespace: str, label_selector: str, node: str | None = None
    ) -> list[Any]:
        """Pods in `namespace` matching `label_selector` (on `node`, if given)."""
        return list(
            client.CoreV1Api(self.api)
            .list_namespaced_pod(
                namespace,
                label_selector=label_selector,
                field_selector=f"spec.nodeName={node}" if node else None,
            )
            .items
        )

    def pending_pods(self) -> list[Any]:
        """Pods in phase Pending, all namespaces."""
        return list(
            client.CoreV1Api(self.api).list_pod_for_all_namespaces(field_selector=PENDING).items
        )

    def delete_pods(self, *, namespace: str, label_selector: str, node: str) -> int:
        """Delete the pods on `node` matching `label_selector` in `namespace`; how many."""
        core = client.CoreV1Api(self.api)
        pods = self.list_pods(namespace=namespace, label_selector=label_selector, node=node)
        for pod in pods:
            assert pod.metadata is not None
            assert pod.metadata.name is not None
            core.delete_namespaced_pod(pod.metadata.name, namespace)
        return len(pods)

    def create_pod(self, *, namespace: str, body: dict[str, Any]) -> Any:
        """Create the pod (`generateName` names it); the pod as created."""
        return client.CoreV1Api(self.api).create_namespaced_pod(namespace, cast(Any, body))

    def delete_pod(self, *, namespace: str, name: str) -> bool:
        """Delete the pod now (no grace period); False when it was gone."""
        try:
            client.CoreV1Api(self.api).delete_namespaced_pod(
                name, namespace, grace_period_seconds=0
            )
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def evict_pod(self, *, namespace: str, name: str, uid: str | None = None) -> str | None:
        """Ask the Eviction API to evict the pod (it honours PodDisruptionBudgets); with `uid`,
        only if the pod of that name is still that pod (a precondition the API server checks).

        Returns None when the eviction was accepted or the pod is already gone, else why it
        was refused (a 429 while a disruption budget forbids it: try again later). Raises
        PodReplacedError when the UID precondition fails.
        """
        options = (
            client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid)) if uid else None
        )
        body = client.V1Eviction(
            metadata=client.V1ObjectMeta(name=name, namespace=namespace), delete_options=options
        )
        try:
            client.CoreV1Api(self.api).create_namespaced_pod_eviction(name, namespace, body)
        except ApiException as exc:
            if exc.status == 404:
                return None
            if exc.status == 409 and uid:
                raise PodReplacedError(f"{namespace}/{name}") from None
            if exc.status == 429:
                try:
                    return str(json.loads(exc.body or "{}")["message"])
                except (ValueError, KeyError, TypeError):
                    return "the eviction was refused (429)"
            raise
        return None

    def namespace_labels(self) -> dict[str, dict[str, str]]:
        """Namespace name -> its labels."""
        return labels_by_name(client.CoreV1Api(self.api).list_namespace().items)

    def get_config_map_data(self, *, namespace: str, name: str) -> dict[str, str]:
        """The ConfigMap's data ({} if there is no such ConfigMap)."""
        try:
            found = client.CoreV1Api(self.api).read_namespaced_config_map(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return {}
            raise
        return dict(found.data or {})

    @retrying
    def edit_config_map(
        self,
        *,
        namespace: str,
        name: str,
        edit: Callable[[dict[str, str]], dict[str, str]],
    ) -> None:
        """Read-modify-write the ConfigMap's data (created if missing); a concurrent change makes
        the write conflict and the whole edit is tried again."""
        core = client.CoreV1Api(self.api)
        try:
            found = core.read_namespaced_config_map(name, namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise
            body = client.V1ConfigMap(
                metadata=client.V1ObjectMeta(name=name, namespace=namespace), data=edit({})
            )
            core.create_namespaced_config_map(namespace, body)
            return
        found.data = edit(dict(found.data or {}))
        core.replace_namespaced_config_map(name, namespace, found)

    def create_event(self, *, obj: Mapping[str, Any], kind: str, reason: str, message: str) -> str:
        """Post an event about `obj` (events of cluster-scoped objects live in `default`);
        its name."""

        meta = obj["metadata"]
        namespace = meta.get("namespace") or "default"
        now = datetime.now(UTC)
        body = client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name=f"{meta['name']}.", namespace=namespace),
            involved_object=client.V1ObjectReference(
                api_version=obj.get("apiVersion"),
                kind=obj.get("kind"),
                name=meta["name"],
                uid=meta.get("uid"),
                namespace=meta.get("namespace"),
            ),
            reason=reason,
            message=message[:1024],
            type=kind,
            source=client.V1EventSource(component="migplan-operator"),
            first_timestamp=now,
            last_timestamp=now,
            count=1,
        )
        made = client.CoreV1Api(self.api).create_namespaced_event(namespace, body)
        return str(made.metadata.name)

    def bump_event(self, *, namespace: str, name: str, count: int) -> bool:
        """Say an event happened again: its count and last timestamp (as kubectl shows
        `x3 over 5m`); False when the event is gone (expired), so a new one is posted."""
        body = {"count": count, "lastTimestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
        try:
            client.CoreV1Api(self.api).patch_namespaced_event(name, namespace, body)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def list_cluster_policies(self) -> list[dict[str, Any]] | None:
        """The GPU Operator's ClusterPolicy objects; None when the API server has no such kind
        or migplan may not read it."""
        try:
            found = client.CustomObjectsApi(self.api).list_cluster_custom_object(
                "nvidia.com", "v1", "clusterpolicies"
            )
        except ApiException as exc:
            if exc.status in (403, 404):
                return None
            raise
        return list(cast(dict[str, Any], found)["items"])

    def ensure_cluster_object(
        self, *, group: str, version: str, plural: str, body: dict[str, Any]
    ) -> None:
        """Create the cluster-scoped custom object unless it exists (kopf's peering object)."""
        try:
            client.CustomObjectsApi(self.api).create_cluster_custom_object(
                group, version, plural, body
            )
        except ApiException as exc:
            if exc.status != 409:
                raise
