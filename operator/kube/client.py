"""Kubernetes API calls, each a small function with keyword-only arguments.

Everything else in migplan goes through here, so API access is in one place (and a test
double, if ever needed, replaces one module).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar, cast

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    retry_if_result,
    stop_after_attempt,
    wait_exponential_jitter,
)
from tenacity.retry import retry_base
from tenacity.wait import wait_base
from urllib3.exceptions import HTTPError as TransportError

from migplan.operator.kube import metrics as api_metrics
from migplan.planner.errors import MigplanInputError
from migplan.planner.group import GROUP, NODE_PARTITIONS, PLANS, VERSION
from migplan.planner.status import PlanStatus

RETRIED = frozenset({409, 429, 500, 502, 503, 504})
"""Conflicts, throttling (API Priority and Fairness) and transient server errors: a write
that meets one is tried again."""
TRIES = 5
RETRY_AFTER_CAP = 30.0
"""The longest wait a server's Retry-After is taken at (seconds)."""
P = ParamSpec("P")
R = TypeVar("R")


def _retriable(exc: BaseException) -> bool:
    """A 409 AlreadyExists is an answer, not a conflict: passed on at once. A connection
    lost on the way (reset, closed without an answer) is tried again too: every write
    retried this way is idempotent (a merge patch, or a create that takes AlreadyExists as
    done)."""
    if isinstance(exc, TransportError):
        return True
    return (
        isinstance(exc, ApiException) and exc.status in RETRIED and _reason(exc) != "AlreadyExists"
    )


READ_RETRIED = RETRIED - {409}


def _read_retriable(exc: BaseException) -> bool:
    """A read is safe to send again on anything but an answer about the request itself."""
    return isinstance(exc, TransportError) or (
        isinstance(exc, ApiException) and exc.status in READ_RETRIED
    )


def _unanswered(response: Any) -> bool:
    """A read's raw answer that says "not now" (throttled, a transient server error); its
    body is read so the connection goes back to the pool."""
    if getattr(response, "status", 200) not in READ_RETRIED:
        return False
    response.read()
    return True


def retry_after(exc: BaseException | None) -> float | None:
    """The seconds a throttled or unavailable API server asked to wait (its Retry-After
    header), at most RETRY_AFTER_CAP; None when it did not say."""
    return _seconds((getattr(exc, "headers", None) or {}).get("Retry-After"))


def _seconds(value: object) -> float | None:
    try:
        return min(max(float(str(value)), 0.0), RETRY_AFTER_CAP)
    except (TypeError, ValueError):
        return None


class _ServerPaced(wait_base):
    """Wait as long as the server asked (Retry-After, on an error or on a retried
    answer), else back off exponentially."""

    def __init__(self) -> None:
        self._backoff = wait_exponential_jitter(multiplier=0.2, max=5.0, jitter=0.1)

    def __call__(self, retry_state: RetryCallState) -> float:
        outcome = retry_state.outcome
        if outcome is None:
            asked = None
        elif outcome.failed:
            asked = retry_after(outcome.exception())
        else:
            asked = _seconds(getattr(outcome.result(), "headers", {}).get("Retry-After"))
        return asked if asked is not None else self._backoff(retry_state)


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


def _last_answer(retry_state: RetryCallState) -> Any:
    """After the last try, the answer as it came (the caller raises on it as usual)."""
    assert retry_state.outcome is not None
    return retry_state.outcome.result()


def _retried(
    call: Callable[P, R],
    when: Callable[[BaseException], bool],
    *,
    unanswered: Callable[[Any], bool] | None = None,
) -> Callable[P, R]:
    """`call` tried up to TRIES times while it raises what `when` accepts (or returns what
    `unanswered` accepts), paced by the server."""
    retry: retry_base = retry_if_exception(when)
    if unanswered is not None:
        retry = retry | retry_if_result(unanswered)

    @functools.wraps(call)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        retrying_ = Retrying(
            retry=retry,
            stop=stop_after_attempt(TRIES),
            wait=_ServerPaced(),
            sleep=_sleep,
            reraise=True,
            retry_error_callback=_last_answer if unanswered is not None else None,
        )
        return retrying_(call, *args, **kwargs)

    return wrapper


def retrying(call: Callable[P, R]) -> Callable[P, R]:
    """Retry `call` on a write conflict, throttling, a transient server error or a lost
    connection (TRIES tries, waiting as long as the server's Retry-After says, else backing
    off with jitter)."""
    return _retried(call, _retriable)


