"""Kubernetes API calls, each a small function with keyword-only arguments.

Everything else in migplan goes through here, so API access is in one place (and a test
double, if ever needed, replaces one module).
"""

from __future__ import annotations

from typing import Any, cast

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from migplan.planner.errors import MigplanInputError

GROUP, VERSION = "migplan.io", "v1alpha1"
NODE_PARTITIONS = "nodepartitions"


def connect(*, kubeconfig: str | None = None) -> client.ApiClient:
    """An API client from `kubeconfig`, or the in-cluster service account when None."""
    try:
        if kubeconfig:
            api = config.new_client_from_config(config_file=kubeconfig)
            return cast(client.ApiClient, api)
        config.load_incluster_config()
    except (config.ConfigException, OSError) as exc:
        raise MigplanInputError(
            f"no cluster to talk to ({' '.join(str(exc).split())}): set KUBECONFIG or --kubeconfig"
        ) from None
    return client.ApiClient()


def get_node_partition(api: client.ApiClient, *, name: str) -> dict[str, Any] | None:
    """The NodePartition `name`, or None if there is none."""
    try:
        found = client.CustomObjectsApi(api).get_cluster_custom_object(
            GROUP, VERSION, NODE_PARTITIONS, name
        )
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return cast(dict[str, Any], found)


def apply_node_partition(api: client.ApiClient, *, body: dict[str, Any]) -> None:
    """Create the NodePartition, or replace its spec if it exists."""
    objects = client.CustomObjectsApi(api)
    name = body["metadata"]["name"]
    try:
        objects.create_cluster_custom_object(GROUP, VERSION, NODE_PARTITIONS, body)
    except ApiException as exc:
        if exc.status != 409:
            raise
        objects.patch_cluster_custom_object(
            GROUP, VERSION, NODE_PARTITIONS, name, {"spec": body["spec"]}
        )


def patch_node_partition_status(
    api: client.ApiClient, *, name: str, status: dict[str, Any]
) -> None:
    """Replace the fields of `status` in the NodePartition's status subresource."""
    client.CustomObjectsApi(api).patch_cluster_custom_object_status(
        GROUP, VERSION, NODE_PARTITIONS, name, {"status": status}
    )


def get_node(api: client.ApiClient, *, name: str) -> Any:
    """The Node `name`."""
    return client.CoreV1Api(api).read_node(name)


def patch_node_status(api: client.ApiClient, *, name: str, status: dict[str, Any]) -> None:
    """Merge `status` into the Node's status (the simulated device plugin's capacity)."""
    client.CoreV1Api(api).patch_node_status(name, {"status": status})


def pods_on_node(api: client.ApiClient, *, node: str) -> list[Any]:
    """Every pod bound to `node`."""
    return list(
        client.CoreV1Api(api)
        .list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}")
        .items
    )


def delete_pods(api: client.ApiClient, *, namespace: str, label_selector: str, node: str) -> int:
    """Delete the pods on `node` matching `label_selector` in `namespace`; how many."""
    core = client.CoreV1Api(api)
    pods = core.list_namespaced_pod(
        namespace, label_selector=label_selector, field_selector=f"spec.nodeName={node}"
    ).items
    for pod in pods:
        assert pod.metadata is not None
        assert pod.metadata.name is not None
        core.delete_namespaced_pod(pod.metadata.name, namespace)
    return len(pods)


def watch_node_partition(api: client.ApiClient, *, name: str, timeout: int) -> list[str]:
    """Block until the NodePartition `name` changes or `timeout` seconds pass; the event
    types seen (empty on a time-out)."""
    from kubernetes import watch

    stream = watch.Watch()
    seen = []
    for event in stream.stream(
        client.CustomObjectsApi(api).list_cluster_custom_object,
        GROUP,
        VERSION,
        NODE_PARTITIONS,
        field_selector=f"metadata.name={name}",
        timeout_seconds=timeout,
    ):
        seen.append(str(event["type"]))
        stream.stop()
    return seen


def list_nodes(api: client.ApiClient, *, label_selector: str) -> list[Any]:
    """Nodes matching `label_selector`."""
    return list(client.CoreV1Api(api).list_node(label_selector=label_selector).items)


def list_node_partitions(api: client.ApiClient) -> list[dict[str, Any]]:
    """Every NodePartition."""
    found = client.CustomObjectsApi(api).list_cluster_custom_object(GROUP, VERSION, NODE_PARTITIONS)
    return list(cast(dict[str, Any], found)["items"])


def namespace_labels(api: client.ApiClient) -> dict[str, dict[str, str]]:
    """Namespace name -> its labels."""
    return {
        ns.metadata.name: dict(ns.metadata.labels or {})
        for ns in client.CoreV1Api(api).list_namespace().items
        if ns.metadata is not None and ns.metadata.name
    }


def pending_pods(api: client.ApiClient) -> list[Any]:
    """Pods in phase Pending, all namespaces."""
    return list(
        client.CoreV1Api(api)
        .list_pod_for_all_namespaces(field_selector="status.phase=Pending")
        .items
    )
