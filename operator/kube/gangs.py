"""Pod groups scheduled all or nothing: Kubernetes' own PodGroup (scheduling.k8s.io),
Volcano's (scheduling.volcano.sh) and the scheduler-plugins coscheduling one
(scheduling.x-k8s.io), each read where its API is served."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, cast

from kubernetes import client

from migplan.operator.kube.discovery import served_versions


class GangApi(StrEnum):
    """A PodGroup API, named as the planner's inventory names its gangs' kind."""

    POD_GROUP = "PodGroup"
    """scheduling.k8s.io/v1alpha2 (Kubernetes 1.36; the GenericWorkload feature gate):
    `spec.schedulingPolicy.gang.minCount`, pods join by `spec.schedulingGroup.podGroupName`."""
    VOLCANO = "VolcanoPodGroup"
    """scheduling.volcano.sh/v1beta1: `spec.minMember`, pods join by the annotation
    `scheduling.k8s.io/group-name`."""
    COSCHEDULING = "CoschedulingPodGroup"
    """scheduling.x-k8s.io/v1alpha1 (scheduler-plugins): `spec.minMember`, pods join by the
    label `scheduling.x-k8s.io/pod-group`."""

    @property
    def group_version(self) -> tuple[str, str]:
        """(API group, version) the kind is served at."""
        return _SERVED_AT[self]


_SERVED_AT = {
    GangApi.POD_GROUP: ("scheduling.k8s.io", "v1alpha2"),
    GangApi.VOLCANO: ("scheduling.volcano.sh", "v1beta1"),
    GangApi.COSCHEDULING: ("scheduling.x-k8s.io", "v1alpha1"),
}


@dataclass(frozen=True)
class Gangs:
    """Calls on the PodGroup APIs."""

    api: client.ApiClient

    def served(self) -> list[GangApi]:
        """The PodGroup APIs the API server serves (one discovery call); none where
        discovery is refused."""
        served = served_versions(self.api)
        return [kind for kind in GangApi if kind.group_version in served]

    def list_pod_groups(self, *, kind: GangApi) -> list[dict[str, Any]]:
        """Every PodGroup of `kind`, all namespaces, as plain dictionaries."""
        group, version = kind.group_version
        found = client.CustomObjectsApi(self.api).list_cluster_custom_object(
            group, version, "podgroups"
        )
        return list(cast(dict[str, Any], found)["items"])
