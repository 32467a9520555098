"""The status of a GPUPartitionPlan, every key the operator writes: the CRD's status schema is
generated from these models, and the operator builds what it writes with them.

Keys the operator clears are written as None (a merge patch deletes them); maps whose
entries go away (`kueue`) take None per entry for the same reason.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import Field

from migplan.planner.api.nodepartition import Condition
from migplan.planner.api.spec import PlanPhase
from migplan.planner.plan import PodPart, SolveStatus
from migplan.planner.rollout.records import NodeRollout
from migplan.planner.schema import CamelModel


class ReplanReason(StrEnum):
    """Why a plan is to be planned again once the nodes in hand are finished."""

    SPEC_CHANGED = "SpecChanged"
    """The spec was edited during a rollout."""
    CLUSTER_CHANGED = "ClusterChanged"
    """Nodes were given up because the cluster changed under the plan (a pod took a slice
    the plan was to reuse); planned again from what is there, a bounded number of times."""
    NODES_ARRIVED = "NodesArrived"
    """Nodes asked of the autoscaler joined during a rollout: planned again to lay them out."""


class SolverSummary(CamelModel):
    """The solver's verdict on the plan, in short."""

    status: SolveStatus
    gap: float = Field(description="relative gap between the plan and the proven bound")
    seconds: float


class GpuChange(CamelModel):
    """One GPU the plan changes."""

    gpu: Annotated[int, Field(ge=0)]
    before: str
    after: str
    evict: tuple[str, ...] = Field(default=(), description="pods (namespace/name) evicted")


class DemandStatus(CamelModel):
    """How one demand item fared."""

    resource: str
    alternatives: tuple[str, ...] = ()
    per_pod: tuple[PodPart, ...] = Field(
        default=(), description="a bundle's instances per pod; requested and met count pods"
    )
    requested: Annotated[int, Field(ge=0)]
    met: Annotated[int, Field(ge=0)]
    served: dict[str, int] | None = Field(default=None, description="instances per profile")
    reason: str | None = Field(default=None, description="why the rest is unmet")
    gang: str | None = Field(
        default=None, description="the gang its pods belong to (met all together or not at all)"
    )


class GangStatus(CamelModel):
    """How one gang fared (a PodGroup, a Kueue Workload): met all together, or not at all."""

    name: str = Field(description="kind, namespace/name: `PodGroup ml/train`")
    shape: str = Field(description="what its pods need: `3 x 3g.40gb`")
    min_count: Annotated[int, Field(ge=0)] = Field(description="pods met together at least")
    requested: Annotated[int, Field(ge=0)]
    met: Annotated[int, Field(ge=0)]
    admitted: bool = Field(description="whether the plan meets the gang")
    reason: str | None = Field(default=None, description="why it is not met")


NODES_LISTED = 50
"""Nodes whose changes `status.plan.nodes` lists (by name): a plan may change thousands of
nodes and the status is one etcd object (1.5 MiB at most); each changed node's whole target
is in its rollout record, on its NodePartition."""


class PlannedStatus(CamelModel):
    """`status.plan`: what the last planning decided."""

    solver: SolverSummary
    gpus_changed: Annotated[int, Field(ge=0)]
    evictions: Annotated[int, Field(ge=0)]
    nodes: dict[str, tuple[GpuChange, ...] | None] = Field(
        default_factory=dict,
        description=f"per node, the GPUs that change: the first {NODES_LISTED} nodes by name "
        "(each changed node's whole target is in its rollout record, on its NodePartition)",
    )
    nodes_not_listed: Annotated[int | None, Field(ge=0)] = Field(
        default=None, description=f"changed nodes past the {NODES_LISTED} that `nodes` lists"
    )
    demand: tuple[DemandStatus, ...] = ()
    gangs: tuple[GangStatus, ...] | None = Field(
        default=None, description="gangs in the demand, each met whole or not at all"
    )
    left_out: dict[str, str | None] = Field(
        default_factory=dict,
        description="GPU nodes not planned, and why: the agent has not reported, or preflight "
        "refused the node",
    )
    demand_notes: tuple[str, ...] | None = Field(
        default=None, description="pending pods and Workloads the demand could not count, and why"
    )


class PreflightEntry(CamelModel):
    """A preflight finding worth a look (not OK)."""

    node: str = Field(description="the node, or (cluster)")
    check: str
    severity: str
    message: str
    fix: str | None = None


