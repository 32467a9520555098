"""migplan as a Kueue AdmissionCheck controller (`controllerName: migplan.io/partition`).

Kueue reserves quota for a Workload, then waits on its AdmissionChecks. For each check
migplan manages, the Workload's pod sets become demand of the GPUPartitionPlan the check's
parameters name; the plan is planned and rolled out as usual, and the check says:
- `Ready` once the plan met the Workload and its rollout finished (the instances exist and
  the device plugin advertises them), so Kueue admits it and the pods schedule;
- `Retry` with the planner's reason when the plan could not meet it (Kueue releases the
  quota and requeues the Workload; the next plan tries again);
- `Rejected` when no GPU the plan covers offers a profile it asks for (it never could);
- `Pending` meanwhile, its message saying what is under way.

The verdicts come from what planning recorded in the plan's status (`status.kueue`, one entry
per Workload: met or not, and why), so a tick needs no planning to answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import structlog

from migplan.operator.conditions import now_stamp
from migplan.operator.kube.seam import Kube
from migplan.operator.kueue.workloads import migplan_checks, waiting_check
from migplan.planner.api.inventory import PendingWorkload
from migplan.planner.api.spec import PlanPhase
from migplan.planner.demand import pod_parts, workload_gang
from migplan.planner.plan import Plan

log = structlog.get_logger("migplan.operator")

UNDER_WAY = (PlanPhase.PENDING, PlanPhase.PROGRESSING, PlanPhase.WAITING)
"""Plan phases on the way to Ready (any other, such as Degraded or a dry run's Planned, will
not get there by itself)."""
RETRY_AFTER_SECONDS = 30
"""How long Kueue waits before requeueing a Workload migplan could not meet."""


def workload_key(namespace: str, name: str) -> str:
    """How a Workload is named in demand results and `status.kueue`."""
    return f"{namespace}/{name}"


def planned_verdicts(
    plan: Plan, *, workloads: Sequence[PendingWorkload], name: str, offered: set[str]
) -> dict[str, dict[str, Any]]:
    """Per Workload waiting on a check that names plan `name`: whether `plan` meets it, and
    why not, for `status.kueue`. `offered` are the profiles of the GPUs the plan covers."""
    verdicts: dict[str, dict[str, Any]] = {}
    for workload in workloads:
        if workload.check_plan != name:
            continue
        key = workload_key(workload.namespace, workload.name)
        missing = [
            part.text
            for pod_set in workload.pod_sets
            for part in pod_parts(pod_set)
            if not set(part.profiles) & offered
        ]
        if missing:
            verdicts[key] = {
                "met": False,
                "rejected": True,
                "reason": f"no GPU this plan covers offers {', '.join(missing)}",
            }
            continue
        gang = next((g for g in plan.gangs if g.name == workload_gang(key)), None)
        if gang is not None:
            # All or nothing, with the pod sets' minCount: Kueue admits the Workload whole.
            verdicts[key] = {"met": gang.admitted, "reason": gang.reason or ""}
            continue
        results = [r for r in plan.demand if key in r.pods]
        short = [r for r in results if r.met < r.requested]
        verdicts[key] = {
            "met": bool(results) and not short,
            "reason": "; ".join(r.reason or f"{r.label}: {r.met}/{r.requested}" for r in short),
        }
    return verdicts


def verdict(record: Mapping[str, Any] | None, *, phase: str | None) -> tuple[str, str] | None:
    """(state, message) for a Workload, from its `status.kueue` record and the plan's phase;
    None while the plan has not planned for it yet."""
    if record is None:
        return None
    if record.get("rejected"):
        return "Rejected", str(record.get("reason", ""))
    if not record.get("met"):
        return "Retry", f"migplan cannot meet it now: {record.get('reason', '')}"[:1024]
    if phase == PlanPhase.READY:
        return "Ready", "the MIG instances it needs exist and are advertised"
    if phase in UNDER_WAY:
        return "Pending", f"migplan is reshaping GPUs for it (plan phase {phase})"
    return "Retry", f"the plan met it but is {phase}, so its instances may not exist"


Waiting = list[tuple[Mapping[str, Any], str]]
"""(Workload, check) pairs: Workloads waiting on a migplan check, and that check's name."""