def _reason(exc: ApiException) -> str:
    """The Status reason of a failed call (`AlreadyExists`, `Conflict`, ...)."""
    try:
        return str(json.loads(exc.body or "{}").get("reason", ""))
    except (ValueError, TypeError, AttributeError):
        return ""


def _counted(api: client.ApiClient) -> client.ApiClient:
    """`api` with every request counted in migplan_api_requests_total, and every read (GET,
    watches included) retried on throttling, a transient server error or a lost connection:
    reads are most of the operator's calls and each is safe to repeat, so one bad answer
    does not fail a whole tick."""
    request = api.rest_client.request

    def counted(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if method == "GET":
            return read(method, url, *args, **kwargs)
        return count(method, url, *args, **kwargs)

    def count(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        verb, resource = api_metrics.describe(method, url)
        code = "error"
        try:
            response = request(method, url, *args, **kwargs)
            code = str(getattr(response, "status", "") or "")
            return response
        except ApiException as exc:
            code = str(exc.status)
            raise
        finally:
            api_metrics.API_REQUESTS.labels(verb=verb, resource=resource, code=code).inc()

    read = _retried(count, _read_retriable, unanswered=_unanswered)
    api.rest_client.request = counted  # type: ignore[method-assign]
    return api


def connect(*, kubeconfig: str | None = None) -> client.ApiClient:
    """An API client from `kubeconfig`, or the in-cluster service account when None."""
    try:
        if kubeconfig:
            api = config.new_client_from_config(config_file=kubeconfig)
            return _counted(cast(client.ApiClient, api))
        config.load_incluster_config()
    except (config.ConfigException, OSError, yaml.YAMLError, TypeError, AttributeError) as exc:
        # A kubeconfig that is not YAML, or YAML of another shape, is bad input too.
        raise MigplanInputError(
            f"no cluster to talk to ({' '.join(str(exc).split())}): set KUBECONFIG or --kubeconfig"
        ) from None
    return _counted(client.ApiClient())


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


CREATABLE_METADATA = frozenset({"name", "labels", "annotations", "ownerReferences"})
"""Metadata a client sets when it creates an object; the server sets the rest."""


@retrying
def apply_node_partition(api: client.ApiClient, *, body: dict[str, Any]) -> None:
    """Create the NodePartition, or replace its spec if it exists. `body` may be one read
    from the server: what the server sets in its metadata is left out of the create (with a
    resourceVersion, the API server answers a create with a 500, not AlreadyExists)."""
    objects = client.CustomObjectsApi(api)
    name = body["metadata"]["name"]
    metadata = {k: v for k, v in body["metadata"].items() if k in CREATABLE_METADATA}
    try:
        objects.create_cluster_custom_object(
            GROUP, VERSION, NODE_PARTITIONS, {**body, "metadata": metadata}
        )
    except ApiException as exc:
        if exc.status != 409:
            raise
        objects.patch_cluster_custom_object(
            GROUP, VERSION, NODE_PARTITIONS, name, {"spec": body["spec"]}
        )


@retrying
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


@retrying
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


def list_pods(
    api: client.ApiClient, *, namespace: str, label_selector: str, node: str | None = None
) -> list[Any]:
    """Pods in `namespace` matching `label_selector` (on `node`, if given)."""
    return list(
        client.CoreV1Api(api)
        .list_namespaced_pod(
            namespace,
            label_selector=label_selector,
            field_selector=f"spec.nodeName={node}" if node else None,
        )
        .items
    )


def delete_pods(api: client.ApiClient, *, namespace: str, label_selector: str, node: str) -> int:
    """Delete the pods on `node` matching `label_selector` in `namespace`; how many."""
    core = client.CoreV1Api(api)
    pods = list_pods(api, namespace=namespace, label_selector=label_selector, node=node)
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


def list_cluster_policies(api: client.ApiClient) -> list[dict[str, Any]] | None:
    """The GPU Operator's ClusterPolicy objects; None when the API server has no such kind
    or migplan may not read it."""
    try:
        found = client.CustomObjectsApi(api).list_cluster_custom_object(
            "nvidia.com", "v1", "clusterpolicies"
        )
    except ApiException as exc:
        if exc.status in (403, 404):
            return None
        raise
    return list(cast(dict[str, Any], found)["items"])


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


DRA_GROUP = "resource.k8s.io"
DRA_VERSION = "v1"


def _group_served(api: client.ApiClient, *, group: str, version: str) -> bool:
    try:
        groups = client.ApisApi(api).get_api_versions().groups or []
    except ApiException as exc:
        if exc.status in (403, 404):
            return False
        raise
    return any(
        g.name == group and any(v.version == version for v in g.versions or []) for g in groups
    )


def dra_served(api: client.ApiClient) -> bool:
    """Whether the API server serves Dynamic Resource Allocation (resource.k8s.io/v1)."""
    return _group_served(api, group=DRA_GROUP, version=DRA_VERSION)


def list_dra(
    api: client.ApiClient, *, plural: str, field_selector: str | None = None
) -> list[dict[str, Any]]:
    """Every object of a resource.k8s.io/v1 kind (resourceslices, resourceclaims,
    resourceclaimtemplates, deviceclasses), all namespaces, as plain dictionaries; with
    `field_selector` (`spec.nodeName=<node>` for ResourceSlices) only those it selects."""
    found = client.CustomObjectsApi(api).list_cluster_custom_object(
        DRA_GROUP, DRA_VERSION, plural, field_selector=field_selector
    )
    return list(cast(dict[str, Any], found)["items"])


TAINT_RULES = ("v1beta2", "devicetaintrules")
"""DeviceTaintRule: resource.k8s.io/v1beta2 in Kubernetes 1.36, behind the DRADeviceTaintRules
feature gate (off by default)."""


def taint_rules_served(api: client.ApiClient) -> bool:
    """Whether the API server serves DeviceTaintRules (resource.k8s.io/v1beta2)."""
    try:
        found = client.CustomObjectsApi(api).get_api_resources(DRA_GROUP, TAINT_RULES[0])
    except ApiException as exc:
        if exc.status in (403, 404):
            return False
        raise
    return any(r.name == TAINT_RULES[1] for r in found.resources or [])


def list_taint_rules(api: client.ApiClient, *, label_selector: str) -> list[dict[str, Any]]:
    """DeviceTaintRules matching `label_selector`."""
    found = client.CustomObjectsApi(api).list_cluster_custom_object(
        DRA_GROUP, TAINT_RULES[0], TAINT_RULES[1], label_selector=label_selector
    )
    return list(cast(dict[str, Any], found)["items"])


@retrying
def create_taint_rule(api: client.ApiClient, *, body: dict[str, Any]) -> None:
    """Create a DeviceTaintRule; one that exists already counts as made."""
    try:
        client.CustomObjectsApi(api).create_cluster_custom_object(
            DRA_GROUP, TAINT_RULES[0], TAINT_RULES[1], body
        )
    except ApiException as exc:
        if exc.status != 409:
            raise


@retrying
def delete_taint_rule(api: client.ApiClient, *, name: str) -> None:
    """Delete a DeviceTaintRule; one already gone counts as deleted."""
    try:
        client.CustomObjectsApi(api).delete_cluster_custom_object(
            DRA_GROUP, TAINT_RULES[0], TAINT_RULES[1], name
        )
    except ApiException as exc:
        if exc.status != 404:
            raise


@retrying
def apply_resource_slice(api: client.ApiClient, *, body: dict[str, Any]) -> None:
    """Create the ResourceSlice, or replace it where it exists (the simulated DRA plugin)."""
    objects = client.CustomObjectsApi(api)
    try:
        objects.create_cluster_custom_object(DRA_GROUP, DRA_VERSION, "resourceslices", body)
    except ApiException as exc:
        if exc.status != 409:
            raise
        objects.replace_cluster_custom_object(
            DRA_GROUP, DRA_VERSION, "resourceslices", body["metadata"]["name"], body
        )


def get_plan(api: client.ApiClient, *, name: str) -> dict[str, Any] | None:
    """The GPUPartitionPlan `name`, or None if it is gone."""
    try:
        found = client.CustomObjectsApi(api).get_cluster_custom_object(GROUP, VERSION, PLANS, name)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return cast(dict[str, Any], found)


def list_plans(api: client.ApiClient) -> list[dict[str, Any]]:
    """Every GPUPartitionPlan."""
    found = client.CustomObjectsApi(api).list_cluster_custom_object(GROUP, VERSION, PLANS)
    return list(cast(dict[str, Any], found)["items"])


KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
"""Kueue's storage version since v0.15 (v1beta1 is still served)."""


def kueue_served(api: client.ApiClient) -> bool:
    """Whether Kueue's CRDs are installed (kueue.x-k8s.io/v1beta2 served)."""
    return _group_served(api, group=KUEUE_GROUP, version=KUEUE_VERSION)


def list_kueue(api: client.ApiClient, *, plural: str) -> list[dict[str, Any]]:
    """Every Kueue object of a kind (workloads, admissionchecks, localqueues), all
    namespaces, as plain dictionaries."""
    found = client.CustomObjectsApi(api).list_cluster_custom_object(
        KUEUE_GROUP, KUEUE_VERSION, plural
    )
    return list(cast(dict[str, Any], found)["items"])


def patch_admission_check_status(
    api: client.ApiClient, *, name: str, conditions: list[dict[str, Any]]
) -> None:
    """Replace an AdmissionCheck's status conditions (Kueue keeps a ClusterQueue inactive
    until the check's controller says Active)."""
    client.CustomObjectsApi(api).patch_cluster_custom_object_status(
        KUEUE_GROUP, KUEUE_VERSION, "admissionchecks", name, {"status": {"conditions": conditions}}
    )


def patch_workload_checks(
    api: client.ApiClient,
    *,
    namespace: str,
    name: str,
    checks: list[dict[str, Any]],
    resource_version: str,
) -> bool:
    """Replace a Workload's status.admissionChecks, only if the Workload is still at
    `resource_version` (Kueue writes the same list); False on a conflict (read again)."""
    body = {
        "metadata": {"resourceVersion": resource_version},
        "status": {"admissionChecks": checks},
    }
    try:
        client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
            KUEUE_GROUP, KUEUE_VERSION, namespace, "workloads", name, body
        )
    except ApiException as exc:
        if exc.status in (404, 409):
            return False
        raise
    return True


@retrying
def patch_plan_status(api: client.ApiClient, *, name: str, status: dict[str, Any]) -> None:
    """Merge `status` into the plan's status (a None value removes that field). Checked
    against PlanStatus first: a key or value the CRD does not declare would be pruned or
    refused by the API server, so it fails here, where the writer is on the stack."""
    PlanStatus.model_validate(status)
    client.CustomObjectsApi(api).patch_cluster_custom_object_status(
        GROUP, VERSION, PLANS, name, {"status": status}
    )


@retrying
def annotate_plan(api: client.ApiClient, *, name: str, annotations: dict[str, str | None]) -> None:
    """Merge `annotations` into the plan's metadata."""
    client.CustomObjectsApi(api).patch_cluster_custom_object(
        GROUP, VERSION, PLANS, name, {"metadata": {"annotations": annotations}}
    )


@retrying
def patch_node(api: client.ApiClient, *, name: str, body: dict[str, Any]) -> Any:
    """Merge `body` into the Node (spec.unschedulable, annotations); the node after."""
    return client.CoreV1Api(api).patch_node(name, body)


@retrying
def cordon_node(api: client.ApiClient, *, name: str, annotation: str, owner: str) -> bool:
    """Cordon the node for `owner` (marked with `annotation` in the same write), unless
    someone else has it cordoned: True when it is `owner`'s cordon now. The write carries the
    resourceVersion read, so a cordon that lands in between makes it fail (409) and the
    whole decision is taken again from a fresh read: another's cordon is never taken over."""
    node = get_node(api, name=name)
    if (node.metadata.annotations or {}).get(annotation) == owner:
        return True
    if node.spec.unschedulable:
        return False
    _patch_cordon(api, node, unschedulable=True, annotations={annotation: owner})
    return True


@retrying
def uncordon_node(api: client.ApiClient, *, name: str, annotation: str, owner: str) -> bool:
    """Uncordon the node if `owner` cordoned it (the annotation says so in the version read;
    a write in between makes it read and decide again); True when it did."""
    node = get_node(api, name=name)
    if (node.metadata.annotations or {}).get(annotation) != owner:
        return False
    _patch_cordon(api, node, unschedulable=False, annotations={annotation: None})
    return True


def _patch_cordon(
    api: client.ApiClient, node: Any, *, unschedulable: bool, annotations: dict[str, str | None]
) -> None:
    """Set the cordon and its mark in one write, only on the version of `node` read (409
    when it changed since)."""
    body = {
        "spec": {"unschedulable": unschedulable},
        "metadata": {"annotations": annotations, "resourceVersion": node.metadata.resource_version},
    }
    client.CoreV1Api(api).patch_node(node.metadata.name, body)


def get_pod(api: client.ApiClient, *, namespace: str, name: str) -> Any | None:
    """The pod, or None if it is gone."""
    try:
        return client.CoreV1Api(api).read_namespaced_pod(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


class PodReplacedError(Exception):
    """The pod an eviction named by UID is not that pod any more (deleted and made again)."""


def evict_pod(
    api: client.ApiClient, *, namespace: str, name: str, uid: str | None = None
) -> str | None:
    """Ask the Eviction API to evict the pod (it honours PodDisruptionBudgets); with `uid`,
    only if the pod of that name is still that pod (a precondition the API server checks).

    Returns None when the eviction was accepted or the pod is already gone, else why it
    was refused (a 429 while a disruption budget forbids it: try again later). Raises
    PodReplacedError when the UID precondition fails.
    """
    options = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid)) if uid else None
    body = client.V1Eviction(
        metadata=client.V1ObjectMeta(name=name, namespace=namespace), delete_options=options
    )
    try:
        client.CoreV1Api(api).create_namespaced_pod_eviction(name, namespace, body)
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


