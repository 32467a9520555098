"""The raw objects migplan still reads as the API server sends them, typed (in the manner of
kopf's `_cogs/structs/bodies.py`): what a key holds where it is there, nothing required.
Anything migplan writes is written from a pydantic model (planner/api, planner/status)."""

from __future__ import annotations

from typing import Any, TypedDict


class Meta(TypedDict, total=False):
    """An object's metadata."""

    name: str
    namespace: str
    uid: str
    generation: int
    resourceVersion: str
    creationTimestamp: str
    deletionTimestamp: str
    labels: dict[str, str]
    annotations: dict[str, str]
    finalizers: list[str]
    generateName: str


class ConditionBody(TypedDict, total=False):
    """One entry of a status' conditions."""

    type: str
    status: str
    reason: str
    message: str
    observedGeneration: int
    lastTransitionTime: str


class PlanBody(TypedDict, total=False):
    """A GPUPartitionPlan as read (its spec is parsed with `GPUPartitionPlan`, its status
    written through `PlanStatus`)."""

    apiVersion: str
    kind: str
    metadata: Meta
    spec: dict[str, Any]
    status: dict[str, Any]


class GpuReport(TypedDict, total=False):
    """One GPU as a node's agent reports it in its NodePartition's status."""

    index: int
    model: str
    uuid: str
    migEnabled: bool
    layout: str
    inUse: dict[str, str]


class NodePartitionStatusBody(TypedDict, total=False):
    """What a node's agent writes in its NodePartition's status."""

    phase: str
    appliedGeneration: int
    gpuCount: int
    gpus: list[GpuReport]
    conditions: list[ConditionBody]


class NodePartitionBody(TypedDict, total=False):
    """A NodePartition as read."""

    apiVersion: str
    kind: str
    metadata: Meta
    spec: dict[str, Any]
    status: NodePartitionStatusBody
