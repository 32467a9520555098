"""Kueue Workloads read as the planner's pending Workloads, and migplan's AdmissionChecks."""

from __future__ import annotations

from migplan.operator.kueue.workloads import migplan_checks, pending_workloads, waiting_check
from migplan.planner.api.inventory import ClaimRequest


def check(name: str, *, controller: str = "migplan.io/partition", plan: str | None = "pool"):
    spec: dict = {"controllerName": controller}
    if plan is not None:
        spec["parameters"] = {"apiGroup": "migplan.io", "kind": "GPUPartitionPlan", "name": plan}
    return {"metadata": {"name": name}, "spec": spec}


def workload(
    name: str,
    *,
    limits: dict | None = None,
    count: int = 2,
    conditions: tuple[str, ...] = (),
    checks: dict[str, str] | None = None,
    queue: str = "team",
    active: bool = True,
    admitted_to: str | None = None,
) -> dict:
    container = {"name": "main", "resources": {"limits": limits or {"nvidia.com/mig-2g.20gb": "1"}}}
    status: dict = {
        "conditions": [{"type": c, "status": "True"} for c in conditions],
        "admissionChecks": [{"name": n, "state": s} for n, s in (checks or {}).items()],
    }
    if admitted_to:
        status["admission"] = {"clusterQueue": admitted_to}
    return {
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "active": active,
            "queueName": queue,
            "podSets": [
                {"name": "main", "count": count, "template": {"spec": {"containers": [container]}}}
            ],
        },
        "status": status,
    }


def test_only_checks_of_migplans_controller_and_the_plan_they_name() -> None:
    found = migplan_checks(
        [
            check("ours"),
            check("provisioning", controller="kueue.x-k8s.io/provisioning-request"),
            check("unnamed", plan=None),
        ]
    )
    assert found == {"ours": "pool", "unnamed": ""}


def test_a_workload_waits_on_the_check_once_quota_is_reserved() -> None:
    checks = {"ours": "pool"}
    waiting = workload("w", conditions=("QuotaReserved",), checks={"ours": "Pending"})
    assert waiting_check(waiting, checks) == "ours"
    assert waiting_check(workload("w", checks={"ours": "Pending"}), checks) is None
    ready = workload("w", conditions=("QuotaReserved",), checks={"ours": "Ready"})
    assert waiting_check(ready, checks) is None
    admitted = workload("w", conditions=("QuotaReserved", "Admitted"), checks={"ours": "Pending"})
    assert waiting_check(admitted, checks) is None


def test_pending_workloads_with_their_pod_sets_and_queues() -> None:
    found = pending_workloads(
        [
            workload(
                "reserved",
                conditions=("QuotaReserved",),
                checks={"ours": "Pending"},
                admitted_to="gpu-cq",
                limits={"nvidia.com/mig-1g.10gb": "2", "cpu": "4"},
            ),
            workload("queued", count=3),
            workload("admitted", conditions=("QuotaReserved", "Admitted")),
            workload("finished", conditions=("Finished",)),
            workload("inactive", active=False),
            workload("cpu-only", limits={"cpu": "1"}),
        ],
        checks={"ours": "pool"},
        local_queues={("ml", "team"): "gpu-cq"},
    )
    assert [(w.name, w.cluster_queue, w.quota_reserved, w.check_plan) for w in found] == [
        ("queued", "gpu-cq", False, ""),
        ("reserved", "gpu-cq", True, "pool"),
    ]
    (pod_set,) = found[1].pod_sets
    assert (pod_set.count, pod_set.requests) == (2, {"nvidia.com/mig-1g.10gb": 2})


def test_dra_claim_templates_of_a_pod_set_are_read() -> None:
    asked = []

    def template_claims(namespace, spec, where):
        asked.append((namespace, where))
        return [ClaimRequest(claim="gpu", count=1, profiles=("1g.10gb", "2g.20gb"))]

    (found,) = pending_workloads(
        [workload("w", limits={"cpu": "1"})],
        checks={},
        local_queues={},
        template_claims=template_claims,
    )
    assert found.pod_sets[0].claims[0].profiles == ("1g.10gb", "2g.20gb")
    assert asked == [("ml", "workload ml/w pod set main")]


def test_a_workload_out_of_bounds_is_skipped_and_the_others_are_read() -> None:
    skipped: list = []
    found = pending_workloads(
        [workload("huge", count=1025), workload("fine", count=2)],
        checks={},
        local_queues={("ml", "team"): "gpu-cq"},
        skipped=skipped,
    )
    assert [w.name for w in found] == ["fine"]
    (s,) = skipped
    assert (s.kind, s.namespace, s.name) == ("Workload", "ml", "huge")
    assert s.why == "count: Input should be less than or equal to 1024"
    assert s.note() == f"Workload ml/huge skipped: {s.why}"
