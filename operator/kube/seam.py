"""The kube seam: what migplan asks of the API server, one small Protocol per API area.

The real calls live in `core`, `plans`, `dra`, `kueue`, `gangs` and `auth` (one class each, composed
by `connect.KubeClient`); `migplan.operator.sim.api_server.InMemoryCluster` is the in-memory
twin unit tests drive (its behaviour is checked against a real API server in
`tests/cluster/test_api_server_twin.py`). Callers take a `Kube` and name the area:
`api.core.get_pod(...)`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from migplan.operator.kube.auth import Identity
from migplan.operator.kube.bodies import NodePartitionBody, PlanBody
from migplan.operator.kube.gangs import GangApi


class CoreApi(Protocol):
    """Nodes, pods, evictions, ConfigMaps, events."""

    def get_node(self, *, name: str) -> Any:
        """The Node `name`."""

    def list_nodes(self, *, label_selector: str) -> list[Any]:
        """Nodes matching `label_selector`."""

    def patch_node(self, *, name: str, body: dict[str, Any]) -> Any:
        """Merge `body` into the Node (spec.unschedulable, annotations); the node after."""

    def patch_node_status(self, *, name: str, status: dict[str, Any]) -> None:
        """Merge `status` into the Node's status (the simulated device plugin's capacity)."""

    def cordon_node(self, *, name: str, annotation: str, owner: str) -> bool:
        """Cordon the node for `owner` unless someone else has; True when it is `owner`'s cordon."""

    def uncordon_node(self, *, name: str, annotation: str, owner: str) -> bool:
        """Uncordon the node if `owner` cordoned it; True when it did."""

    def get_pod(self, *, namespace: str, name: str) -> Any | None:
        """The pod, or None if it is gone."""

    def pods_on_node(self, *, node: str) -> list[Any]:
        """Every pod bound to `node`."""

    def list_pods(
        self, *, namespace: str, label_selector: str, node: str | None = None
    ) -> list[Any]:
        """Pods in `namespace` matching `label_selector` (on `node`, if given)."""

    def pending_pods(self) -> list[Any]:
        """Pods in phase Pending, all namespaces."""

    def delete_pods(self, *, namespace: str, label_selector: str, node: str) -> int:
        """Delete the pods on `node` matching `label_selector` in `namespace`; how many."""

    def create_pod(self, *, namespace: str, body: dict[str, Any]) -> Any:
        """Create the pod (`generateName` names it); the pod as created."""

    def delete_pod(self, *, namespace: str, name: str) -> bool:
        """Delete the pod now (no grace period); False when it was gone."""

    def evict_pod(self, *, namespace: str, name: str, uid: str | None = None) -> str | None:
        """Evict through the Eviction API (PodDisruptionBudgets honoured): None when
        accepted or gone, else why it was refused; PodReplacedError when `uid` no longer
        names the pod."""

    def namespace_labels(self) -> dict[str, dict[str, str]]:
        """Namespace name -> its labels."""

    def get_config_map_data(self, *, namespace: str, name: str) -> dict[str, str]:
        """The ConfigMap's data ({} if there is no such ConfigMap)."""

    def edit_config_map(
        self,
        *,
        namespace: str,
        name: str,
        edit: Callable[[dict[str, str]], dict[str, str]],
    ) -> None:
        """Read-modify-write the ConfigMap's data (created if missing), again on a conflict."""

    def create_event(self, *, obj: Mapping[str, Any], kind: str, reason: str, message: str) -> str:
        """Post an event about `obj` (events of cluster-scoped objects live in `default`)."""

    def bump_event(self, *, namespace: str, name: str, count: int) -> bool:
        """Set an event's count and last timestamp; False when it is gone."""

    def list_cluster_policies(self) -> list[dict[str, Any]] | None:
        """The GPU Operator's ClusterPolicies; None when the kind is not served or readable."""

    def ensure_cluster_object(
        self, *, group: str, version: str, plural: str, body: dict[str, Any]
    ) -> None:
        """Create the cluster-scoped custom object unless it exists (kopf's peering object)."""


