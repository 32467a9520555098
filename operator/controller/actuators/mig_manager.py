"""NVIDIA's mig-manager as the actuator: the operator writes mig-parted configs into its
ConfigMap, waits for kubelet to put them into its file, points the node's config label at
them and follows its state label; the agent only reports."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from migplan.operator.controller import mig_manager
from migplan.operator.controller.actuators.base import Observed, Setting
from migplan.operator.controller.actuators.reports import offered_mismatch, reported
from migplan.operator.controller.steps import next_step, waiting
from migplan.planner.api.nodepartition import NodePartition, NodePartitionSpec
from migplan.planner.hardware.layout import Layout
from migplan.planner.rollout.records import NodeRollout, NodeStep
from migplan.planner.rollout.schedule import parse_timestamp, timestamp


@dataclass(frozen=True)
class MigManagerActuator:
    """mig-manager applies the mig-parted config the node's label names."""

    setting: Setting

    def observed(self, node: str) -> Observed:
        return reported(self.setting.api, node=node)

    def prepare(self, record: NodeRollout) -> str | None:
        return None

    def partition(self, record: NodeRollout) -> NodeRollout | None:
        """The agent only reports on this node from now on (no target of its own to
        enforce against what mig-manager makes); then hand the target to mig-manager."""
        reporting = NodePartitionSpec(node_name=record.node, plan=self.setting.plan)
        self.setting.api.plans.apply_node_partition(body=NodePartition.for_node(reporting).body())
        return self._hand_over(record)

    def _written(self, record: NodeRollout) -> NodeRollout:
        """The record with its config entries written (the reconciler writes them when it
        plans; a record from before that is written here)."""
        if record.mig_config and record.mig_config_retry and record.mig_config_written:
            return record
        setting = self.setting
        namespace, config_map = setting.mig_config_map
        name, retry = mig_manager.write_configs(
            setting.api,
            targets={record.node: {t.index: t.layout for t in record.gpus}},
            namespace=namespace,
            config_map=config_map,
        )[record.node]
        return record.model_copy(
            update={
                "mig_config": name,
                "mig_config_retry": retry,
                "mig_config_written": timestamp(setting.clock()),
            }
        )

    def _propagated(self, since: str | None) -> datetime | None:
        """When kubelet will have refreshed mig-manager's file after `since`, if not yet."""
        if since is None:
            return None
        # Status timestamps keep whole seconds: the write may have been up to 1 s later.
        delay = timedelta(seconds=self.setting.mig_config_propagation + 1)
        ready = parse_timestamp(since) + delay
        return ready if self.setting.clock() < ready else None

    def _hand_over(self, record: NodeRollout) -> NodeRollout | None:
        """Point the node's label at its config once mig-manager's file can show it."""
        written = self._written(record)
        pending = self._propagated(written.mig_config_written)
        if pending is not None:
            message = (
                f"waiting until {timestamp(pending)} for kubelet to put {written.mig_config} "
                "into mig-manager's config file"
            )
            if written is not record:
                return next_step(written, NodeStep.PARTITIONING, message)
            return waiting(record, message)
        assert written.mig_config is not None
        mig_manager.point_at(self.setting.api, node=record.node, name=written.mig_config)
        return next_step(
            written, NodeStep.VERIFYING, f"waiting for mig-manager to apply {written.mig_config}"
        )

    def _retry(self, record: NodeRollout) -> NodeRollout | None:
        """After mig-manager's first `failed`: wait one more propagation period (its file may
        have lagged), then point the label at the retry name, once."""
        setting = self.setting
        if record.mig_config_failed is None:
            return next_step(
                record.model_copy(update={"mig_config_failed": timestamp(setting.clock())}),
                NodeStep.VERIFYING,
                f"mig-manager reports failed for {record.mig_config}; retrying once with "
                f"{record.mig_config_retry} after {setting.mig_config_propagation:.0f} s more",
            )
        if self._propagated(record.mig_config_failed) is not None:
            return None
        assert record.mig_config_retry is not None
        mig_manager.point_at(setting.api, node=record.node, name=record.mig_config_retry)
        return next_step(
            record.model_copy(
                update={
                    "mig_config": record.mig_config_retry,
                    "since": timestamp(setting.clock()),
                }
            ),
            NodeStep.VERIFYING,
            f"retrying: waiting for mig-manager to apply {record.mig_config_retry}",
        )

    def verify(self, record: NodeRollout) -> NodeRollout | None:
        """Follow mig-manager's state label; then the agent's report and the allocatable
        resources must show the target's instance counts (mig-manager places them itself)."""
        setting = self.setting
        config, state = mig_manager.state_of(setting.api, node=record.node)
        layouts = self.observed(record.node).layouts
        late = setting.late(record)
        why = None
        if config != record.mig_config:
            why = f"the node's {mig_manager.CONFIG_LABEL} is {config!r}, not {record.mig_config!r}"
        elif state == "failed" and record.mig_config != record.mig_config_retry:
            if record.mig_config_retry:
                return self._retry(record)
            why = f"mig-manager reports {mig_manager.STATE_LABEL}=failed"
        elif state == "failed":
            why = (
                f"mig-manager reports {mig_manager.STATE_LABEL}=failed for the retry too; "
                "its log says why (a config missing from its file, or a GPU still in use)"
            )
        elif state == "success":
            want = {t.index: Layout.parse(t.layout).profile_counts() for t in record.gpus}
            have = {i: Layout.parse(v).profile_counts() for i, v in layouts.items()}
            if all(have.get(i) == c for i, c in want.items()):
                mismatch = offered_mismatch(
                    setting.api, node=record.node, layouts=layouts, dra_mode=setting.dra_mode
                )
                if mismatch is None:
                    return next_step(record, NodeStep.UNCORDONING, "applied by mig-manager")
                wait_for = mismatch
            else:
                wait_for = "waiting for the agent to report what mig-manager made"
            if late:
                why = f"mig-manager reported success but {wait_for.removeprefix('waiting for ')}"
        elif late:
            why = f"mig-manager stuck in {state or 'no state'} for {setting.agent_timeout:.0f} s"
        if why is None:
            return waiting(record, f"mig-manager: {state or 'not started'}")
        shown = ", ".join(f"GPU {i} has {v}" for i, v in sorted(layouts.items()))
        return next_step(
            record.model_copy(update={"failure": why}), NodeStep.UNCORDONING, f"{why}; {shown}"
        )