def waiting_for(api: Kube, *, plan: str) -> Waiting:
    """(Workload, check) for each Workload waiting on a migplan check that names `plan`:
    read once per tick, for `needs_planning` and `update_checks` both."""
    managed = migplan_checks(api.kueue.list_objects(plural="admissionchecks"))
    checks = {name: named for name, named in managed.items() if named == plan}
    if not checks:
        return []
    return [
        (workload, check)
        for workload in api.kueue.list_objects(plural="workloads")
        if (check := waiting_check(workload, checks)) is not None
    ]


def needs_planning(
    waiting: Waiting, *, records: Mapping[str, Mapping[str, Any]], retry_due: bool
) -> bool:
    """Whether a `waiting` Workload is one the plan's last planning did not consider (no
    record), or did not meet and, `retry_due`, may be tried again."""
    for workload, _ in waiting:
        meta = workload["metadata"]
        record = records.get(workload_key(meta["namespace"], meta["name"]))
        if record is None:
            return True
        if retry_due and not record.get("met") and not record.get("rejected"):
            return True
    return False


def update_checks(
    api: Kube, waiting: Waiting, *, phase: str | None, records: Mapping[str, Mapping[str, Any]]
) -> dict[str, str]:
    """Set the state of migplan's checks on the `waiting` Workloads; returns the state set
    per Workload (for logs and tests)."""
    done: dict[str, str] = {}
    for workload, check in waiting:
        meta = workload["metadata"]
        key = workload_key(meta["namespace"], meta["name"])
        found = verdict(records.get(key), phase=phase)
        if found is None:
            continue
        state, message = found
        if _set_state(api, workload, check=check, state=state, message=message):
            done[key] = state
    return done


def _set_state(
    api: Kube, workload: Mapping[str, Any], *, check: str, state: str, message: str
) -> bool:
    """Write the check's state on `workload` where it changes; True when written."""
    states = list((workload.get("status") or {}).get("admissionChecks") or [])
    updated = []
    changed = False
    for entry in states:
        if entry.get("name") == check and (entry.get("state"), entry.get("message")) != (
            state,
            message,
        ):
            new = {**entry, "state": state, "message": message}
            if entry.get("state") != state:
                new["lastTransitionTime"] = now_stamp()
            if state == "Retry":
                new["requeueAfterSeconds"] = RETRY_AFTER_SECONDS
            updated.append(new)
            changed = True
        else:
            updated.append(entry)
    if not changed:
        return False
    meta = workload["metadata"]
    written = api.kueue.patch_workload_checks(
        namespace=meta["namespace"],
        name=meta["name"],
        checks=updated,
        resource_version=str(meta.get("resourceVersion", "")),
    )
    if written:
        log.info(
            "admission check",
            workload=workload_key(meta["namespace"], meta["name"]),
            check=check,
            state=state,
            message=message,
        )
    return written


def activate_checks(api: Kube, *, plans: Iterable[str]) -> None:
    """Mark migplan's AdmissionChecks Active where they name an existing GPUPartitionPlan
    (Kueue keeps a ClusterQueue with an inactive check from admitting anything), inactive
    with the reason otherwise; written only when it changes."""
    existing = set(plans)
    for check in api.kueue.list_objects(plural="admissionchecks"):
        name = str(check["metadata"]["name"])
        named = migplan_checks([check]).get(name)
        if named is None:
            continue
        if not named:
            ok, reason, message = (
                False,
                "BadParameters",
                "spec.parameters must name a GPUPartitionPlan (apiGroup migplan.io)",
            )
        elif named not in existing:
            ok, reason, message = False, "PlanNotFound", f"GPUPartitionPlan {named} does not exist"
        else:
            ok, reason, message = True, "Active", f"migplan reshapes MIG for plan {named}"
        status = "True" if ok else "False"
        conditions = (check.get("status") or {}).get("conditions") or []
        current = next((c for c in conditions if c.get("type") == "Active"), None)
        if current and (current.get("status"), current.get("reason")) == (status, reason):
            continue
        active = {
            "type": "Active",
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": now_stamp(),
        }
        others = [c for c in conditions if c.get("type") != "Active"]
        api.kueue.patch_admission_check_status(name=name, conditions=[*others, active])


def offered_profiles(models: Iterable[Any]) -> set[str]:
    """Every profile the GPU models offer (catalog GpuModels)."""
    return {p.name for model in models for p in model.profiles}
