"""Plan a GPUPartitionPlan against the live cluster and describe the result as status.

Kept free of kopf so it can be tested and reused (`migplan rebalance` later): kopf handlers
in `handlers.py` call `plan_status` and write what it returns.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from migplan.operator.cluster_inventory import read_inventory
from migplan.operator.conditions import condition
from migplan.operator.dra.modes import check_mode
from migplan.operator.gpu_operator import GpuOperatorSettings
from migplan.operator.kube.bodies import PlanBody
from migplan.operator.kube.seam import Kube
from migplan.operator.kueue.checks import offered_profiles, planned_verdicts
from migplan.operator.preflight.checks import (
    Finding,
    Severity,
)
from migplan.operator.preflight.checks import summary as preflight_summary
from migplan.operator.preflight.facts import live_facts
from migplan.operator.preflight.screen import screen
from migplan.operator.skipped import Skipped
from migplan.planner.api.inventory import GpuState, Inventory
from migplan.planner.api.nodepartition import ConditionType
from migplan.planner.api.spec import GPUPartitionPlan, PlanPhase
from migplan.planner.export import scale_out as scale_out_text
from migplan.planner.gc_pause import gc_paused
from migplan.planner.hardware.catalog import Catalog
from migplan.planner.pass_memo import PassMemo
from migplan.planner.pipeline import plan_fleet
from migplan.planner.plan import Plan
from migplan.planner.status import NODES_LISTED

PREFLIGHT_SHOWN = 50
"""Findings kept in status.preflight (the condition counts them all)."""


class PassMemos:
    """Per GPUPartitionPlan, what its last pass kept for the next (`PassMemo`): the caches
    hand a pass the same report objects while a NodePartition is unchanged, so the next pass
    resolves only the nodes that changed, and a pass whose inputs are all the same takes the
    last plan where it is proven best. Each holds a fleet's GPUs and a plan (tens of MiB at
    40,000 GPUs), so a deleted plan's goes with it (`retain`)."""

    def __init__(self) -> None:
        self._by_plan: dict[str, PassMemo] = {}

    def of(self, plan: str) -> PassMemo:
        """The plan's memo (empty before its first pass)."""
        return self._by_plan.setdefault(plan, PassMemo())

    def retain(self, plans: Collection[str]) -> None:
        """Forget the plans not in `plans` (the plans that exist). A pass in flight for one
        keeps its own reference and finishes."""
        for plan in list(self._by_plan):  # a snapshot: passes on threads may add plans
            if plan not in plans:
                self._by_plan.pop(plan, None)

    def __contains__(self, plan: object) -> bool:
        return plan in self._by_plan


PASS_MEMOS = PassMemos()


@dataclass(frozen=True)
class PlanningResult:
    """The status to write, and a one-line summary for the event."""

    status: dict[str, Any]
    summary: str
    plan: Plan
    skipped: tuple[Skipped, ...] = ()
    """Objects the pass left out (each gets a Warning event)."""
    read_seconds: float = 0.0
    """Wall time of the pass's reads (caches or lists, live facts) and screening, before
    the planner started: beside the pass's whole time, what the planner itself took."""
    kept: bool = False
    """The planner took the last pass's plan: the inputs were the same (`PassMemo`)."""