class KueueRecord(CamelModel):
    """How the plan stands with one Workload waiting on its AdmissionCheck."""

    met: bool
    rejected: bool | None = Field(
        default=None, description="no GPU the plan covers offers a profile it needs"
    )
    reason: str = ""


class RolloutStatus(CamelModel):
    """`status.rollout`: the rollout of the plan with input hash `inputHash`, in summary.
    Each node's record is in its NodePartition (annotation `migplan.io/rollout`), so a step
    writes one node's small object, not the plan (which would grow with the rollout)."""

    input_hash: str | None = None
    id: str | None = Field(
        default=None,
        description="the rollout's records (on the NodePartitions) are those kept under this "
        "id: the input hash and a digest of the nodes' targets",
    )
    nodes: dict[str, NodeRollout | None] | None = Field(
        default=None,
        description="records as earlier migplan versions kept them here; taken over into the "
        "NodePartitions and cleared",
    )
    total: Annotated[int | None, Field(ge=0, description="nodes in the rollout")] = None
    steps: dict[str, Annotated[int, Field(ge=0)]] | None = Field(
        default=None, description="nodes in each step (every step, zeros too)"
    )
    in_hand: tuple[str, ...] | None = Field(
        default=None, description="nodes started and not finished"
    )
    oldest_step_since: str | None = Field(
        default=None, description="when the longest-running unfinished step began"
    )
    spec: dict[str, Any] = Field(
        default_factory=dict,
        description="the spec the rollout began under: nodes in hand finish under it even if "
        "the spec is edited into one that cannot be planned",
    )


class ScaleOutRequest(CamelModel):
    """One node asked of the autoscaler: the placeholder pod that reserves it."""

    offer: str
    placeholder: str = Field(description="the placeholder pod (in the operator's namespace)")
    since: str = Field(description="when it was asked for")
    node: str | None = Field(default=None, description="the node it was bound to, once one is")


class ScaleOutStatus(CamelModel):
    """`status.scaleOut`: the nodes asked of the autoscaler (spec.scaleOut) and what came.
    Its maps take null for a key, so a merge patch can remove it."""

    wanted: dict[str, int | None] = Field(
        default_factory=dict, description="new nodes per offer the last plan asks for"
    )
    requests: tuple[ScaleOutRequest, ...] = Field(
        default=(), description="placeholders waiting for a node"
    )
    arrived: tuple[str, ...] = Field(
        default=(),
        description="nodes that joined for this plan and are kept from consolidation until "
        "laid out",
    )
    released: dict[str, str | None] = Field(
        default_factory=dict,
        description="node -> when it was laid out and released: watched until a pod uses its "
        "instances, or reported unused after the timeout",
    )
    timed_out: dict[str, str | None] = Field(
        default_factory=dict,
        description="offer -> when its request was last withdrawn (not asked again for a timeout)",
    )
    message: str = ""


class PlanStatus(CamelModel):
    """status of a GPUPartitionPlan, written by the operator: every key it writes."""

    phase: PlanPhase | None = None
    observed_generation: Annotated[int | None, Field(ge=0)] = None
    nodes: Annotated[int | None, Field(ge=0, description="nodes the plan changes")] = None
    demand_met: str | None = Field(default=None, description="met/requested, e.g. 9/10")
    progress: str | None = Field(default=None, description="nodes done/nodes to change")
    next_window: str | None = Field(default=None, description="start of the next window (UTC)")
    window_open: bool | None = None
    last_planned: str | None = None
    last_rebalance: str | None = None
    next_rebalance: str | None = None
    rebalance_handled: str | None = Field(
        default=None, description="the migplan.io/rebalance annotation last acted on"
    )
    replan_pending: bool | None = Field(
        default=None, description="plan again once the nodes in hand are finished"
    )
    replan_reason: ReplanReason | None = None
    stale_replans: Annotated[int | None, Field(ge=0)] = Field(
        default=None, description="re-plans since the cluster last changed under the plan"
    )
    input_hash: str | None = None
    plan: PlannedStatus | None = None
    preflight: tuple[PreflightEntry, ...] | None = None
    conditions: tuple[Condition, ...] | None = None
    kueue: dict[str, KueueRecord | None] | None = None
    rollout: RolloutStatus | None = None
    scale_out: ScaleOutStatus | None = None
