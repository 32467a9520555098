"""An in-memory API server behind the kube seam (`seam.Kube`), for unit tests of the
controller, the stepper and the ticker without a control plane.

It keeps what the code under test relies on honest, as the real API server does it: every
write bumps a cluster-wide resourceVersion and a write that carries a stale one is refused
(409 Conflict); creating what exists is 409 AlreadyExists, reading what does not is 404;
patches are JSON merge patches (None removes a field); migplan's objects have a status
subresource (a spec write cannot touch status and a status write cannot touch the rest) and
a generation that moves only with the spec; a bound pod evicted or deleted goes at once (the
kubelet's confirmation is not modelled) unless it has finalizers, which leave it terminating;
a watch without a resourceVersion starts with the object as it is. Errors are the real
client's `ApiException`, with the Status body the real server sends. Each of these is
checked against a real API server in `tests/cluster/test_api_server_twin.py`.

What it does not model is said where it matters: PodDisruptionBudget arithmetic (a test
refuses an eviction with `refuse_eviction`), set-based label selectors (refused with a
ValueError rather than answered wrongly), schema pruning, admission.
"""

from __future__ import annotations

import copy
import itertools
import json
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from migplan.operator.kube.auth import Identity
from migplan.operator.kube.bodies import NodePartitionBody, PlanBody
from migplan.operator.kube.core import PodReplacedError
from migplan.operator.kube.dra import DRA_GROUP, DRA_VERSION, TAINT_RULES
from migplan.operator.kube.gangs import GangApi
from migplan.operator.kube.kueue import KUEUE_GROUP, KUEUE_VERSION
from migplan.operator.kube.seam import Kube
from migplan.planner.api.group import API_VERSION, NODE_PARTITIONS, PLANS
from migplan.planner.status import PlanStatus

Body = dict[str, Any]
Key = tuple[str, str, str]
"""(resource, namespace or "", name)."""
GENERATED = frozenset({PLANS, NODE_PARTITIONS, "workloads", "admissionchecks"})
"""Custom resources with a status subresource: status dropped on create, generation moved by
the spec alone."""
WITH_STATUS = GENERATED | {"nodes", "pods"}
"""Resources whose status is a subresource, written apart from the rest."""
MODELS = {
    "nodes": "V1Node",
    "pods": "V1Pod",
    "namespaces": "V1Namespace",
    "configmaps": "V1ConfigMap",
}
"""Core resources the real client hands back as models rather than dictionaries."""


