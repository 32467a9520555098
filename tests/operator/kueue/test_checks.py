"""What migplan's AdmissionCheck says to each Workload, from the plan it made."""

from __future__ import annotations

from migplan.operator.kueue.checks import offered_profiles, planned_verdicts, verdict
from migplan.planner.api.inventory import PendingWorkload, WorkloadPodSet
from migplan.planner.hardware.catalog import default_catalog
from migplan.planner.plan import DemandResult, Plan, PlanSummary, SolverReport

H100 = default_catalog().model("H100-80GB")


def plan_with(*results: DemandResult) -> Plan:
    return Plan(
        input_hash="",
        gpus=(),
        demand=results,
        summary=PlanSummary(
            gpus=0, gpus_changed=0, nodes_touched=0, evictions=0, requested=0, met=0
        ),
        solver=SolverReport(method="cp-sat", status="OPTIMAL"),
    )


def result(who: str, met: int, requested: int = 2, reason: str | None = None) -> DemandResult:
    return DemandResult(
        resource="nvidia.com/mig-2g.20gb",
        profile="2g.20gb",
        kind="free",
        priority=1,
        requested=requested,
        met=met,
        reason=reason,
        pods=(who,),
    )


def waiting(name: str, resource: str = "nvidia.com/mig-2g.20gb", plan: str = "pool"):
    return PendingWorkload(
        namespace="ml",
        name=name,
        quota_reserved=True,
        check_plan=plan,
        pod_sets=(WorkloadPodSet(name="main", count=2, requests={resource: 1}),),
    )


def test_verdicts_per_workload_of_this_plan() -> None:
    plan = plan_with(result("ml/met", 2), result("ml/short", 1, reason="1 x 2g.20gb: no room"))
    records = planned_verdicts(
        plan,
        workloads=[
            waiting("met"),
            waiting("short"),
            waiting("odd", resource="nvidia.com/mig-2g.24gb"),
            waiting("elsewhere", plan="other"),
        ],
        name="pool",
        offered=offered_profiles([H100]),
    )
    assert records == {
        "ml/met": {"met": True, "reason": ""},
        "ml/short": {"met": False, "reason": "1 x 2g.20gb: no room"},
        "ml/odd": {
            "met": False,
            "rejected": True,
            "reason": "no GPU this plan covers offers 1 x 2g.24gb",
        },
    }


def test_states_from_the_record_and_the_plans_phase() -> None:
    assert verdict(None, phase="Ready") is None
    assert verdict({"met": True}, phase="Progressing") == (
        "Pending",
        "migplan is reshaping GPUs for it (plan phase Progressing)",
    )
    assert verdict({"met": True}, phase="Ready")[0] == "Ready"
    assert verdict({"met": True}, phase="WaitingForWindow")[0] == "Pending"
    # A rollout that gave up on a node, or a dry run, will not make the instances.
    assert verdict({"met": True}, phase="Degraded")[0] == "Retry"
    assert verdict({"met": True}, phase="Planned")[0] == "Retry"
    assert verdict({"met": False, "reason": "no room"}, phase="Ready") == (
        "Retry",
        "migplan cannot meet it now: no room",
    )
    assert verdict({"met": False, "rejected": True, "reason": "never"}, phase=None) == (
        "Rejected",
        "never",
    )