def ensure_cluster_object(
    api: client.ApiClient, *, group: str, version: str, plural: str, body: dict[str, Any]
) -> None:
    """Create the cluster-scoped custom object unless it exists (kopf's peering object)."""
    try:
        client.CustomObjectsApi(api).create_cluster_custom_object(group, version, plural, body)
    except ApiException as exc:
        if exc.status != 409:
            raise


def create_node_partition(api: client.ApiClient, *, body: dict[str, Any]) -> bool:
    """Create the NodePartition unless one exists; whether it was created."""
    try:
        client.CustomObjectsApi(api).create_cluster_custom_object(
            GROUP, VERSION, NODE_PARTITIONS, body
        )
    except ApiException as exc:
        if exc.status == 409:
            return False
        raise
    return True


def get_config_map_data(api: client.ApiClient, *, namespace: str, name: str) -> dict[str, str]:
    """The ConfigMap's data ({} if there is no such ConfigMap)."""
    try:
        found = client.CoreV1Api(api).read_namespaced_config_map(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return {}
        raise
    return dict(found.data or {})


@retrying
def edit_config_map(
    api: client.ApiClient,
    *,
    namespace: str,
    name: str,
    edit: Callable[[dict[str, str]], dict[str, str]],
) -> None:
    """Read-modify-write the ConfigMap's data (created if missing); a concurrent change makes
    the write conflict and the whole edit is tried again."""
    core = client.CoreV1Api(api)
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


def create_event(
    api: client.ApiClient, *, obj: dict[str, Any], kind: str, reason: str, message: str
) -> None:
    """Post an event about `obj` (events of cluster-scoped objects live in `default`)."""
    from datetime import UTC, datetime

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
    client.CoreV1Api(api).create_namespaced_event(namespace, body)


@dataclass(frozen=True)
class Identity:
    """Who a bearer token belongs to, as the API server's TokenReview says."""

    username: str
    uid: str
    groups: tuple[str, ...]
    extra: dict[str, list[str]]


def review_token(api: client.ApiClient, *, token: str) -> Identity | None:
    """The identity behind `token` (TokenReview), or None when the API server does not
    accept it."""
    review = client.AuthenticationV1Api(api).create_token_review(
        client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token))
    )
    status = review.status
    if status is None or not status.authenticated or status.user is None:
        return None
    user = status.user
    return Identity(
        username=user.username or "",
        uid=user.uid or "",
        groups=tuple(user.groups or ()),
        extra={key: list(values) for key, values in (user.extra or {}).items()},
    )


def may_access_path(api: client.ApiClient, *, who: Identity, verb: str, path: str) -> bool:
    """Whether RBAC lets `who` do `verb` on the non-resource URL `path`
    (SubjectAccessReview)."""
    review = client.AuthorizationV1Api(api).create_subject_access_review(
        client.V1SubjectAccessReview(
            spec=client.V1SubjectAccessReviewSpec(
                user=who.username,
                uid=who.uid or None,
                groups=list(who.groups),
                extra=who.extra or None,
                non_resource_attributes=client.V1NonResourceAttributes(path=path, verb=verb),
            )
        )
    )
    return bool(review.status and review.status.allowed)
