"""The NodePartition resource: the contract between the operator and a node's agent.

One per GPU node, named after the node. The operator writes `spec` (the layout each GPU should
have, and the pods it has evicted so their instances may go); the agent writes `status` (what
NVML actually shows, which pod uses which instance, and the spec generation it has applied).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field

from migplan.planner.api.group import API_VERSION, NODE_PARTITION_KIND, ApiVersion
from migplan.planner.api.spec import ObjectMeta
from migplan.planner.schema import CamelModel

LAYOUT_PATTERN = r"^(-|[1-9][0-9]*g\.[0-9]+gb(\+me\.all|\+me|\+gfx|-me)?@[0-9]+(\+[1-9][0-9]*g\.[0-9]+gb(\+me\.all|\+me|\+gfx|-me)?@[0-9]+)*)$"  # noqa: E501
"""A layout in canonical text form, or `-`."""


class GpuTarget(CamelModel):
    """The layout one GPU should have."""

    index: Annotated[int, Field(ge=0)]
    uuid: str | None = None
    layout: Annotated[str, Field(pattern=LAYOUT_PATTERN, description="canonical layout or -")]


class NodePartitionSpec(CamelModel):
    """What the operator wants on the node."""

    node_name: Annotated[str, Field(min_length=1, description="the node this partition is for")]
    plan: str | None = Field(default=None, description="the GPUPartitionPlan that wrote it")
    plan_generation: Annotated[int | None, Field(ge=0)] = None
    gpus: tuple[GpuTarget, ...] = ()
    evicted_pods: tuple[str, ...] = Field(
        default=(), description="pods (namespace/name) evicted so their instances may go"
    )
    evicted_pod_uids: dict[str, str] = Field(
        default_factory=dict,
        description="the UID each evicted pod had: a pod made again under that name is not "
        "the evicted one, and its instance stays",
    )
    dra: bool = Field(
        default=False,
        description="NVIDIA's DRA driver publishes the MIG devices (dra.mode static): restart "
        "its kubelet plugin, not the device plugin, and check its ResourceSlices",
    )


class ConditionType(StrEnum):
    """The conditions migplan writes: on plans (Ready, Progressing, Degraded, Conflict,
    Preflight, TickFailed, Planned, Infeasible, NodesLeftOut) and on NodePartitions (Ready,
    NvmlReady, ProfilesMatch)."""

    READY = "Ready"
    PROGRESSING = "Progressing"
    DEGRADED = "Degraded"
    CONFLICT = "Conflict"
    PREFLIGHT = "Preflight"
    TICK_FAILED = "TickFailed"
    NVML_READY = "NvmlReady"
    PROFILES_MATCH = "ProfilesMatch"
    PLANNED = "Planned"
    INFEASIBLE = "Infeasible"
    NODES_LEFT_OUT = "NodesLeftOut"


class Condition(CamelModel):
    """A standard Kubernetes condition."""

    type: Annotated[str, Field(min_length=1)]
    status: Annotated[str, Field(pattern=r"^(True|False|Unknown)$")]
    reason: str | None = None
    message: str | None = None
    last_transition_time: str | None = None
    observed_generation: Annotated[int | None, Field(ge=0)] = None


class GpuObserved(CamelModel):
    """What NVML shows on one GPU."""

    index: Annotated[int, Field(ge=0)]
    uuid: str | None = None
    model: str | None = None
    mig_enabled: bool | None = None
    layout: Annotated[str, Field(pattern=LAYOUT_PATTERN)]
    in_use: dict[str, str] = Field(default_factory=dict, description="instance -> pod")


class NodePhase(StrEnum):
    """Where a node's agent stands with its NodePartition (status.phase)."""

    APPLIED = "Applied"
    """NVML shows the target and the node advertises it."""
    WAITING_FOR_DEVICE_PLUGIN = "WaitingForDevicePlugin"
    """NVML shows the target; the node's allocatable (or ResourceSlices) do not yet."""
    FAILED = "Failed"
    """NVML refused a step, or the components could not be restarted."""
    INVALID = "Invalid"
    """The target is not a valid layout on a GPU."""
    BLOCKED = "Blocked"
    """An instance that must go is still in use; nothing was changed."""
    RESET_REQUIRED = "ResetRequired"
    """MIG mode is pending until the GPU is reset."""
    NVML_UNAVAILABLE = "NvmlUnavailable"
    """The agent cannot use NVML on this node."""


EVICTED_PODS_STOPPING = "EvictedPodsStopping"
"""The Ready condition's reason when a node is Blocked only by processes of pods the plan
evicted, which are still stopping: the agent passes again soon and goes on once they are
gone, and the operator waits for that (up to its agent timeout) rather than failing the node.
Any other Blocked (a pod the plan did not evict, a process outside Kubernetes) stays a
failure."""


class NodePartitionStatus(CamelModel):
    """What the agent found and did."""

    phase: NodePhase | None = None
    applied_generation: Annotated[int | None, Field(ge=0)] = None
    gpu_count: Annotated[int | None, Field(ge=0, description="GPUs seen (for kubectl get)")] = None
    gpus: tuple[GpuObserved, ...] = ()
    conditions: tuple[Condition, ...] = ()

    def evicted_pods_stopping(self) -> bool:
        """Whether the node waits only for evicted pods' processes to stop."""
        return self.phase is NodePhase.BLOCKED and any(
            c.type == ConditionType.READY and c.reason == EVICTED_PODS_STOPPING
            for c in self.conditions
        )


class NodePartition(CamelModel):
    """A NodePartition object."""

    api_version: ApiVersion = API_VERSION
    kind: Literal["NodePartition"] = NODE_PARTITION_KIND
    metadata: ObjectMeta
    spec: NodePartitionSpec
    status: NodePartitionStatus | None = None

    @classmethod
    def for_node(cls, spec: NodePartitionSpec, *, node_uid: str | None = None) -> NodePartition:
        """The NodePartition of `spec.node_name`, named after it; owned by the Node when its
        uid is given, so that it goes when the node goes."""
        owner = (
            {
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Node", "name": spec.node_name, "uid": node_uid}
                ]
            }
            if node_uid
            else {}
        )
        return cls(metadata=ObjectMeta(name=spec.node_name, **owner), spec=spec)

    def body(self) -> dict[str, Any]:
        """The object as the API takes it (camelCase, unset fields left out)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
