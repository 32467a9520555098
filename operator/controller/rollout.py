"""Take a node's rollout steps: cordon, evict, write the NodePartition, verify, uncordon.

Each step is written to the plan's status *before* it is taken (planner/rollout/records.py holds the
record), so an operator killed at any point re-takes the recorded step when it comes back.
Every step is safe to take twice: cordoning marks the node with an annotation in the same
write (so only a node migplan cordoned is ever uncordoned by it), eviction skips pods that
are gone or already terminating, the NodePartition write is idempotent, and verification
only reads. Eviction takes only the pod the plan named, where it named it: the UID of each
is read on the node when its rollout begins and the Eviction API is asked with that UID as
a precondition; a pod that moved or was made again under the same name is never evicted
(the node is rolled back and planned again).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any

import structlog

from migplan.operator.controller import metrics, mig_manager
from migplan.operator.dra import steer
from migplan.operator.dra.devices import DeviceKind
from migplan.operator.gpu_operator import AGENT_OWNED, MIG_MANAGER_DEPLOY_LABEL, GpuOperatorSettings
from migplan.operator.kube.core import PodReplacedError
from migplan.operator.kube.seam import Kube
from migplan.planner.api.nodepartition import NodePartition, NodePartitionSpec, NodePhase
from migplan.planner.api.spec import Actuator, DraMode
from migplan.planner.hardware.layout import Instance, Layout
from migplan.planner.hardware.resources import is_mig_resource, resource_name
from migplan.planner.rollout.records import NodeRollout, NodeStep
from migplan.planner.rollout.schedule import parse_timestamp, timestamp

log = structlog.get_logger("migplan.rollout")

CORDONED_BY = "migplan.io/cordoned-by"
"""Node annotation naming the plan that cordoned the node; only that plan uncordons it."""
AGENT_FAILURES = frozenset(
    {NodePhase.INVALID, NodePhase.FAILED, NodePhase.BLOCKED, NodePhase.RESET_REQUIRED}
)
DEFAULT_MIG_CONFIG_MAP = ("gpu-operator", "migplan-mig-parted-config")
EventSink = Callable[[str, str, str], None]
"""(type Normal|Warning, reason, message) -> posts an event on the plan."""
Boundary = Callable[[str, NodeStep], None]
"""Called at each step boundary: ("before", step) once the step is recorded and before it is
taken, ("after", step) once it is taken and before the next is recorded. Tests raise or exit
here to stop the operator where a crash would."""


def no_boundary(when: str, step: NodeStep) -> None:
    """The production boundary: nothing happens between steps."""


class _Eviction(Enum):
    """What asking to evict one planned pod came to."""

    GONE = "gone"
    REPLACED = "replaced"
    """Not the pod the rollout began with (another UID, or on another node): not evicted."""
    TERMINATING = "terminating"
    REFUSED = "refused"


@dataclass(frozen=True)
class _Refusal:
    reason: str
    tries: int
    retry_at: float


@dataclass
class NodeStepper:
    """Advances one plan's nodes through their rollout steps."""

    api: Kube
    plan: str
    plan_generation: int
    drain_timeout: float
    agent_timeout: float
    events: EventSink
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    actuator: Actuator = Actuator.AGENT
    mig_config_map: tuple[str, str] = DEFAULT_MIG_CONFIG_MAP
    """(namespace, name) of the ConfigMap mig-manager reads (mig-manager actuator)."""
    gpu_operator: GpuOperatorSettings = field(default_factory=GpuOperatorSettings)
    mig_config_propagation: float = 90.0
    """Seconds from writing mig-manager's ConfigMap until its mounted file shows the change
    (kubelet's sync period, 60 s by default, plus its cache)."""
    dra_mode: DraMode | None = None
    """`steer`: the node's GPUs are DynamicMIG's; its layouts are kept with device taints."""
    boundary: Boundary = no_boundary
    _refusals: dict[str, _Refusal] = field(default_factory=dict)
    """Per pod, the last refused eviction: why, how often, and when to try again."""
    _claims: list[dict[str, Any]] | None = None
    """The cluster's ResourceClaims, read once per stepper (one round of the ticker)."""

    @property
    def steering(self) -> bool:
        """Whether nodes are steered with device taints instead of laid out."""
        return self.dra_mode is DraMode.STEER

    def advance(self, record: NodeRollout) -> NodeRollout:
        """Take the node's steps until one has to wait or the node is finished; returns the
        record as last written to status."""
        while not record.finished:
            following = self._take(record)
            if following is None:
                return record
            record = self._record(record, following)
        return record

    def _record(self, previous: NodeRollout, record: NodeRollout) -> NodeRollout:
        """Write `record` to the plan's status; the step it names is taken after this."""
        now = self.clock()
        if record.step is not previous.step:
            if previous.since:
                metrics.STEP_SECONDS.labels(step=previous.step.value).observe(
                    (now - parse_timestamp(previous.since)).total_seconds()
                )
            record = record.model_copy(update={"since": timestamp(now)})
        self.api.plans.patch_plan_status(
            name=self.plan,
            status={
                "rollout": {"nodes": {record.node: record.model_dump(mode="json", by_alias=True)}}
            },
        )
        log.info(
            "step",
            plan=self.plan,
            node=record.node,
            step=record.step.value,
            message=record.message,
        )
        if record.finished:
            result = record.step.value
            metrics.NODES_RECONFIGURED.labels(result=result).inc()
            kind = "Normal" if record.step is NodeStep.DONE else "Warning"
            self.events(kind, f"Node{result}", f"{record.node}: {record.message or result}")
        self.boundary("before", record.step)
        return record

    def _take(self, record: NodeRollout) -> NodeRollout | None:
        """Take the recorded step; the record of the next step, or None to wait."""
        step = record.step
        following = {
            NodeStep.PENDING: self._check_fresh,
            NodeStep.CORDONING: self._cordon,
            NodeStep.EVICTING: self._evict,
            NodeStep.PARTITIONING: self._partition,
            NodeStep.VERIFYING: self._verify,
            NodeStep.UNCORDONING: self._uncordon,
            NodeStep.ROLLING_BACK: self._roll_back,
        }[step](record)
        if following is not None and following.step is not step:
            self.boundary("after", step)
        return following

    def _in_step(self, record: NodeRollout) -> float:
        """Seconds the node has been in its current step."""
        since = parse_timestamp(record.since) if record.since else self.clock()
        return (self.clock() - since).total_seconds()

    def _next(self, record: NodeRollout, step: NodeStep, message: str | None) -> NodeRollout:
        return record.model_copy(update={"step": step, "message": message})

    def _stale(self, record: NodeRollout, step: NodeStep, message: str) -> NodeRollout:
        """Give the node up because the cluster moved under the plan (planned again after
        this rollout)."""
        return self._next(record.model_copy(update={"stale": True}), step, message)

    def _observed(
        self, node: str
    ) -> tuple[dict[int, str], dict[int, dict[str, str]], dict[str, Any]]:
        """Layouts and in-use instances the node's agent reports, and its status (for a
        steered node: the instances its claims hold)."""
        if self.steering:
            if self._claims is None:  # once per round: every steered node is checked
                self._claims = self.api.dra.list_objects(plural="resourceclaims")
            layouts, in_use = steer.observed(self.api, node=node, claims=self._claims)
            return layouts, in_use, {}
        found = self.api.plans.get_node_partition(name=node) or {}
        status = found.get("status") or {}
        gpus = status.get("gpus") or []
        layouts = {int(g["index"]): str(g.get("layout", "-")) for g in gpus}
        in_use = {int(g["index"]): dict(g.get("inUse") or {}) for g in gpus}
        return layouts, in_use, status

    def _check_fresh(self, record: NodeRollout) -> NodeRollout:
        """Start the node, unless it no longer has the layouts the plan started from."""
        layouts, _, _ = self._observed(record.node)
        stale = [
            f"GPU {b.index} has {layouts.get(b.index, 'nothing reported')}, planned from {b.layout}"
            for b in record.before
            if layouts.get(b.index) != b.layout
        ]
        if stale:
            return self._stale(
                record,
                NodeStep.ROLLED_BACK,
                "the node changed since planning (" + "; ".join(stale) + "): left as it is; "
                "planned again after this rollout",
            )
        if self.steering and not any(
            d.kind is DeviceKind.SLOT for d in steer.node_devices(self.api, node=record.node)
        ):
            return self._next(
                record,
                NodeStep.ROLLED_BACK,
                "dra.mode steer, but NVIDIA's DRA driver publishes no DynamicMIG slots on the "
                "node: left as it is",
            )
        if (
            self.actuator is Actuator.AGENT
            and not self.steering
            and mig_manager.disable_on_node(self.api, node=record.node)
        ):
            self.events(
                "Normal",
                "MigManagerDisabled",
                f"{record.node}: {MIG_MANAGER_DEPLOY_LABEL}=false and "
                f"{mig_manager.CONFIG_LABEL}={AGENT_OWNED}, so a mig-manager "
                "(re)start cannot rebuild the GPUs migplan's agent lays out",
            )
        if record.evict:
            uids, elsewhere = self._pods_to_evict(record)
            if elsewhere:
                return self._stale(
                    record,
                    NodeStep.ROLLED_BACK,
                    "pods the plan would evict are no longer on the node ("
                    + "; ".join(elsewhere)
                    + "): nobody evicted, left as it is; planned again after this rollout",
                )
            record = record.model_copy(update={"evict_uids": uids})
        if record.disruptive:
            return self._next(record, NodeStep.CORDONING, "cordoning")
        return self._next(record, NodeStep.PARTITIONING, "only free slices change: no cordon")

    def _pods_to_evict(self, record: NodeRollout) -> tuple[dict[str, str], list[str]]:
        """The UID of each pod the plan evicts that still runs on the node, and those that
        now run elsewhere (a same-named pod on another node is never the one to evict)."""
        uids: dict[str, str] = {}
        elsewhere = []
        for pod in record.evict:
            namespace, name = pod.split("/", 1)
            found = self.api.core.get_pod(namespace=namespace, name=name)
            if found is None:
                continue
            if found.spec.node_name != record.node:
                elsewhere.append(f"{pod} is on {found.spec.node_name or 'no node'}")
                continue
            uids[pod] = str(found.metadata.uid)
        return uids, elsewhere

    def _cordon(self, record: NodeRollout) -> NodeRollout:
        ours = self.api.core.cordon_node(name=record.node, annotation=CORDONED_BY, owner=self.plan)
        message = "cordoned" if ours else "already cordoned by someone else: it stays so afterwards"
        return self._next(record, NodeStep.EVICTING, message)

    def _evict(self, record: NodeRollout) -> NodeRollout | None:
        """Evict the planned pods (never others); move on once they are all gone."""
        layouts, in_use, _ = self._observed(record.node)
        holders = set()
        for target in record.gpus:
            current = Layout.parse(layouts.get(target.index, "-"))
            going = set(current.instances) - set(Layout.parse(target.layout).instances)
            holders |= {
                pod
                for instance, pod in in_use.get(target.index, {}).items()
                if Instance.parse(instance) in going
            }
        unexpected = sorted(holders - set(record.evict))
        if unexpected:
            return self._stale(
                record,
                NodeStep.ROLLING_BACK,
                "pods the plan did not expect hold instances that must go "
                f"({', '.join(unexpected)}); they are not evicted; planned again after this "
                "rollout",
            )
        refused, terminating, replaced = [], [], []
        for pod in record.evict:
            outcome, refusal = self._evict_one(record, pod)
            if outcome is _Eviction.REPLACED:
                replaced.append(pod)
            elif outcome is _Eviction.TERMINATING:
                terminating.append(pod)
            elif outcome is _Eviction.REFUSED:
                refused.append(f"{pod}: {refusal}")
        if replaced:
            return self._stale(
                record,
                NodeStep.ROLLING_BACK,
                "pods the plan named were replaced or moved since the rollout began ("
                + ", ".join(replaced)
                + "): they are not evicted; planned again after this rollout",
            )
        if not refused and not terminating:
            return self._next(record, NodeStep.PARTITIONING, "drained")
        if self._in_step(record) > self.drain_timeout:
            evicted = sorted(set(record.evict) - {r.split(":")[0] for r in refused})
            stuck = refused + [f"{p}: still terminating" for p in terminating]
            return self._next(
                record,
                NodeStep.ROLLING_BACK,
                f"drain timed out: {'; '.join(stuck)}"
                + (f" (evicted before giving up: {', '.join(evicted)})" if evicted else ""),
            )
        message = "; ".join(refused + [f"{p}: terminating" for p in terminating])
        if message != record.message:
            return self._next(record, NodeStep.EVICTING, message)
        return None

    def _evict_one(self, record: NodeRollout, pod: str) -> tuple[_Eviction, str | None]:
        """Evict one planned pod if it is still the pod the rollout began with, on this node;
        what happened, and why a refusal was (PodDisruptionBudgets, with back-off)."""
        namespace, name = pod.split("/", 1)
        found = self.api.core.get_pod(namespace=namespace, name=name)
        if found is None:
            return _Eviction.GONE, None
        uid = record.evict_uids.get(pod)
        if found.spec.node_name != record.node or (uid and found.metadata.uid != uid):
            return _Eviction.REPLACED, None
        if found.metadata.deletion_timestamp is not None:
            return _Eviction.TERMINATING, None
        last = self._refusals.get(pod)
        if last is not None and time.monotonic() < last.retry_at:
            return _Eviction.REFUSED, f"{last.reason} (retrying)"
        try:
            refusal = self.api.core.evict_pod(
                namespace=namespace, name=name, uid=str(found.metadata.uid)
            )
        except PodReplacedError:
            return _Eviction.REPLACED, None
        if refusal is None:
            metrics.EVICTIONS.inc()
            log.info("evicted", plan=self.plan, node=record.node, pod=pod)
            self.events("Normal", "Evicted", f"{pod} evicted from {record.node}")
            return _Eviction.TERMINATING, None
        metrics.EVICTIONS_REFUSED.inc()
        tries = (last.tries if last else 0) + 1
        backoff = min(2.0 * 2**tries, 60.0)
        self._refusals[pod] = _Refusal(refusal, tries, time.monotonic() + backoff)
        return _Eviction.REFUSED, refusal

    def _steer(self, record: NodeRollout) -> NodeRollout:
        """Taint the node's slots outside its target layouts (untainting those inside)."""
        desired = steer.desired_rules(
            plan=self.plan,
            node=record.node,
            targets={t.index: t.layout for t in record.gpus},
            devices=steer.node_devices(self.api, node=record.node),
        )
        created, deleted = steer.sync(self.api, plan=self.plan, node=record.node, desired=desired)
        return self._next(
            record,
            NodeStep.VERIFYING,
            f"{len(desired)} slots outside the plan tainted ({created} new, {deleted} untainted)",
        )

    def _verify_steer(self, record: NodeRollout) -> NodeRollout | None:
        desired = steer.desired_rules(
            plan=self.plan,
            node=record.node,
            targets={t.index: t.layout for t in record.gpus},
            devices=steer.node_devices(self.api, node=record.node),
        )
        have = steer.existing(self.api, plan=self.plan, node=record.node)
        if set(have) == set(desired):
            return self._next(record, NodeStep.UNCORDONING, "steered")
        if self._in_step(record) > self.agent_timeout:
            return self._next(record, NodeStep.PARTITIONING, "the taint rules drifted: again")
        return self._waiting(record, "waiting for the taint rules to be listed")

    def _partition(self, record: NodeRollout) -> NodeRollout | None:
        if self.steering:
            return self._steer(record)
        if self.actuator is Actuator.MIG_MANAGER:
            # The agent only reports on this node from now on: no target of its own to
            # enforce against what mig-manager makes.
            reporting = NodePartitionSpec(node_name=record.node, plan=self.plan)
            self.api.plans.apply_node_partition(body=NodePartition.for_node(reporting).body())
            return self._hand_to_mig_manager(record)
        staying = mig_manager.pods_on(self.api, node=record.node, settings=self.gpu_operator)
        if staying:
            if self._in_step(record) > self.agent_timeout:
                return self._next(
                    record,
                    NodeStep.ROLLING_BACK,
                    f"mig-manager ({', '.join(staying)}) still runs on the node after "
                    f"{self.agent_timeout:.0f} s with {MIG_MANAGER_DEPLOY_LABEL}="
                    "false: the agent changes nothing while it could rebuild the GPUs",
                )
            return self._waiting(record, f"waiting for mig-manager to leave: {', '.join(staying)}")
        target = NodePartitionSpec(
            node_name=record.node,
            plan=self.plan,
            plan_generation=self.plan_generation,
            gpus=record.gpus,
            evicted_pods=record.evict,
            evicted_pod_uids=dict(record.evict_uids),
            dra=self.dra_mode is DraMode.STATIC,
        )
        self.api.plans.apply_node_partition(body=NodePartition.for_node(target).body())
        written = self.api.plans.get_node_partition(name=record.node) or {}
        generation = int(written.get("metadata", {}).get("generation", 0))
        updated = record.model_copy(update={"generation": generation})
        return self._next(
            updated, NodeStep.VERIFYING, f"waiting for the agent to apply generation {generation}"
        )

    def _written(self, record: NodeRollout) -> NodeRollout:
        """The record with its config entries written (the reconciler writes them when it
        plans; a record from before that is written here)."""
        if record.mig_config and record.mig_config_retry and record.mig_config_written:
            return record
        namespace, config_map = self.mig_config_map
        name, retry = mig_manager.write_configs(
            self.api,
            targets={record.node: {t.index: t.layout for t in record.gpus}},
            namespace=namespace,
            config_map=config_map,
        )[record.node]
        return record.model_copy(
            update={
                "mig_config": name,
                "mig_config_retry": retry,
                "mig_config_written": timestamp(self.clock()),
            }
        )

    def _propagated(self, since: str | None) -> datetime | None:
        """When kubelet will have refreshed mig-manager's file after `since`, if not yet."""
        if since is None:
            return None
        # Status timestamps keep whole seconds: the write may have been up to 1 s later.
        ready = parse_timestamp(since) + timedelta(seconds=self.mig_config_propagation + 1)
        return ready if self.clock() < ready else None

    def _hand_to_mig_manager(self, record: NodeRollout) -> NodeRollout | None:
        """Point the node's label at its config once mig-manager's file can show it."""
        written = self._written(record)
        pending = self._propagated(written.mig_config_written)
        if pending is not None:
            message = (
                f"waiting until {timestamp(pending)} for kubelet to put {written.mig_config} "
                "into mig-manager's config file"
            )
            if written is not record:
                return self._next(written, NodeStep.PARTITIONING, message)
            return self._waiting(record, message)
        assert written.mig_config is not None
        mig_manager.point_at(self.api, node=record.node, name=written.mig_config)
        return self._next(
            written, NodeStep.VERIFYING, f"waiting for mig-manager to apply {written.mig_config}"
        )

    def _retry_mig_manager(self, record: NodeRollout) -> NodeRollout | None:
        """After mig-manager's first `failed`: wait one more propagation period (its file may
        have lagged), then point the label at the retry name, once."""
        if record.mig_config_failed is None:
            return self._next(
                record.model_copy(update={"mig_config_failed": timestamp(self.clock())}),
                NodeStep.VERIFYING,
                f"mig-manager reports failed for {record.mig_config}; retrying once with "
                f"{record.mig_config_retry} after {self.mig_config_propagation:.0f} s more",
            )
        if self._propagated(record.mig_config_failed) is not None:
            return None
        assert record.mig_config_retry is not None
        mig_manager.point_at(self.api, node=record.node, name=record.mig_config_retry)
        return self._next(
            record.model_copy(
                update={
                    "mig_config": record.mig_config_retry,
                    "since": timestamp(self.clock()),
                }
            ),
            NodeStep.VERIFYING,
            f"retrying: waiting for mig-manager to apply {record.mig_config_retry}",
        )

    def _verify_mig_manager(self, record: NodeRollout) -> NodeRollout | None:
        """Follow mig-manager's state label; then the agent's report and the allocatable
        resources must show the target's instance counts (mig-manager places them itself)."""
        config, state = mig_manager.state_of(self.api, node=record.node)
        layouts, _, _ = self._observed(record.node)
        late = self._in_step(record) > self.agent_timeout
        why = None
        if config != record.mig_config:
            why = f"the node's {mig_manager.CONFIG_LABEL} is {config!r}, not {record.mig_config!r}"
        elif state == "failed" and record.mig_config != record.mig_config_retry:
            if record.mig_config_retry:
                return self._retry_mig_manager(record)
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
                mismatch = self._allocatable_mismatch(record.node, layouts)
                if mismatch is None:
                    return self._next(record, NodeStep.UNCORDONING, "applied by mig-manager")
                waiting = mismatch
            else:
                waiting = "waiting for the agent to report what mig-manager made"
            if late:
                why = f"mig-manager reported success but {waiting.removeprefix('waiting for ')}"
        elif late:
            why = f"mig-manager stuck in {state or 'no state'} for {self.agent_timeout:.0f} s"
        if why is None:
            return self._waiting(record, f"mig-manager: {state or 'not started'}")
        shown = ", ".join(f"GPU {i} has {v}" for i, v in sorted(layouts.items()))
        return self._next(
            record.model_copy(update={"failure": why}), NodeStep.UNCORDONING, f"{why}; {shown}"
        )

    def _verify(self, record: NodeRollout) -> NodeRollout | None:
        if self.steering:
            return self._verify_steer(record)
        if self.actuator is Actuator.MIG_MANAGER:
            return self._verify_mig_manager(record)
        layouts, _, status = self._observed(record.node)
        generation = record.generation or 0
        want = {t.index: t.layout for t in record.gpus}
        applied = int(status.get("appliedGeneration") or 0) >= generation
        if (
            applied
            and status.get("phase") == NodePhase.APPLIED
            and all(layouts.get(i) == v for i, v in want.items())
        ):
            mismatch = self._allocatable_mismatch(record.node, layouts)
            if mismatch is None:
                return self._next(record, NodeStep.UNCORDONING, "applied")
            return self._waiting(record, mismatch)
        ready: dict[str, Any] = next(
            (c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {}
        )
        failed = (
            status.get("phase") in AGENT_FAILURES
            and int(ready.get("observedGeneration") or 0) >= generation
        )
        late = self._in_step(record) > self.agent_timeout
        if not failed and not late:
            return self._waiting(record, f"waiting for the agent to apply generation {generation}")
        why = (
            f"the agent reports {status.get('phase')}: {ready.get('message', '')}"
            if failed
            else f"the agent did not apply generation {generation} in {self.agent_timeout:.0f} s"
        )
        self._pin(record, layouts)
        return self._next(
            record.model_copy(update={"failure": why}),
            NodeStep.UNCORDONING,
            f"{why}; {self._which(record, layouts)}",
        )

    def _waiting(self, record: NodeRollout, message: str) -> NodeRollout | None:
        if message != record.message:
            return self._next(record, record.step, message)
        return None

    def _which(self, record: NodeRollout, layouts: dict[int, str]) -> str:
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

    def _pin(self, record: NodeRollout, layouts: dict[int, str]) -> None:
        """Point the NodePartition at what the node has, so the agent stops changing it."""
        found = self.api.plans.get_node_partition(name=record.node)
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
        self.api.plans.apply_node_partition(body={**found, "spec": spec})

    def _allocatable_mismatch(self, node: str, layouts: dict[int, str]) -> str | None:
        if self.dra_mode is DraMode.STATIC:
            return self._published_mismatch(node, layouts)
        want: Counter[str] = Counter()
        for layout in layouts.values():
            want.update(resource_name(i.profile) for i in Layout.parse(layout).instances)
        allocatable = self.api.core.get_node(name=node).status.allocatable or {}
        have = Counter({k: int(v) for k, v in allocatable.items() if is_mig_resource(k) and int(v)})
        if have == want:
            return None
        return f"waiting for the device plugin: node offers {dict(have)}, NVML has {dict(want)}"

    def _published_mismatch(self, node: str, layouts: dict[int, str]) -> str | None:
        """Whether NVIDIA's DRA driver publishes the node's instances (static MIG devices)."""
        devices = [d for d in steer.node_devices(self.api, node=node) if d.kind is DeviceKind.MIG]
        have = sorted(f"{d.minor}:{d.instance}" for d in devices)
        want = sorted(
            f"{i}:{x}" for i, layout in layouts.items() for x in Layout.parse(layout).instances
        )
        if have == want:
            return None
        return f"waiting for the DRA kubelet plugin: it publishes {have}, NVML has {want}"

    def _uncordon(self, record: NodeRollout) -> NodeRollout:
        self._release(record.node)
        if record.failure:
            return self._next(record, NodeStep.FAILED, record.message)
        return self._next(record, NodeStep.DONE, "reconfigured")

    def _roll_back(self, record: NodeRollout) -> NodeRollout:
        self._release(record.node)
        return self._next(
            record,
            NodeStep.ROLLED_BACK,
            f"{record.message}; geometry left as it was, node uncordoned",
        )

    def _release(self, name: str) -> None:
        """Uncordon the node if this plan cordoned it."""
        self.api.core.uncordon_node(name=name, annotation=CORDONED_BY, owner=self.plan)


def release_nodes(api: Kube, *, plan: str) -> list[str]:
    """Uncordon every GPU node that `plan` cordoned; their names."""
    from migplan.operator.cluster_inventory import MIG_CAPABLE

    released = []
    for node in api.core.list_nodes(label_selector=MIG_CAPABLE):
        name = str(node.metadata.name)
        if (node.metadata.annotations or {}).get(CORDONED_BY) == plan and api.core.uncordon_node(
            name=name, annotation=CORDONED_BY, owner=plan
        ):
            released.append(name)
    return released
