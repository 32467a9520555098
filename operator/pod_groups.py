"""Gangs from the cluster: the PodGroups whose pods are scheduled all or nothing, and which
pod belongs to which, for the planner's inventory (`Inventory.gangs`, `PendingPod.gang`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client.exceptions import ApiException

from migplan.operator.kube.gangs import GangApi
from migplan.operator.kube.seam import Kube
from migplan.planner.api.inventory import Gang

VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
COSCHEDULING_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def least_members(kind: GangApi, group: dict[str, Any]) -> int | None:
    """How many pods of `group` must be scheduled together; None where it is no gang (a
    Kubernetes PodGroup with the basic policy)."""
    spec = group.get("spec") or {}
    if kind is GangApi.POD_GROUP:
        gang = (spec.get("schedulingPolicy") or {}).get("gang")
        return None if gang is None else int(gang.get("minCount", 0))
    return int(spec.get("minMember", 0))


def group_of(kind: GangApi, pod: Any) -> str:
    """The PodGroup of `kind` that `pod` joins (empty: none)."""
    meta = pod.metadata
    if kind is GangApi.POD_GROUP:
        joined = getattr(pod.spec, "scheduling_group", None)
        return str(getattr(joined, "pod_group_name", "") or "")
    if kind is GangApi.VOLCANO:
        return str((meta.annotations or {}).get(VOLCANO_GROUP_ANNOTATION, ""))
    return str((meta.labels or {}).get(COSCHEDULING_GROUP_LABEL, ""))


@dataclass
class GangReading:
    """The gangs of the served PodGroup APIs, and the gang each pod joins."""

    gangs: dict[tuple[str, str], Gang] = field(default_factory=dict)
    kinds: list[GangApi] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @classmethod
    def read(cls, api: Kube) -> GangReading:
        """Every gang PodGroup of every served API, with its pods already scheduled."""
        reading = cls()
        for kind in api.gangs.served():
            try:
                groups = api.gangs.list_pod_groups(kind=kind)
            except ApiException as exc:
                if exc.status != 403:
                    raise
                group, version = kind.group_version
                reading.notes.append(
                    f"{kind.value}s ({group}/{version}) are not read: listing podgroups is "
                    "forbidden (RBAC); their pods count one by one"
                )
                continue
            reading.kinds.append(kind)
            for found in groups:
                reading._add(kind, found)
        namespaces = sorted({namespace for namespace, _ in reading.gangs})
        for namespace in namespaces:
            reading._count_scheduled(api.core.list_pods(namespace=namespace, label_selector=""))
        return reading

    def _add(self, kind: GangApi, group: dict[str, Any]) -> None:
        meta = group["metadata"]
        key = (str(meta["namespace"]), str(meta["name"]))
        least = least_members(kind, group)
        if least is None:
            return
        if key in self.gangs:
            self.notes.append(
                f"{kind.value} {key[0]}/{key[1]}: a {self.gangs[key].kind} of that name is "
                "read already; its pods count as that one's"
            )
            return
        self.gangs[key] = Gang(namespace=key[0], name=key[1], kind=kind.value, min_count=least)

    def _count_scheduled(self, pods: Iterable[Any]) -> None:
        """Pods of a gang already bound to a node (and not finished) count towards it."""
        for pod in pods:
            name = self.gang_of(pod)
            done = (pod.status.phase if pod.status else "") in ("Succeeded", "Failed")
            if name and pod.spec.node_name and not done:
                key = (pod.metadata.namespace, name)
                gang = self.gangs[key]
                self.gangs[key] = gang.model_copy(update={"scheduled": gang.scheduled + 1})

    def gang_of(self, pod: Any) -> str:
        """The gang (read here) `pod` joins, by name in its namespace; empty for none."""
        for kind in self.kinds:
            name = group_of(kind, pod)
            gang = self.gangs.get((pod.metadata.namespace, name)) if name else None
            if gang is not None and gang.kind == kind.value:
                return name
        return ""
