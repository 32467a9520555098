"""Kueue's Workloads as the planner's PendingWorkloads.

Kueue keeps a Job suspended (no pods exist) or gates bare pods until it admits their
Workload, so the Workload's pod sets are the only record of what they will need. A Workload
counts while it is not admitted: under a migplan AdmissionCheck once quota is reserved (the
check names the GPUPartitionPlan to reshape), or ahead of admission when a plan's
`fromKueue.clusterQueues` names its ClusterQueue.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any

from migplan.operator.kube.quantities import device_count
from migplan.operator.kube.seam import Kube
from migplan.operator.skipped import Skipped, guarded
from migplan.planner.api.group import GROUP
from migplan.planner.api.group import PLAN_KIND as GPU_PARTITION_PLAN
from migplan.planner.api.inventory import ClaimRequest, PendingWorkload, WorkloadPodSet
from migplan.planner.hardware.resources import is_mig_resource

CONTROLLER = "migplan.io/partition"
"""The controllerName of the AdmissionChecks migplan manages."""
PLAN_KIND = (GROUP, GPU_PARTITION_PLAN)

TemplateClaims = Callable[[str, Mapping[str, Any], str], list[ClaimRequest]]
"""(namespace, a pod template's spec, where) -> what its DRA claim templates ask for."""


def migplan_checks(checks: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """AdmissionChecks migplan manages: name -> the GPUPartitionPlan its parameters name
    (empty where they name none, which the check's status then says)."""
    found = {}
    for check in checks:
        spec = check.get("spec") or {}
        if spec.get("controllerName") != CONTROLLER:
            continue
        params = spec.get("parameters") or {}
        named = (params.get("apiGroup"), params.get("kind")) == PLAN_KIND
        found[str(check["metadata"]["name"])] = str(params.get("name", "")) if named else ""
    return found


def _condition(workload: Mapping[str, Any], kind: str) -> bool:
    conditions = (workload.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def waiting_check(workload: Mapping[str, Any], checks: Mapping[str, str]) -> str | None:
    """The migplan AdmissionCheck `workload` waits on (quota reserved, state Pending)."""
    if not _condition(workload, "QuotaReserved") or _condition(workload, "Admitted"):
        return None
    for state in (workload.get("status") or {}).get("admissionChecks") or []:
        if state.get("name") in checks and state.get("state") == "Pending":
            return str(state["name"])
    return None


def _requests(template: Mapping[str, Any]) -> dict[str, int]:
    """MIG extended resources one pod of the template asks for (limits over requests)."""
    wanted: dict[str, int] = {}
    for container in (template.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        merged = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
        for key, value in merged.items():
            count = device_count(value)
            if is_mig_resource(key) and count is not None:
                wanted[key] = wanted.get(key, 0) + count
    return wanted


def pending_workloads(
    workloads: Iterable[Mapping[str, Any]],
    *,
    checks: Mapping[str, str],
    local_queues: Mapping[tuple[str, str], str],
    template_claims: TemplateClaims | None = None,
    skipped: list[Skipped] | None = None,
) -> list[PendingWorkload]:
    """The Workloads not admitted yet, active and not finished, with what their pods need.

    `checks` are migplan's AdmissionChecks (`migplan_checks`), `local_queues` maps
    (namespace, LocalQueue) to its ClusterQueue; `template_claims` reads DRA claim templates
    a pod set references (None where the cluster serves no DRA). A Workload that breaks the
    planner's bounds is left out and recorded in `skipped`.
    """
    found = []
    for workload in workloads:
        meta, spec = workload["metadata"], workload.get("spec") or {}
        if spec.get("active") is False or _condition(workload, "Admitted"):
            continue
        if _condition(workload, "Finished"):
            continue
        read = guarded(
            partial(
                _pending,
                workload,
                checks=checks,
                local_queues=local_queues,
                template_claims=template_claims,
            ),
            skipped=skipped if skipped is not None else [],
            api_version=str(workload.get("apiVersion", "kueue.x-k8s.io/v1beta1")),
            kind="Workload",
            namespace=str(meta.get("namespace", "")),
            name=str(meta.get("name", "")),
            uid=meta.get("uid"),
        )
        if read is not None:
            found.append(read)
    return sorted(found, key=lambda w: (w.namespace, w.name))


def _pending(
    workload: Mapping[str, Any],
    *,
    checks: Mapping[str, str],
    local_queues: Mapping[tuple[str, str], str],
    template_claims: TemplateClaims | None,
) -> PendingWorkload | None:
    """What one Workload's pods will need (None: nothing MIG); raises ValidationError when
    it breaks the planner's bounds."""
    meta, spec = workload["metadata"], workload.get("spec") or {}
    namespace = str(meta["namespace"])
    admission = (workload.get("status") or {}).get("admission") or {}
    queue = admission.get("clusterQueue") or local_queues.get(
        (namespace, str(spec.get("queueName", ""))), ""
    )
    check = waiting_check(workload, checks)
    # With partial admission Kueue reserves quota for fewer pods than the pod set asks for.
    assigned = {
        str(a.get("name", "")): int(a["count"])
        for a in admission.get("podSetAssignments") or []
        if a.get("count") is not None
    }
    pod_sets = []
    for pod_set in spec.get("podSets") or []:
        template = pod_set.get("template") or {}
        claims: list[ClaimRequest] = []
        if template_claims is not None:
            where = f"workload {namespace}/{meta['name']} pod set {pod_set.get('name')}"
            claims = template_claims(namespace, template.get("spec") or {}, where)
        requests = _requests(template)
        if requests or claims:
            name = str(pod_set.get("name", "main"))
            count = assigned.get(name, int(pod_set.get("count", 1)))
            least = pod_set.get("minCount")
            pod_sets.append(
                WorkloadPodSet(
                    name=name,
                    count=count,
                    min_count=None if least is None else min(int(least), count),
                    requests=requests,
                    claims=tuple(claims),
                )
            )
    if not pod_sets:
        return None
    return PendingWorkload(
        namespace=namespace,
        name=str(meta["name"]),
        cluster_queue=str(queue),
        quota_reserved=_condition(workload, "QuotaReserved"),
        check_plan=checks.get(check, "") if check else "",
        pod_sets=tuple(pod_sets),
    )


def read_pending(
    api: Kube,
    *,
    template_claims: TemplateClaims | None,
    skipped: list[Skipped],
) -> list[PendingWorkload]:
    """Kueue's Workloads waiting for admission, read from the cluster; none where Kueue is
    not installed (`template_claims` reads the DRA claims of a pod template, where DRA is)."""
    if not api.kueue.served():
        return []
    queues = {
        (q["metadata"]["namespace"], q["metadata"]["name"]): str(
            (q.get("spec") or {}).get("clusterQueue", "")
        )
        for q in api.kueue.list_objects(plural="localqueues")
    }
    return pending_workloads(
        api.kueue.list_objects(plural="workloads"),
        checks=migplan_checks(api.kueue.list_objects(plural="admissionchecks")),
        local_queues=queues,
        template_claims=template_claims,
        skipped=skipped,
    )
