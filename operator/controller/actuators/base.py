"""What every actuator is given and answers with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from migplan.operator.controller.steps import seconds_in_step
from migplan.operator.gpu_operator import GpuOperatorSettings
from migplan.operator.kube.bodies import NodePartitionStatusBody
from migplan.operator.kube.seam import Kube
from migplan.planner.api.spec import DraMode
from migplan.planner.rollout.records import NodeRollout

EventSink = Callable[[str, str, str], None]
"""(type Normal|Warning, reason, message) -> posts an event on the plan."""
DEFAULT_MIG_CONFIG_MAP = ("gpu-operator", "migplan-mig-parted-config")


@dataclass(frozen=True)
class Observed:
    """What a node has now: layouts and in-use instances per GPU index, and the status its
    agent wrote (empty for a steered node)."""

    layouts: dict[int, str]
    in_use: dict[int, dict[str, str]]
    status: NodePartitionStatusBody = field(default_factory=NodePartitionStatusBody)


@dataclass(frozen=True)
class Setting:
    """What every actuator is given: the cluster, the plan, and its limits."""

    api: Kube
    plan: str
    plan_generation: int
    agent_timeout: float
    events: EventSink
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    dra_mode: DraMode | None = None
    gpu_operator: GpuOperatorSettings = field(default_factory=GpuOperatorSettings)
    mig_config_map: tuple[str, str] = DEFAULT_MIG_CONFIG_MAP
    mig_config_propagation: float = 90.0

    def late(self, record: NodeRollout) -> bool:
        """Whether the node has been in its step longer than the agent timeout."""
        return seconds_in_step(record, self.clock()) > self.agent_timeout


class NodeActuator(Protocol):
    """Changes a drained node's GPUs to the record's target and checks they got there."""

    def observed(self, node: str) -> Observed:
        """Layouts and in-use instances on the node now."""

    def prepare(self, record: NodeRollout) -> str | None:
        """Before the node starts: why it cannot (it is left as it is), or None."""

    def partition(self, record: NodeRollout) -> NodeRollout | None:
        """Ask for the target; the record of the next step, or None to wait."""

    def verify(self, record: NodeRollout) -> NodeRollout | None:
        """Check the node reached the target; the record of the next step, or None."""
