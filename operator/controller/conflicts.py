"""Two plans must not fight over a node: the later of two overlapping plans waits.

Plans overlap when their node selectors both pick some MIG-capable node. Dry-run plans
change nothing, so they never conflict. The earlier plan (creation time, then name) wins; a
plan that is itself waiting in Conflict does not block others.
"""

from __future__ import annotations

from pydantic import ValidationError

from migplan.operator.cluster_inventory import MIG_CAPABLE
from migplan.operator.kube.bodies import PlanBody
from migplan.operator.kube.seam import Kube
from migplan.planner.api.spec import LabelSelector, PlanPhase


def _selected(plan: PlanBody, nodes: dict[str, dict[str, str]]) -> set[str]:
    try:
        selector = LabelSelector.model_validate((plan.get("spec") or {}).get("nodeSelector") or {})
    except ValidationError:
        return set()
    return {name for name, labels in nodes.items() if selector.matches(labels)}


def _rank(plan: PlanBody) -> tuple[str, str]:
    meta = plan["metadata"]
    return (str(meta.get("creationTimestamp") or ""), str(meta["name"]))


def _active(plan: PlanBody) -> bool:
    return not (plan.get("spec") or {}).get("dryRun") and not plan["metadata"].get(
        "deletionTimestamp"
    )


def conflicting_plan(api: Kube, plan: PlanBody) -> str | None:
    """The name of an earlier active plan that selects one of `plan`'s nodes, if any."""
    if not _active(plan):
        return None
    nodes = {
        n.metadata.name: dict(n.metadata.labels or {})
        for n in api.core.list_nodes(label_selector=MIG_CAPABLE)
    }
    mine = _selected(plan, nodes)
    for other in sorted(api.plans.list_plans(), key=_rank):
        if other["metadata"]["name"] == plan["metadata"]["name"] or not _active(other):
            continue
        if (
            _rank(other) >= _rank(plan)
            or (other.get("status") or {}).get("phase") == PlanPhase.CONFLICT
        ):
            continue
        if mine & _selected(other, nodes):
            return str(other["metadata"]["name"])
    return None
