"""Device taints over NVIDIA's DRA driver in DynamicMIG mode as the actuator: the driver
makes instances as claims need them; migplan taints the slots outside the node's target
layouts (untainting those inside), so only the planned geometry is handed out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from migplan.operator.controller.actuators.base import Observed, Setting
from migplan.operator.controller.steps import next_step, waiting
from migplan.operator.dra import steer
from migplan.operator.dra.devices import DeviceKind
from migplan.planner.rollout.records import NodeRollout, NodeStep


@dataclass
class SteerActuator:
    """Steers a node with DeviceTaintRules."""

    setting: Setting
    _claims: list[dict[str, Any]] | None = field(default=None, init=False)
    """The cluster's ResourceClaims, read once per actuator (one round of the ticker)."""

    def observed(self, node: str) -> Observed:
        """The instances the node's claims hold."""
        if self._claims is None:  # once per round: every steered node is checked
            self._claims = self.setting.api.dra.list_objects(plural="resourceclaims")
        layouts, in_use = steer.observed(self.setting.api, node=node, claims=self._claims)
        return Observed(layouts=layouts, in_use=in_use)

    def prepare(self, record: NodeRollout) -> str | None:
        """Steering needs the driver's DynamicMIG slots on the node."""
        devices = steer.node_devices(self.setting.api, node=record.node)
        if any(d.kind is DeviceKind.SLOT for d in devices):
            return None
        return (
            "dra.mode steer, but NVIDIA's DRA driver publishes no DynamicMIG slots on the "
            "node: left as it is"
        )

    def _desired(self, record: NodeRollout) -> dict[str, dict[str, Any]]:
        return steer.desired_rules(
            plan=self.setting.plan,
            node=record.node,
            targets={t.index: t.layout for t in record.gpus},
            devices=steer.node_devices(self.setting.api, node=record.node),
        )

    def partition(self, record: NodeRollout) -> NodeRollout | None:
        """Taint the node's slots outside its target layouts (untainting those inside)."""
        desired = self._desired(record)
        created, deleted = steer.sync(
            self.setting.api, plan=self.setting.plan, node=record.node, desired=desired
        )
        return next_step(
            record,
            NodeStep.VERIFYING,
            f"{len(desired)} slots outside the plan tainted ({created} new, {deleted} untainted)",
        )

    def verify(self, record: NodeRollout) -> NodeRollout | None:
        """The taint rules listed are the ones wanted; after the agent timeout, again."""
        desired = self._desired(record)
        have = steer.existing(self.setting.api, plan=self.setting.plan, node=record.node)
        if set(have) == set(desired):
            return next_step(record, NodeStep.UNCORDONING, "steered")
        if self.setting.late(record):
            return next_step(record, NodeStep.PARTITIONING, "the taint rules drifted: again")
        return waiting(record, "waiting for the taint rules to be listed")
