"""Kueue's objects (kueue.x-k8s.io): Workloads, AdmissionChecks, LocalQueues."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from migplan.operator.kube.discovery import group_served

KUEUE_GROUP = "kueue.x-k8s.io"

KUEUE_VERSION = "v1beta2"
"""Kueue's storage version since v0.15 (v1beta1 is still served)."""


@dataclass(frozen=True)
class Kueue:
    """Calls on kueue.x-k8s.io objects."""

    api: client.ApiClient

    def served(self) -> bool:
        """Whether Kueue's CRDs are installed (kueue.x-k8s.io/v1beta2 served)."""
        return group_served(self.api, group=KUEUE_GROUP, version=KUEUE_VERSION)

    def list_objects(self, *, plural: str) -> list[dict[str, Any]]:
        """Every Kueue object of a kind (workloads, admissionchecks, localqueues), all
        namespaces, as plain dictionaries."""
        found = client.CustomObjectsApi(self.api).list_cluster_custom_object(
            KUEUE_GROUP, KUEUE_VERSION, plural
        )
        return list(cast(dict[str, Any], found)["items"])

    def patch_admission_check_status(self, *, name: str, conditions: list[dict[str, Any]]) -> None:
        """Replace an AdmissionCheck's status conditions (Kueue keeps a ClusterQueue inactive
        until the check's controller says Active)."""
        client.CustomObjectsApi(self.api).patch_cluster_custom_object_status(
            KUEUE_GROUP,
            KUEUE_VERSION,
            "admissionchecks",
            name,
            {"status": {"conditions": conditions}},
        )

    def patch_workload_checks(
        self,
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
            client.CustomObjectsApi(self.api).patch_namespaced_custom_object_status(
                KUEUE_GROUP, KUEUE_VERSION, namespace, "workloads", name, body
            )
        except ApiException as exc:
            if exc.status in (404, 409):
                return False
            raise
        return True