class PlansApi(Protocol):
    """GPUPartitionPlans and NodePartitions."""

    def get_plan(self, *, name: str) -> PlanBody | None:
        """The GPUPartitionPlan `name`, or None if it is gone."""

    def list_plans(self) -> list[PlanBody]:
        """Every GPUPartitionPlan."""

    def patch_plan_status(self, *, name: str, status: dict[str, Any]) -> None:
        """Merge `status` into the plan's status (None removes a field), checked
        against PlanStatus."""

    def annotate_plan(self, *, name: str, annotations: dict[str, str | None]) -> None:
        """Merge `annotations` into the plan's metadata."""

    def get_node_partition(self, *, name: str) -> NodePartitionBody | None:
        """The NodePartition `name`, or None if there is none."""

    def list_node_partitions(self, *, label_selector: str | None = None) -> list[NodePartitionBody]:
        """Every NodePartition (those `label_selector` selects, if given)."""

    def create_node_partition(self, *, body: dict[str, Any]) -> bool:
        """Create the NodePartition unless one exists; whether it was created."""

    def apply_node_partition(self, *, body: dict[str, Any]) -> None:
        """Create the NodePartition, or replace its spec if it exists."""

    def annotate_node_partition(
        self, *, name: str, labels: dict[str, str | None], annotations: dict[str, str | None]
    ) -> bool:
        """Merge `labels` and `annotations` into the NodePartition's metadata (None removes
        one); False if there is no such NodePartition."""

    def patch_node_partition_status(self, *, name: str, status: dict[str, Any]) -> None:
        """Replace the fields of `status` in the NodePartition's status subresource."""

    def watch_node_partition(
        self, *, name: str, timeout: int, since: str | None = None
    ) -> list[str]:
        """Block until the NodePartition changes after resourceVersion `since` or `timeout`
        seconds pass; the event types seen."""


class DraApi(Protocol):
    """resource.k8s.io: slices, claims, device classes, DeviceTaintRules."""

    def served(self) -> bool:
        """Whether the API server serves Dynamic Resource Allocation (resource.k8s.io/v1)."""

    def list_objects(
        self, *, plural: str, field_selector: str | None = None
    ) -> list[dict[str, Any]]:
        """Every object of a resource.k8s.io/v1 kind, as plain dictionaries."""

    def taint_rules_served(self) -> bool:
        """Whether the API server serves DeviceTaintRules (resource.k8s.io/v1beta2)."""

    def list_taint_rules(self, *, label_selector: str) -> list[dict[str, Any]]:
        """DeviceTaintRules matching `label_selector`."""

    def create_taint_rule(self, *, body: dict[str, Any]) -> None:
        """Create a DeviceTaintRule; one that exists already counts as made."""

    def delete_taint_rule(self, *, name: str) -> None:
        """Delete a DeviceTaintRule; one already gone counts as deleted."""

    def apply_resource_slice(self, *, body: dict[str, Any]) -> None:
        """Create the ResourceSlice, or replace it where it exists (the simulated DRA plugin)."""


class KueueApi(Protocol):
    """Kueue's Workloads and AdmissionChecks."""

    def served(self) -> bool:
        """Whether Kueue's CRDs are installed (kueue.x-k8s.io/v1beta2 served)."""

    def list_objects(self, *, plural: str) -> list[dict[str, Any]]:
        """Every Kueue object of a kind, all namespaces, as plain dictionaries."""

    def patch_admission_check_status(self, *, name: str, conditions: list[dict[str, Any]]) -> None:
        """Replace an AdmissionCheck's status conditions."""

    def patch_workload_checks(
        self,
        *,
        namespace: str,
        name: str,
        checks: list[dict[str, Any]],
        resource_version: str,
    ) -> bool:
        """Replace a Workload's status.admissionChecks at `resource_version`; False on
        a conflict."""


class GangsApi(Protocol):
    """PodGroups scheduled all or nothing (Kubernetes', Volcano's, coscheduling's)."""

    def served(self) -> list[GangApi]:
        """The PodGroup APIs the API server serves."""

    def list_pod_groups(self, *, kind: GangApi) -> list[dict[str, Any]]:
        """Every PodGroup of `kind`, all namespaces, as plain dictionaries."""


class AuthApi(Protocol):
    """TokenReview and SubjectAccessReview."""

    def review_token(self, *, token: str) -> Identity | None:
        """The identity behind `token` (TokenReview), or None when it is not accepted."""

    def may_access_path(self, *, who: Identity, verb: str, path: str) -> bool:
        """Whether RBAC lets `who` do `verb` on the non-resource URL `path`."""


class Kube(Protocol):
    """Every API area migplan uses."""

    @property
    def core(self) -> CoreApi: ...

    @property
    def plans(self) -> PlansApi: ...

    @property
    def dra(self) -> DraApi: ...

    @property
    def kueue(self) -> KueueApi: ...

    @property
    def gangs(self) -> GangsApi: ...

    @property
    def auth(self) -> AuthApi: ...
