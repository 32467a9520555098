"""The rollout of a plan, node by node: the per-node record kept in the plan's status, and
the pure decisions about it (order, which nodes may start, the plan's phase).

The operator records a node's step *before* taking it, so a restarted operator re-takes that
step; every step is written to be safe to take twice. The record holds the node's own target,
so a node in hand is finished against the plan it started with even if the plan changes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from enum import StrEnum
from typing import Annotated

from pydantic import Field

from migplan.planner.api.nodepartition import GpuTarget
from migplan.planner.api.spec import PlanPhase
from migplan.planner.hardware.layout import Layout
from migplan.planner.plan import GpuPlan, OperationKind, Plan
from migplan.planner.schema import CamelModel


class NodeStep(StrEnum):
    """Where a node is in its rollout. The order of the happy path is the order below."""

    PENDING = "Pending"
    CORDONING = "Cordoning"
    EVICTING = "Evicting"
    PARTITIONING = "Partitioning"
    VERIFYING = "Verifying"
    UNCORDONING = "Uncordoning"
    DONE = "Done"
    ROLLING_BACK = "RollingBack"
    ROLLED_BACK = "RolledBack"
    """Given up before its NodePartition was written: geometry unchanged, node uncordoned."""
    FAILED = "Failed"
    """The agent could not apply the target: node uncordoned; the message says what it has."""


FINISHED = frozenset({NodeStep.DONE, NodeStep.ROLLED_BACK, NodeStep.FAILED})


class NodeRollout(CamelModel):
    """One node's rollout record (status.rollout.nodes[<node>])."""

    node: str
    step: NodeStep = NodeStep.PENDING
    order: Annotated[int, Field(ge=0, description="position in the rollout, by benefit")] = 0
    before: tuple[GpuTarget, ...] = Field(description="layouts the plan started from")
    gpus: tuple[GpuTarget, ...] = Field(description="the node's target, every GPU")
    evict: tuple[str, ...] = Field(default=(), description="pods to evict (namespace/name)")
    evict_uids: dict[str, str] = Field(
        default_factory=dict,
        description="UID of each pod to evict, read on this node when its rollout began; only "
        "that pod on this node is ever evicted",
    )
    disruptive: bool = Field(description="destroys an instance or evicts a pod: needs the window")
    benefit: int = Field(default=0, description="instances created for demanded profiles")
    since: str | None = Field(default=None, description="when the current step began")
    generation: int | None = Field(default=None, description="NodePartition generation written")
    message: str | None = None
    failure: str | None = Field(default=None, description="why the agent could not apply it")
    stale: bool = Field(
        default=False, description="given up because the cluster changed under the plan"
    )
    mig_config: str | None = Field(
        default=None, description="mig-parted config handed to mig-manager (that actuator)"
    )
    mig_config_retry: str | None = Field(
        default=None, description="the same target under a fresh name, for the one retry"
    )
    mig_config_written: str | None = Field(
        default=None, description="when both entries were written to mig-manager's ConfigMap"
    )
    mig_config_failed: str | None = Field(
        default=None, description="when mig-manager reported failed for the first name"
    )

    @property
    def finished(self) -> bool:
        """Whether nothing more will happen to this node in this rollout."""
        return self.step in FINISHED

    @property
    def in_progress(self) -> bool:
        """Started and not finished: counts against maxUnavailable."""
        return self.step is not NodeStep.PENDING and not self.finished


def _disruptive(gpus: Iterable[GpuPlan]) -> bool:
    return any(
        g.evict or any(op.kind is OperationKind.DESTROY_GI for op in g.operations) for g in gpus
    )


def _benefit(gpus: Iterable[GpuPlan], wanted: set[str]) -> int:
    created: Counter[str] = Counter()
    for g in gpus:
        existing = set(Layout.parse(g.before).instances)
        created.update(i.profile for i in Layout.parse(g.after).instances if i not in existing)
    return sum(n for profile, n in created.items() if profile in wanted)


def rollout_nodes(plan: Plan, *, every_node: bool = False) -> list[NodeRollout]:
    """A record per node the plan changes (with `every_node`, per node it covers: DRA steer
    mode keeps even unchanged GPUs to their layouts): nodes that evict nobody first, then the most
    beneficial (then fewest evictions, then name), so demand is met as early as the rollout
    allows.

    Evicting last means the instances evicted pods are to move to already exist, and nodes
    whose free instances go are finished before any pod is looking for one: otherwise the
    scheduler could put an evicted pod on a free instance another node is about to destroy,
    and that node's change would then fail on a busy GPU (seen with the mig-manager actuator,
    which rebuilds whole GPUs).
    """
    by_node: dict[str, list[GpuPlan]] = {}
    for g in plan.gpus:
        by_node.setdefault(g.node, []).append(g)
    wanted = {p for r in plan.demand if r.requested for p in (r.profile, *r.alternatives)}
    records = []
    for node, gpus in by_node.items():
        if not every_node and not any(g.changed for g in gpus):
            continue
        records.append(
            NodeRollout(
                node=node,
                before=tuple(GpuTarget(index=g.gpu, uuid=g.uuid, layout=g.before) for g in gpus),
                gpus=tuple(GpuTarget(index=g.gpu, uuid=g.uuid, layout=g.after) for g in gpus),
                evict=tuple(sorted({p for g in gpus for p in g.evict})),
                disruptive=_disruptive(gpus),
                benefit=_benefit(gpus, wanted),
            )
        )
    records.sort(key=lambda r: (bool(r.evict), -r.benefit, len(r.evict), r.node))
    return [r.model_copy(update={"order": n}) for n, r in enumerate(records)]


def nodes_to_start(
    records: Iterable[NodeRollout],
    *,
    max_unavailable: int,
    window_open: bool,
    create_outside_window: bool,
) -> list[str]:
    """The pending nodes that may start now, in rollout order.

    At most `max_unavailable` nodes are in hand at once. A disruptive node starts only
    inside the window; a node that only adds instances in free slices may start outside it
    when the policy allows.
    """
    ordered = sorted(records, key=lambda r: r.order)
    free = max_unavailable - sum(1 for r in ordered if r.in_progress)
    chosen = []
    for record in ordered:
        if free <= 0:
            break
        if record.step is not NodeStep.PENDING:
            continue
        if window_open or (create_outside_window and not record.disruptive):
            chosen.append(record.node)
            free -= 1
    return chosen


def rollout_phase(records: Iterable[NodeRollout]) -> PlanPhase:
    """Ready when every node is done, Degraded when all finished but some did not make it,
    Progressing while a node is in hand, else waiting for the window."""
    records = list(records)
    if all(r.finished for r in records):
        if all(r.step is NodeStep.DONE for r in records):
            return PlanPhase.READY
        return PlanPhase.DEGRADED
    if any(r.in_progress for r in records):
        return PlanPhase.PROGRESSING
    return PlanPhase.WAITING
