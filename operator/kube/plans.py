"""migplan's own objects: GPUPartitionPlans and NodePartitions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from migplan.operator.kube.bodies import NodePartitionBody, PlanBody
from migplan.operator.kube.retry import retrying
from migplan.planner.api.group import GROUP, NODE_PARTITIONS, PLANS, VERSION
from migplan.planner.status import PlanStatus

CREATABLE_METADATA = frozenset({"name", "labels", "annotations", "ownerReferences"})
"""Metadata a client sets when it creates an object; the server sets the rest."""


@dataclass(frozen=True)
class Plans:
    """Calls on GPUPartitionPlans and NodePartitions (migplan.io)."""

    api: client.ApiClient

    def _get(self, plural: str, name: str) -> dict[str, Any] | None:
        """migplan's object `plural`/`name`, or None if there is none."""
        try:
            found = client.CustomObjectsApi(self.api).get_cluster_custom_object(
                GROUP, VERSION, plural, name
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return cast(dict[str, Any], found)

    def get_plan(self, *, name: str) -> PlanBody | None:
        """The GPUPartitionPlan `name`, or None if it is gone."""
        return cast(PlanBody | None, self._get(PLANS, name))

    def list_plans(self) -> list[PlanBody]:
        """Every GPUPartitionPlan."""
        found = client.CustomObjectsApi(self.api).list_cluster_custom_object(GROUP, VERSION, PLANS)
        return cast(list[PlanBody], cast(dict[str, Any], found)["items"])

    @retrying
    def patch_plan_status(self, *, name: str, status: dict[str, Any]) -> None:
        """Merge `status` into the plan's status (a None value removes that field). Checked
        against PlanStatus first: a key or value the CRD does not declare would be pruned or
        refused by the API server, so it fails here, where the writer is on the stack."""
        PlanStatus.model_validate(status)
        client.CustomObjectsApi(self.api).patch_cluster_custom_object_status(
            GROUP, VERSION, PLANS, name, {"status": status}
        )

    @retrying
    def annotate_plan(self, *, name: str, annotations: dict[str, str | None]) -> None:
        """Merge `annotations` into the plan's metadata."""
        client.CustomObjectsApi(self.api).patch_cluster_custom_object(
            GROUP, VERSION, PLANS, name, {"metadata": {"annotations": annotations}}
        )

    def get_node_partition(self, *, name: str) -> NodePartitionBody | None:
        """The NodePartition `name`, or None if there is none."""
        return cast(NodePartitionBody | None, self._get(NODE_PARTITIONS, name))

    def list_node_partitions(self, *, label_selector: str | None = None) -> list[NodePartitionBody]:
        """Every NodePartition (those `label_selector` selects, if given)."""
        api = client.CustomObjectsApi(self.api)
        found = (
            api.list_cluster_custom_object(
                GROUP, VERSION, NODE_PARTITIONS, label_selector=label_selector
            )
            if label_selector
            else api.list_cluster_custom_object(GROUP, VERSION, NODE_PARTITIONS)
        )
        return cast(list[NodePartitionBody], cast(dict[str, Any], found)["items"])

    def create_node_partition(self, *, body: dict[str, Any]) -> bool:
        """Create the NodePartition unless one exists; whether it was created."""
        try:
            client.CustomObjectsApi(self.api).create_cluster_custom_object(
                GROUP, VERSION, NODE_PARTITIONS, body
            )
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise
        return True

    @retrying
    def apply_node_partition(self, *, body: dict[str, Any]) -> None:
        """Create the NodePartition, or replace its spec if it exists. `body` may be one read
        from the server: what the server sets in its metadata is left out of the create (with a
        resourceVersion, the API server answers a create with a 500, not AlreadyExists)."""
        objects = client.CustomObjectsApi(self.api)
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
    def annotate_node_partition(
        self, *, name: str, labels: dict[str, str | None], annotations: dict[str, str | None]
    ) -> bool:
        """Merge `labels` and `annotations` into the NodePartition's metadata (a None value
        removes one); False if there is no such NodePartition."""
        try:
            client.CustomObjectsApi(self.api).patch_cluster_custom_object(
                GROUP,
                VERSION,
                NODE_PARTITIONS,
                name,
                {"metadata": {"labels": labels, "annotations": annotations}},
            )
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    @retrying
    def patch_node_partition_status(self, *, name: str, status: dict[str, Any]) -> None:
        """Replace the fields of `status` in the NodePartition's status subresource."""
        client.CustomObjectsApi(self.api).patch_cluster_custom_object_status(
            GROUP, VERSION, NODE_PARTITIONS, name, {"status": status}
        )

    def watch_node_partition(
        self, *, name: str, timeout: int, since: str | None = None
    ) -> list[str]:
        """Block until the NodePartition `name` changes after resourceVersion `since` or
        `timeout` seconds pass; the event types seen (empty on a time-out, `EXPIRED` when
        `since` is older than the server keeps: read again). Without `since` the watch
        begins with the object as it is (an `ADDED` at once when it exists)."""
        stream = watch.Watch()
        seen = []
        try:
            for event in stream.stream(
                client.CustomObjectsApi(self.api).list_cluster_custom_object,
                GROUP,
                VERSION,
                NODE_PARTITIONS,
                field_selector=f"metadata.name={name}",
                timeout_seconds=timeout,
                **({"resource_version": since} if since else {}),
            ):
                seen.append(str(event["type"]))
                stream.stop()
        except ApiException as exc:
            if exc.status != 410:
                raise
            return ["EXPIRED"]
        return seen
