"""migplan's own node agent as the actuator: the operator writes the node's NodePartition
spec, the agent lays the GPUs out through NVML and reports in its status."""

from __future__ import annotations

from dataclasses import dataclass

from migplan.operator.controller import mig_manager
from migplan.operator.controller.actuators.base import Observed, Setting
from migplan.operator.controller.actuators.reports import offered_mismatch, reported
from migplan.operator.controller.steps import next_step, waiting
from migplan.operator.gpu_operator import AGENT_OWNED, MIG_MANAGER_DEPLOY_LABEL
from migplan.operator.kube.bodies import ConditionBody
from migplan.planner.api.nodepartition import (
    EVICTED_PODS_STOPPING,
    ConditionType,
    NodePartition,
    NodePartitionSpec,
    NodePhase,
)
from migplan.planner.api.spec import DraMode
from migplan.planner.rollout.records import NodeRollout, NodeStep

AGENT_FAILURES = frozenset(
    {NodePhase.INVALID, NodePhase.FAILED, NodePhase.BLOCKED, NodePhase.RESET_REQUIRED}
)


@dataclass(frozen=True)
class AgentActuator:
    """The node's agent applies the NodePartition the operator writes."""

    setting: Setting

    def observed(self, node: str) -> Observed:
        return reported(self.setting.api, node=node)

    def prepare(self, record: NodeRollout) -> str | None:
        """Keep mig-manager off the node for good (it would rebuild the GPUs on a restart)."""
        if mig_manager.disable_on_node(self.setting.api, node=record.node):
            self.setting.events(
                "Normal",
                "MigManagerDisabled",
                f"{record.node}: {MIG_MANAGER_DEPLOY_LABEL}=false and "
                f"{mig_manager.CONFIG_LABEL}={AGENT_OWNED}, so a mig-manager "
                "(re)start cannot rebuild the GPUs migplan's agent lays out",
            )
        return None

    def partition(self, record: NodeRollout) -> NodeRollout | None:
        """Once no mig-manager runs on the node, write its target for the agent."""
        setting = self.setting
        staying = mig_manager.pods_on(setting.api, node=record.node, settings=setting.gpu_operator)
        if staying:
            if setting.late(record):
                return next_step(
                    record,
                    NodeStep.ROLLING_BACK,
                    f"mig-manager ({', '.join(staying)}) still runs on the node after "
                    f"{setting.agent_timeout:.0f} s with {MIG_MANAGER_DEPLOY_LABEL}="
                    "false: the agent changes nothing while it could rebuild the GPUs",
                )
            return waiting(record, f"waiting for mig-manager to leave: {', '.join(staying)}")
        target = NodePartitionSpec(
            node_name=record.node,
            plan=setting.plan,
            plan_generation=setting.plan_generation,
            gpus=record.gpus,
            evicted_pods=record.evict,
            evicted_pod_uids=dict(record.evict_uids),
            dra=setting.dra_mode is DraMode.STATIC,
        )
        setting.api.plans.apply_node_partition(body=NodePartition.for_node(target).body())
        written = setting.api.plans.get_node_partition(name=record.node) or {}
        generation = int(written.get("metadata", {}).get("generation", 0))
        return next_step(
            record.model_copy(update={"generation": generation}),
            NodeStep.VERIFYING,
            f"waiting for the agent to apply generation {generation}",
        )

    def verify(self, record: NodeRollout) -> NodeRollout | None:
        """The agent applied the generation written and the node offers what NVML has; or
        it failed, or timed out (the NodePartition is then pinned to what the node has)."""
        setting = self.setting
        seen = self.observed(record.node)
        status = seen.status
        generation = record.generation or 0
        want = {t.index: t.layout for t in record.gpus}
        applied = int(status.get("appliedGeneration") or 0) >= generation
        if (
            applied
            and status.get("phase") == NodePhase.APPLIED
            and all(seen.layouts.get(i) == v for i, v in want.items())
        ):
            mismatch = offered_mismatch(
                setting.api, node=record.node, layouts=seen.layouts, dra_mode=setting.dra_mode
            )
            if mismatch is None:
                return next_step(record, NodeStep.UNCORDONING, "applied")
            return waiting(record, mismatch)
        ready: ConditionBody = next(
            (c for c in status.get("conditions") or [] if c.get("type") == ConditionType.READY),
            ConditionBody(),
        )
        answered = int(ready.get("observedGeneration") or 0) >= generation
        # Evicted pods' processes still stopping: the agent goes on once they are gone.
        stopping = answered and ready.get("reason") == EVICTED_PODS_STOPPING
        failed = answered and status.get("phase") in AGENT_FAILURES and not stopping
        if not failed and not setting.late(record):
            if stopping:
                return waiting(record, f"waiting for evicted pods to stop: {ready.get('message')}")
            return waiting(record, f"waiting for the agent to apply generation {generation}")
        if failed:
            why = f"the agent reports {status.get('phase')}: {ready.get('message', '')}"
        elif stopping:
            why = (
                f"evicted pods did not stop in {setting.agent_timeout:.0f} s: "
                f"{ready.get('message', '')}"
            )
        else:
            why = (
                f"the agent did not apply generation {generation} in {setting.agent_timeout:.0f} s"
            )
        self._pin(record, seen.layouts)
        return next_step(
            record.model_copy(update={"failure": why}),
            NodeStep.UNCORDONING,
            f"{why}; {_which(record, seen.layouts)}",
        )

    def _pin(self, record: NodeRollout, layouts: dict[int, str]) -> None:
        """Point the NodePartition at what the node has, so the agent stops changing it."""
        api = self.setting.api
        found = api.plans.get_node_partition(name=record.node)
        if found is None:
            return
        pinned = NodePartitionSpec.model_validate(found["spec"]).model_copy(
            update={
                "gpus": tuple(
                    t.model_copy(update={"layout": layouts.get(t.index, t.layout)})
                    for t in record.gpus
                )
            }
        )
        spec = pinned.model_dump(mode="json", by_alias=True, exclude_none=True)
        api.plans.apply_node_partition(body={**found, "spec": spec})


def _which(record: NodeRollout, layouts: dict[int, str]) -> str:
    """Per GPU: whether its instances are as planned, as they were, or neither."""
    before = {b.index: b.layout for b in record.before}
    parts = []
    for target in record.gpus:
        have = layouts.get(target.index, "unknown")
        if have == target.layout:
            parts.append(f"GPU {target.index} as planned")
        elif have == before.get(target.index):
            parts.append(f"GPU {target.index} as it was")
        else:
            parts.append(f"GPU {target.index} has {have}")
    return ", ".join(parts)