def api_error(status: int, reason: str, message: str) -> ApiException:
    """The client's exception for a refused request, its body the server's Status."""
    error = ApiException(status=status, reason=reason)
    error.body = json.dumps(
        {
            "kind": "Status",
            "status": "Failure",
            "reason": reason,
            "message": message,
            "code": status,
        }
    )
    return error


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: maps merge key by key, None removes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def _lookup(obj: Body, path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def _requirements(selector: str | None) -> list[tuple[str, str, str | None]]:
    """A label selector's (key, operator, value) terms: `=`, `!=`, `exists`, `!exists`."""
    terms: list[tuple[str, str, str | None]] = []
    for term in filter(None, (t.strip() for t in (selector or "").split(","))):
        if " in " in term or " notin " in term or "(" in term:
            raise ValueError(f"the in-memory API server does not model set-based {term!r}")
        if "!=" in term:
            key, value = (s.strip() for s in term.split("!=", 1))
            terms.append((key, "!=", value))
        elif "=" in term:
            key, value = (s.strip() for s in term.replace("==", "=").split("=", 1))
            terms.append((key, "=", value))
        elif term.startswith("!"):
            terms.append((term[1:].strip(), "!exists", None))
        else:
            terms.append((term, "exists", None))
    return terms


def _selects(terms: list[tuple[str, str, str | None]], labels: dict[str, str]) -> bool:
    return all(
        {
            "=": labels.get(key) == value,
            "!=": labels.get(key) != value,
            "exists": key in labels,
            "!exists": key not in labels,
        }[op]
        for key, op, value in terms
    )


def _fields(selector: str | None) -> list[tuple[str, str, bool]]:
    """A field selector's (path, value, equal) terms."""
    terms = []
    for term in filter(None, (t.strip() for t in (selector or "").split(","))):
        if "!=" in term:
            path, value = term.split("!=", 1)
            terms.append((path.strip(), value.strip(), False))
        else:
            path, value = term.replace("==", "=").split("=", 1)
            terms.append((path.strip(), value.strip(), True))
    return terms


@dataclass
class Store:
    """Objects by key, one resourceVersion counter, and a condition watchers wait on."""

    objects: dict[Key, Body] = field(default_factory=dict)
    version: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    changed: threading.Condition = field(default_factory=threading.Condition)
    writes: list[tuple[str, str, str]] = field(default_factory=list)
    """(verb, resource, name) of every accepted write, in order (what tests count)."""
    lists: list[str] = field(default_factory=list)
    """The resource of every list, in order."""

    def _stamp(self, obj: Body) -> None:
        obj["metadata"]["resourceVersion"] = str(next(self.version))

    def get(self, resource: str, name: str, namespace: str = "") -> Body:
        with self.changed:
            found = self.objects.get((resource, namespace, name))
            if found is None:
                raise api_error(404, "NotFound", f'{resource} "{name}" not found')
            return copy.deepcopy(found)

    def find(self, resource: str, name: str, namespace: str = "") -> Body | None:
        """The object, or None."""
        try:
            return self.get(resource, name, namespace)
        except ApiException:
            return None

    def list(
        self,
        resource: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[Body]:
        wanted = _requirements(label_selector)
        terms = _fields(field_selector)
        with self.changed:
            self.lists.append(resource)
            found = [
                copy.deepcopy(obj)
                for (kind, ns, _), obj in sorted(self.objects.items())
                if kind == resource and (namespace is None or ns == namespace)
            ]
        return [
            obj
            for obj in found
            if _selects(wanted, obj["metadata"].get("labels") or {})
            and all((_lookup(obj, path) == value) == equal for path, value, equal in terms)
        ]

    def create(self, resource: str, body: Body, namespace: str = "") -> Body:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if "resourceVersion" in meta:
            raise api_error(500, "InternalError", "resourceVersion should not be set on create")
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
        name = meta["name"]
        with self.changed:
            if (resource, namespace, name) in self.objects:
                raise api_error(409, "AlreadyExists", f'{resource} "{name}" already exists')
            if namespace:
                meta["namespace"] = namespace
            if resource == "namespaces":  # as the real server labels every namespace
                meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = name
            if resource == "pods":
                obj.setdefault("status", {}).setdefault("phase", "Pending")
            if resource == "nodes":
                obj.setdefault("spec", {})
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            if resource in GENERATED:
                meta["generation"] = 1
                obj.pop("status", None)
            self._stamp(obj)
            self.objects[(resource, namespace, name)] = obj
            self.writes.append(("create", resource, name))
            self.changed.notify_all()
            return copy.deepcopy(obj)

    def patch(
        self,
        resource: str,
        name: str,
        patch: Body,
        *,
        namespace: str = "",
        status: bool = False,
        replace: bool = False,
    ) -> Body:
        """Merge `patch` (or replace with it) on the object or its status subresource; a
        resourceVersion in the patch is a precondition."""
        with self.changed:
            key = (resource, namespace, name)
            current = self.objects.get(key)
            if current is None:
                raise api_error(404, "NotFound", f'{resource} "{name}" not found')
            wanted = (patch.get("metadata") or {}).get("resourceVersion")
            if wanted is not None and wanted != current["metadata"]["resourceVersion"]:
                raise api_error(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {resource} "{name}": the object has '
                    "been modified; please apply your changes to the latest version and try "
                    "again",
                )
            updated = self._apply(resource, current, patch, status=status, replace=replace)
            if updated == current:
                return copy.deepcopy(current)  # a no-op write does not bump resourceVersion
            if resource in GENERATED and updated.get("spec") != current.get("spec"):
                updated["metadata"]["generation"] = current["metadata"].get("generation", 1) + 1
            self._stamp(updated)
            self.objects[key] = updated
            self.writes.append(("patch-status" if status else "patch", resource, name))
            self.changed.notify_all()
            return copy.deepcopy(updated)

    @staticmethod
    def _apply(resource: str, current: Body, patch: Body, *, status: bool, replace: bool) -> Body:
        server_set = {
            k: current["metadata"][k]
            for k in ("uid", "creationTimestamp", "generation", "resourceVersion", "namespace")
            if k in current["metadata"]
        }
        if status and resource in WITH_STATUS:
            return {**current, "status": merge_patch(current.get("status"), patch.get("status"))}
        if replace:
            updated = copy.deepcopy(patch)
        else:
            updated = merge_patch(current, {k: v for k, v in patch.items() if k != "metadata"})
            updated["metadata"] = merge_patch(current["metadata"], patch.get("metadata") or {})
        updated["metadata"].update(server_set)
        if resource in WITH_STATUS:
            updated["status"] = copy.deepcopy(current.get("status"))
            if updated["status"] is None:
                updated.pop("status")
        return dict(updated)

    def delete(self, resource: str, name: str, namespace: str = "") -> None:
        """Delete the object; one with finalizers is only marked terminating."""
        with self.changed:
            key = (resource, namespace, name)
            current = self.objects.get(key)
            if current is None:
                raise api_error(404, "NotFound", f'{resource} "{name}" not found')
            if current["metadata"].get("finalizers"):
                if not current["metadata"].get("deletionTimestamp"):
                    current["metadata"]["deletionTimestamp"] = datetime.now(UTC).strftime(
                        "%Y-%m-%dT%H:%M:%SZ"
                    )
                    self._stamp(current)
            else:
                del self.objects[key]
            self.writes.append(("delete", resource, name))
            self.changed.notify_all()


class _Models:
    """Dictionaries to the real client's models, as its deserializer makes them."""

    def __init__(self) -> None:
        self._client = client.ApiClient()

    def __call__(self, resource: str, obj: Body) -> Any:
        return self._client.deserialize(json.dumps(obj), MODELS[resource], "application/json")


@dataclass
class FakeCore:
    """The core area over the store."""

    store: Store
    models: _Models = field(default_factory=_Models)
    refusals: dict[str, str] = field(default_factory=dict)
    """namespace/name -> the message a PodDisruptionBudget refuses its eviction with."""

    def get_node(self, *, name: str) -> Any:
        return self.models("nodes", self.store.get("nodes", name))

    def list_nodes(self, *, label_selector: str) -> list[Any]:
        found = self.store.list("nodes", label_selector=label_selector)
        return [self.models("nodes", n) for n in found]

    def patch_node(self, *, name: str, body: dict[str, Any]) -> Any:
        return self.models("nodes", self.store.patch("nodes", name, body))

    def patch_node_status(self, *, name: str, status: dict[str, Any]) -> None:
        self.store.patch("nodes", name, {"status": status}, status=True)

    def cordon_node(self, *, name: str, annotation: str, owner: str) -> bool:
        node = self.store.get("nodes", name)
        if (node["metadata"].get("annotations") or {}).get(annotation) == owner:
            return True
        if (node.get("spec") or {}).get("unschedulable"):
            return False
        self._cordon(node, unschedulable=True, annotations={annotation: owner})
        return True

    def uncordon_node(self, *, name: str, annotation: str, owner: str) -> bool:
        node = self.store.get("nodes", name)
        if (node["metadata"].get("annotations") or {}).get(annotation) != owner:
            return False
        self._cordon(node, unschedulable=False, annotations={annotation: None})
        return True

    def _cordon(self, node: Body, *, unschedulable: bool, annotations: dict[str, Any]) -> None:
        meta = node["metadata"]
        self.store.patch(
            "nodes",
            meta["name"],
            {
                "spec": {"unschedulable": unschedulable or None},
                "metadata": {
                    "annotations": annotations,
                    "resourceVersion": meta["resourceVersion"],
                },
            },
        )

    def get_pod(self, *, namespace: str, name: str) -> Any | None:
        found = self.store.find("pods", name, namespace)
        return None if found is None else self.models("pods", found)

    def pods_on_node(self, *, node: str) -> list[Any]:
        return [
            self.models("pods", p)
            for p in self.store.list("pods", field_selector=f"spec.nodeName={node}")
        ]

    def list_pods(
        self, *, namespace: str, label_selector: str, node: str | None = None
    ) -> list[Any]:
        found = self.store.list(
            "pods",
            namespace=namespace,
            label_selector=label_selector,
            field_selector=f"spec.nodeName={node}" if node else None,
        )
        return [self.models("pods", p) for p in found]

    def pending_pods(self) -> list[Any]:
        found = self.store.list("pods", field_selector="status.phase=Pending")
        return [self.models("pods", p) for p in found]

    def delete_pods(self, *, namespace: str, label_selector: str, node: str) -> int:
        pods = self.list_pods(namespace=namespace, label_selector=label_selector, node=node)
        for pod in pods:
            self.store.delete("pods", pod.metadata.name, namespace)
        return len(pods)

    def create_pod(self, *, namespace: str, body: dict[str, Any]) -> Any:
        return self.models("pods", self.store.create("pods", body, namespace))

    def delete_pod(self, *, namespace: str, name: str) -> bool:
        if self.store.find("pods", name, namespace) is None:
            return False
        self.store.delete("pods", name, namespace)
        return True

    def evict_pod(self, *, namespace: str, name: str, uid: str | None = None) -> str | None:
        found = self.store.find("pods", name, namespace)
        if found is None:
            return None
        if uid and found["metadata"]["uid"] != uid:
            raise PodReplacedError(f"{namespace}/{name}")
        refusal = self.refusals.get(f"{namespace}/{name}")
        if refusal is not None:
            return refusal
        self.store.delete("pods", name, namespace)
        return None

    def namespace_labels(self) -> dict[str, dict[str, str]]:
        return {
            ns["metadata"]["name"]: dict(ns["metadata"].get("labels") or {})
            for ns in self.store.list("namespaces")
        }

    def get_config_map_data(self, *, namespace: str, name: str) -> dict[str, str]:
        found = self.store.find("configmaps", name, namespace)
        return dict((found or {}).get("data") or {})

    def edit_config_map(
        self,
        *,
        namespace: str,
        name: str,
        edit: Callable[[dict[str, str]], dict[str, str]],
    ) -> None:
        found = self.store.find("configmaps", name, namespace)
        if found is None:
            body = {"metadata": {"name": name}, "data": edit({})}
            self.store.create("configmaps", body, namespace)
            return
        found["data"] = edit(dict(found.get("data") or {}))
        self.store.patch("configmaps", name, found, namespace=namespace, replace=True)

    def create_event(self, *, obj: Mapping[str, Any], kind: str, reason: str, message: str) -> str:
        meta = obj["metadata"]
        namespace = meta.get("namespace") or "default"
        event = {
            "metadata": {"generateName": f"{meta['name']}."},
            "involvedObject": {
                "kind": obj.get("kind"),
                "name": meta["name"],
                "uid": meta.get("uid"),
            },
            "type": kind,
            "reason": reason,
            "message": message[:1024],
            "count": 1,
        }
        return str(self.store.create("events", event, namespace)["metadata"]["name"])

    def bump_event(self, *, namespace: str, name: str, count: int) -> bool:
        if self.store.find("events", name, namespace) is None:
            return False
        self.store.patch("events", name, {"count": count}, namespace=namespace)
        return True

    def list_cluster_policies(self) -> list[dict[str, Any]] | None:
        return None

    def ensure_cluster_object(
        self, *, group: str, version: str, plural: str, body: dict[str, Any]
    ) -> None:
        if self.store.find(plural, body["metadata"]["name"]) is None:
            self.store.create(plural, body)


@dataclass
class FakePlans:
    """GPUPartitionPlans and NodePartitions over the store."""

    store: Store

    def get_plan(self, *, name: str) -> PlanBody | None:
        return cast(PlanBody | None, self.store.find(PLANS, name))

    def list_plans(self) -> list[PlanBody]:
        return cast(list[PlanBody], self.store.list(PLANS))

    def patch_plan_status(self, *, name: str, status: dict[str, Any]) -> None:
        PlanStatus.model_validate(status)
        self.store.patch(PLANS, name, {"status": status}, status=True)

    def annotate_plan(self, *, name: str, annotations: dict[str, str | None]) -> None:
        self.store.patch(PLANS, name, {"metadata": {"annotations": annotations}})

    def get_node_partition(self, *, name: str) -> NodePartitionBody | None:
        return cast(NodePartitionBody | None, self.store.find(NODE_PARTITIONS, name))

    def list_node_partitions(self, *, label_selector: str | None = None) -> list[NodePartitionBody]:
        found = self.store.list(NODE_PARTITIONS, label_selector=label_selector)
        return cast(list[NodePartitionBody], found)

    def annotate_node_partition(
        self, *, name: str, labels: dict[str, str | None], annotations: dict[str, str | None]
    ) -> bool:
        metadata = {"labels": labels, "annotations": annotations}
        try:
            self.store.patch(NODE_PARTITIONS, name, {"metadata": metadata})
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def create_node_partition(self, *, body: dict[str, Any]) -> bool:
        try:
            self.store.create(NODE_PARTITIONS, body)
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise
        return True

    def apply_node_partition(self, *, body: dict[str, Any]) -> None:
        name = body["metadata"]["name"]
        if self.store.find(NODE_PARTITIONS, name) is None:
            created = {"metadata": {"name": name}, **{k: body[k] for k in ("spec",) if k in body}}
            self.store.create(NODE_PARTITIONS, {"apiVersion": API_VERSION, **created})
            return
        self.store.patch(NODE_PARTITIONS, name, {"spec": body["spec"]})

    def patch_node_partition_status(self, *, name: str, status: dict[str, Any]) -> None:
        self.store.patch(NODE_PARTITIONS, name, {"status": status}, status=True)

    def watch_node_partition(
        self, *, name: str, timeout: int, since: str | None = None
    ) -> list[str]:
        store = self.store
        key = (NODE_PARTITIONS, "", name)

        def after() -> list[str]:
            found = store.objects.get(key)
            if since is None:
                return ["ADDED"] if found is not None else []
            if found is None:  # it was there at `since`: the caller read it
                return ["DELETED"]
            newer = int(found["metadata"]["resourceVersion"]) > int(since)
            return ["MODIFIED"] if newer else []

        with store.changed:
            store.changed.wait_for(after, timeout=timeout)
            return after()


@dataclass
class FakeDra:
    """resource.k8s.io over the store; served only when the cluster says so."""

    store: Store
    serving: bool = False
    taint_rules: bool = False

    def served(self) -> bool:
        return self.serving

    def list_objects(
        self, *, plural: str, field_selector: str | None = None
    ) -> list[dict[str, Any]]:
        self._check(self.serving, f"{DRA_GROUP}/{DRA_VERSION}")
        return self.store.list(plural, field_selector=field_selector)

    def taint_rules_served(self) -> bool:
        return self.taint_rules

    def list_taint_rules(self, *, label_selector: str) -> list[dict[str, Any]]:
        self._check(self.taint_rules, f"{DRA_GROUP}/{TAINT_RULES[0]}")
        return self.store.list(TAINT_RULES[1], label_selector=label_selector)

    def create_taint_rule(self, *, body: dict[str, Any]) -> None:
        self._check(self.taint_rules, f"{DRA_GROUP}/{TAINT_RULES[0]}")
        if self.store.find(TAINT_RULES[1], body["metadata"]["name"]) is None:
            self.store.create(TAINT_RULES[1], body)

    def delete_taint_rule(self, *, name: str) -> None:
        if self.store.find(TAINT_RULES[1], name) is not None:
            self.store.delete(TAINT_RULES[1], name)

    def apply_resource_slice(self, *, body: dict[str, Any]) -> None:
        name = body["metadata"]["name"]
        if self.store.find("resourceslices", name) is None:
            self.store.create("resourceslices", body)
        else:
            self.store.patch("resourceslices", name, body, replace=True)

    @staticmethod
    def _check(served: bool, what: str) -> None:
        if not served:
            raise api_error(404, "NotFound", f"the server could not find the requested {what}")


@dataclass
class FakeKueue:
    """kueue.x-k8s.io over the store; served only when the cluster says so."""

    store: Store
    serving: bool = False

    def served(self) -> bool:
        return self.serving

    def list_objects(self, *, plural: str) -> list[dict[str, Any]]:
        if not self.serving:
            raise api_error(404, "NotFound", f"{KUEUE_GROUP}/{KUEUE_VERSION} is not served")
        return self.store.list(plural)

    def patch_admission_check_status(self, *, name: str, conditions: list[dict[str, Any]]) -> None:
        self.store.patch(
            "admissionchecks", name, {"status": {"conditions": conditions}}, status=True
        )

    def patch_workload_checks(
        self,
        *,
        namespace: str,
        name: str,
        checks: list[dict[str, Any]],
        resource_version: str,
    ) -> bool:
        body = {
            "metadata": {"resourceVersion": resource_version},
            "status": {"admissionChecks": checks},
        }
        try:
            self.store.patch("workloads", name, body, namespace=namespace, status=True)
        except ApiException as exc:
            if exc.status in (404, 409):
                return False
            raise
        return True


@dataclass
class FakeGangs:
    """PodGroups over the store (plural `podgroups:<kind>`), each API served only when the
    cluster says so."""

    store: Store
    serving: set[GangApi] = field(default_factory=set)

    def served(self) -> list[GangApi]:
        return [kind for kind in GangApi if kind in self.serving]

    def list_pod_groups(self, *, kind: GangApi) -> list[dict[str, Any]]:
        if kind not in self.serving:
            group, version = kind.group_version
            raise api_error(404, "NotFound", f"{group}/{version} is not served")
        return self.store.list(f"podgroups:{kind.value}")


@dataclass
class FakeAuth:
    """Tokens the cluster knows, and the non-resource paths each user may read."""

    tokens: dict[str, Identity] = field(default_factory=dict)
    allowed: set[tuple[str, str, str]] = field(default_factory=set)
    """(username, verb, path) RBAC allows."""

    def review_token(self, *, token: str) -> Identity | None:
        return self.tokens.get(token)

    def may_access_path(self, *, who: Identity, verb: str, path: str) -> bool:
        return (who.username, verb, path) in self.allowed


class InMemoryCluster:
    """Every area of the kube seam over one in-memory store, plus what a test needs to set
    the scene (nodes, pods, namespaces) and to look (the store's objects and writes)."""

    def __init__(self) -> None:
        self.store = Store()
        self.core = FakeCore(self.store)
        self.plans = FakePlans(self.store)
        self.dra = FakeDra(self.store)
        self.kueue = FakeKueue(self.store)
        self.gangs = FakeGangs(self.store)
        self.auth = FakeAuth()

    def add_namespace(self, name: str, *, labels: dict[str, str] | None = None) -> None:
        """A namespace, as a test sets the scene."""
        self.store.create("namespaces", {"metadata": {"name": name, "labels": labels or {}}})

    def add_node(
        self,
        name: str,
        *,
        labels: dict[str, str] | None = None,
        allocatable: dict[str, str] | None = None,
    ) -> None:
        """A Ready node with `labels` offering `allocatable`."""
        self.store.create(
            "nodes",
            {
                "metadata": {"name": name, "labels": labels or {}},
                "spec": {},
                "status": {
                    "allocatable": allocatable or {},
                    "capacity": allocatable or {},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            },
        )

    def add_node_partition(self, node: str) -> None:
        """The node's NodePartition as its agent creates it, before any report."""
        self.plans.create_node_partition(
            body={
                "apiVersion": API_VERSION,
                "kind": "NodePartition",
                "metadata": {"name": node},
                "spec": {"nodeName": node},
            }
        )

    def add_pod(
        self,
        namespace: str,
        name: str,
        *,
        node: str | None = None,
        requests: dict[str, str] | None = None,
        labels: dict[str, str] | None = None,
        phase: str | None = None,
        finalizers: Iterable[str] = (),
    ) -> str:
        """A pod requesting `requests` (bound to `node` and Running, or Pending); its UID.
        The scene is set as the scheduler and the kubelet would leave it."""
        if self.store.find("namespaces", namespace) is None:
            self.add_namespace(namespace)
        body: Body = {
            "metadata": {"name": name, "labels": labels or {}, "finalizers": list(finalizers)},
            "spec": {
                "containers": [
                    {"name": "main", "image": "busybox", "resources": {"requests": requests or {}}}
                ],
                **({"nodeName": node} if node else {}),
            },
            "status": {"phase": phase or ("Running" if node else "Pending")},
        }
        if node is None:  # the scheduler found no room
            wanted = ", ".join(f"Insufficient {k}" for k in requests or {})
            body["status"]["conditions"] = [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": f"0/1 nodes are available: {wanted or 'none fits'}.",
                }
            ]
        return str(self.store.create("pods", body, namespace)["metadata"]["uid"])

    def events(self, reason: str | None = None) -> list[Body]:
        """The events posted (with `reason`, if given), oldest first."""
        found = [e for e in self.store.list("events") if reason in (None, e.get("reason"))]
        return sorted(found, key=lambda e: int(e["metadata"]["resourceVersion"]))


def as_kube(cluster: InMemoryCluster) -> Kube:
    """The cluster as the seam's type (mypy checks here that every area conforms)."""
    return cluster