def replacing_plan(previous: Mapping[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """`status.plan` as a merge patch that replaces the `previous` one: a merge patch merges
    maps key by key, so a key only `previous` has (a node an older plan changed or left
    out, gangs the demand no longer has) is written as None, and goes."""
    previous = previous or {}
    patch: dict[str, Any] = {**dict.fromkeys(previous), **new}
    for key in ("nodes", "leftOut"):
        if isinstance(previous.get(key), dict):
            patch[key] = {**dict.fromkeys(previous[key]), **new.get(key, {})}
    return patch


def previous_layouts(status: Mapping[str, Any]) -> dict[tuple[str, int], str]:
    """The layouts the last plan gave the GPUs `status.plan.nodes` lists (the changed GPUs
    of its first NODES_LISTED changed nodes; every other GPU it left as it was), by node and
    GPU index: the warm start of the next planning pass. Entries of another shape (a status
    edited by hand) are passed over."""
    plan = status.get("plan")
    nodes = plan.get("nodes") if isinstance(plan, Mapping) else None
    layouts: dict[tuple[str, int], str] = {}
    for node, gpus in (nodes or {}).items() if isinstance(nodes, Mapping) else ():
        for gpu in gpus if isinstance(gpus, list) else ():
            index = gpu.get("gpu") if isinstance(gpu, Mapping) else None
            after = gpu.get("after") if isinstance(gpu, Mapping) else None
            if isinstance(index, int) and isinstance(after, str):
                layouts[(node, index)] = after
    return layouts


def plan_status(
    *,
    body: PlanBody,
    manifest: GPUPartitionPlan,
    api: Kube,
    catalog: Catalog,
    gpu_operator: GpuOperatorSettings | None = None,
) -> PlanningResult:
    """Plan `manifest` (parsed from `body`, the GPUPartitionPlan object) on the cluster
    behind `api`, leaving out the nodes preflight refuses. The cyclic collector is paused
    for the pass, reads included (`planner/gc_pause.py`: the informer caches make the heap
    large, and a full collection then takes seconds)."""
    with gc_paused():
        return _plan_status(
            body=body, manifest=manifest, api=api, catalog=catalog, gpu_operator=gpu_operator
        )


def _plan_status(
    *,
    body: PlanBody,
    manifest: GPUPartitionPlan,
    api: Kube,
    catalog: Catalog,
    gpu_operator: GpuOperatorSettings | None,
) -> PlanningResult:
    generation = int(body["metadata"].get("generation", 0))
    reading = time.monotonic()
    check_mode(manifest, api=api)
    snapshot = read_inventory(api, catalog=catalog)
    selector = manifest.spec.node_selector
    left_out = snapshot.left_out_of(selector)
    covered = [n.name for n in snapshot.inventory.nodes if selector.matches(n.labels)]
    settings = gpu_operator or GpuOperatorSettings()
    screened = screen(
        snapshot.inventory,
        live_facts(api, settings=settings, nodes=[*covered, *left_out]),
        manifest=manifest,
        settings=settings,
    )
    findings = list(screened.findings)
    inventory = screened.inventory
    left_out = {**left_out, **{n: f"preflight: {why}" for n, why in screened.refused.items()}}
    # The time limit counts from here, not from the reads above: a throttled or slow API
    # server must not eat the solver's time and so cost the plan's quality.
    started = time.monotonic()
    outcome = plan_fleet(
        manifest,
        inventory,
        catalog,
        started=started,
        previous=previous_layouts(body.get("status") or {}),
        memo=PASS_MEMOS.of(manifest.metadata.name),
    )
    plan = outcome.plan
    s = plan.summary
    unmet = [r for r in plan.demand if r.met < r.requested]
    changed = [g for g in plan.gpus if g.operations]
    nodes: dict[str, list[dict[str, Any]]] = {}
    for g in changed:
        nodes.setdefault(g.node, []).append(
            {"gpu": g.gpu, "before": g.before, "after": g.after, "evict": list(g.evict)}
        )
    listed = sorted(nodes)[:NODES_LISTED]
    phase = PlanPhase.PLANNED if manifest.spec.dry_run else PlanPhase.PENDING
    conditions = [
        condition(
            ConditionType.PLANNED,
            True,
            "Solved",
            f"{plan.solver.status} in {plan.solver.wall_seconds:.2f} s"
            + ("; the inputs are unchanged since, so the plan stands" if outcome.kept else ""),
            generation,
        ),
        condition(
            ConditionType.INFEASIBLE,
            bool(unmet),
            "DemandUnmet" if unmet else "DemandMet",
            "; ".join(r.reason or r.resource for r in unmet) or "all demand met",
            generation,
        ),
        condition(
            ConditionType.NODES_LEFT_OUT,
            bool(left_out),
            "AgentNotReported" if left_out else "AllNodesReported",
            (
                f"{len(left_out)} GPU nodes not planned, their agents have not reported: "
                + ", ".join(sorted(left_out)[:20])
            )
            if left_out
            else "every MIG-capable node's agent has reported",
            generation,
        ),
        condition(ConditionType.PREFLIGHT, *preflight_summary(findings), generation),
    ]
    status = {
        "phase": phase,
        "observedGeneration": generation,
        "nodes": s.nodes_touched,
        "demandMet": f"{s.met}/{s.requested}",
        "inputHash": plan.input_hash,
        "plan": {
            "solver": {
                "status": plan.solver.status,
                "gap": plan.solver.gap,
                "seconds": round(plan.solver.wall_seconds, 3),
            },
            "gpusChanged": s.gpus_changed,
            "evictions": s.evictions,
            "nodes": {n: nodes[n] for n in listed},
            **({"nodesNotListed": len(nodes) - len(listed)} if len(nodes) > len(listed) else {}),
            "demand": [
                {
                    "resource": r.resource,
                    **({"alternatives": list(r.alternatives)} if r.alternatives else {}),
                    **(
                        {"perPod": [p.model_dump(by_alias=True) for p in r.per_pod]}
                        if r.per_pod
                        else {}
                    ),
                    "requested": r.requested,
                    "met": r.met,
                    **({"served": r.served} if r.served else {}),
                    **({"reason": r.reason} if r.reason else {}),
                    **({"gang": r.gang} if r.gang else {}),
                }
                for r in plan.demand
            ],
            **(
                {"gangs": [g.model_dump(by_alias=True, exclude_none=True) for g in plan.gangs]}
                if plan.gangs
                else {}
            ),
            "leftOut": left_out,
            **({"demandNotes": list(snapshot.notes)[:20]} if snapshot.notes else {}),
        },
        "preflight": _shown(findings),
        "conditions": conditions,
    }
    kueue = _kueue_records(body, plan, outcome.gpus, inventory, name=manifest.metadata.name)
    if kueue:
        status["kueue"] = kueue
    summary = (
        f"planned: demand {s.met}/{s.requested} met, {s.gpus_changed} GPUs on "
        f"{s.nodes_touched} nodes change, {s.evictions} pods to evict "
        f"({plan.solver.status})"
    )
    if plan.scale_out is not None and plan.scale_out.nodes:
        summary += f"; scale out: {scale_out_text.headline(plan.scale_out)}"
    if outcome.kept:
        summary += "; inputs unchanged: the last plan stands"
    return PlanningResult(
        status=status,
        summary=summary,
        plan=plan,
        skipped=snapshot.skipped,
        read_seconds=started - reading,
        kept=outcome.kept,
    )


def _kueue_records(
    body: PlanBody,
    plan: Plan,
    gpus: Sequence[GpuState],
    inventory: Inventory,
    *,
    name: str,
) -> dict[str, Any]:
    """`status.kueue`: per Workload waiting on a migplan AdmissionCheck for this plan, met or
    not and why; earlier entries of Workloads no longer waiting removed (None, as a merge
    patch deletes)."""
    offered = offered_profiles({g.model.model: g.model for g in gpus}.values())
    records = planned_verdicts(plan, workloads=inventory.workloads, name=name, offered=offered)
    previous = (body.get("status") or {}).get("kueue") or {}
    return {**{key: None for key in previous if key not in records}, **records}


def _shown(findings: list[Finding]) -> list[dict[str, str]]:
    """The findings worth a look (not OK), most serious first, as status entries."""
    order = {Severity.BLOCKING: 0, Severity.WARNING: 1, Severity.INFO: 2}
    found = sorted(
        (f for f in findings if f.severity in order),
        key=lambda f: (order[f.severity], f.node, f.check),
    )
    return [
        {
            "node": f.node or "(cluster)",
            "check": f.check,
            "severity": f.severity.value,
            "message": f.message,
            **({"fix": f.fix} if f.fix else {}),
        }
        for f in found[:PREFLIGHT_SHOWN]
    ]
