"""Dynamic Resource Allocation objects (resource.k8s.io): slices, claims, device classes
and DeviceTaintRules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from migplan.operator.kube.discovery import group_served
from migplan.operator.kube.retry import retrying

DRA_GROUP = "resource.k8s.io"

DRA_VERSION = "v1"

TAINT_RULES = ("v1beta2", "devicetaintrules")
"""DeviceTaintRule: resource.k8s.io/v1beta2 in Kubernetes 1.36, behind the DRADeviceTaintRules
feature gate (off by default)."""


@dataclass(frozen=True)
class Dra:
    """Calls on resource.k8s.io objects."""

    api: client.ApiClient

    def served(self) -> bool:
        """Whether the API server serves Dynamic Resource Allocation (resource.k8s.io/v1)."""
        return group_served(self.api, group=DRA_GROUP, version=DRA_VERSION)

    def list_objects(
        self, *, plural: str, field_selector: str | None = None
    ) -> list[dict[str, Any]]:
        """Every object of a resource.k8s.io/v1 kind (resourceslices, resourceclaims,
        resourceclaimtemplates, deviceclasses), all namespaces, as plain dictionaries; with
        `field_selector` (`spec.nodeName=<node>` for ResourceSlices) only those it selects."""
        found = client.CustomObjectsApi(self.api).list_cluster_custom_object(
            DRA_GROUP, DRA_VERSION, plural, field_selector=field_selector
        )
        return list(cast(dict[str, Any], found)["items"])

    def taint_rules_served(self) -> bool:
        """Whether the API server serves DeviceTaintRules (resource.k8s.io/v1beta2)."""
        try:
            found = client.CustomObjectsApi(self.api).get_api_resources(DRA_GROUP, TAINT_RULES[0])
        except ApiException as exc:
            if exc.status in (403, 404):
                return False
            raise
        return any(r.name == TAINT_RULES[1] for r in found.resources or [])

    def list_taint_rules(self, *, label_selector: str) -> list[dict[str, Any]]:
        """DeviceTaintRules matching `label_selector`."""
        found = client.CustomObjectsApi(self.api).list_cluster_custom_object(
            DRA_GROUP, TAINT_RULES[0], TAINT_RULES[1], label_selector=label_selector
        )
        return list(cast(dict[str, Any], found)["items"])

    @retrying
    def create_taint_rule(self, *, body: dict[str, Any]) -> None:
        """Create a DeviceTaintRule; one that exists already counts as made."""
        try:
            client.CustomObjectsApi(self.api).create_cluster_custom_object(
                DRA_GROUP, TAINT_RULES[0], TAINT_RULES[1], body
            )
        except ApiException as exc:
            if exc.status != 409:
                raise

    @retrying
    def delete_taint_rule(self, *, name: str) -> None:
        """Delete a DeviceTaintRule; one already gone counts as deleted."""
        try:
            client.CustomObjectsApi(self.api).delete_cluster_custom_object(
                DRA_GROUP, TAINT_RULES[0], TAINT_RULES[1], name
            )
        except ApiException as exc:
            if exc.status != 404:
                raise

    @retrying
    def apply_resource_slice(self, *, body: dict[str, Any]) -> None:
        """Create the ResourceSlice, or replace it where it exists (the simulated DRA plugin)."""
        objects = client.CustomObjectsApi(self.api)
        try:
            objects.create_cluster_custom_object(DRA_GROUP, DRA_VERSION, "resourceslices", body)
        except ApiException as exc:
            if exc.status != 409:
                raise
            objects.replace_cluster_custom_object(
                DRA_GROUP, DRA_VERSION, "resourceslices", body["metadata"]["name"], body
            )
