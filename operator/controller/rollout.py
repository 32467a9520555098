"""Take a node's rollout steps: cordon, evict, write the NodePartition, verify, uncordon.

Each step is recorded *before* it is taken (planner/rollout/records.py holds the record,
kept in the node's NodePartition by rollout_book.py), so an operator killed at any point
re-takes the recorded step when it comes back. Every step is safe to take twice: cordoning
marks the node with an annotation in the same write (so only a node migplan cordoned is ever
uncordoned by it), eviction skips pods that are gone or already terminating, the
NodePartition write is idempotent, and verification only reads. How a drained node's GPUs
are changed and checked is its actuator's part (`actuators/`: migplan's agent, mig-manager,
or DRA device taints). Eviction takes only the pod the plan named, where it named it: the
UID of each is read on the node when its rollout begins and the Eviction API is asked with
that UID as a precondition; a pod that moved or was made again under the same name is never
evicted (the node is rolled back and planned again).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum

import structlog

from migplan.operator.cluster_inventory import MIG_CAPABLE
from migplan.operator.controller import metrics
from migplan.operator.controller.actuators import actuator_for
from migplan.operator.controller.actuators.base import (
    DEFAULT_MIG_CONFIG_MAP,
    EventSink,
    NodeActuator,
    Setting,
)
from migplan.operator.controller.steps import given_up, next_step, seconds_in_step
from migplan.operator.gpu_operator import GpuOperatorSettings
from migplan.operator.kube.core import PodReplacedError
from migplan.operator.kube.seam import Kube
from migplan.planner.api.spec import Actuator, DraMode
from migplan.planner.hardware.layout import Instance, Layout
from migplan.planner.rollout.records import NodeRollout, NodeStep
from migplan.planner.rollout.schedule import parse_timestamp, timestamp

log = structlog.get_logger("migplan.rollout")

CORDONED_BY = "migplan.io/cordoned-by"
"""Node annotation naming the plan that cordoned the node; only that plan uncordons it."""
NodeEventSink = Callable[[str, str, str, str], None]
"""(node, type Normal|Warning, reason, message) -> posts an event on the Node."""
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
    keep: Callable[[NodeRollout], None]
    """Keeps a node's record durably (the book of the plan's rollout)."""
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
    node_events: NodeEventSink | None = None
    """Where node-level steps are told on the Node too (cordoned, evicted, finished)."""
    _refusals: dict[str, _Refusal] = field(default_factory=dict)
    """Per pod, the last refused eviction: why, how often, and when to try again."""
    _actuator: NodeActuator | None = None

    @property
    def actuator_of_nodes(self) -> NodeActuator:
        """How this plan's nodes are changed and checked (made once per stepper: one round
        of the ticker)."""
        if self._actuator is None:
            setting = Setting(
                api=self.api,
                plan=self.plan,
                plan_generation=self.plan_generation,
                agent_timeout=self.agent_timeout,
                events=self.events,
                clock=self.clock,
                dra_mode=self.dra_mode,
                gpu_operator=self.gpu_operator,
                mig_config_map=self.mig_config_map,
                mig_config_propagation=self.mig_config_propagation,
            )
            self._actuator = actuator_for(setting, kind=self.actuator)
        return self._actuator

    def advance(self, record: NodeRollout) -> NodeRollout:
        """Take the node's steps until one has to wait or the node is finished; returns the
        record as last kept."""
        while not record.finished:
            following = self._take(record)
            if following is None:
                return record
            record = self._record(record, following)
        return record

    def _record(self, previous: NodeRollout, record: NodeRollout) -> NodeRollout:
        """Keep `record`; the step it names is taken after this."""
        now = self.clock()
        if record.step is not previous.step:
            if previous.since:
                metrics.STEP_SECONDS.labels(plan=self.plan, step=previous.step.value).observe(
                    (now - parse_timestamp(previous.since)).total_seconds()
                )
            record = record.model_copy(update={"since": timestamp(now)})
        self.keep(record)
        log.info(
            "step",
            plan=self.plan,
            node=record.node,
            step=record.step.value,
            message=record.message,
        )
        if record.finished:
            result = record.step.value
            metrics.NODES_RECONFIGURED.labels(plan=self.plan, result=result).inc()
            kind = "Normal" if record.step is NodeStep.DONE else "Warning"
            self.events(kind, f"Node{result}", f"{record.node}: {record.message or result}")
            self._on_node(record.node, kind, f"Migplan{result}", record.message or result)
        self.boundary("before", record.step)
        return record

    def _take(self, record: NodeRollout) -> NodeRollout | None:
        """Take the recorded step; the record of the next step, or None to wait."""
        step = record.step
        following = {
            NodeStep.PENDING: self._check_fresh,
            NodeStep.CORDONING: self._cordon,
            NodeStep.EVICTING: self._evict,
            NodeStep.PARTITIONING: self.actuator_of_nodes.partition,
            NodeStep.VERIFYING: self.actuator_of_nodes.verify,
            NodeStep.UNCORDONING: self._uncordon,
            NodeStep.ROLLING_BACK: self._roll_back,
        }[step](record)
        if following is not None and following.step is not step:
            self.boundary("after", step)
        return following

    def _in_step(self, record: NodeRollout) -> float:
        return seconds_in_step(record, self.clock())

    def _check_fresh(self, record: NodeRollout) -> NodeRollout:
        """Start the node, unless it no longer has the layouts the plan started from (or its
        actuator cannot take it)."""
        layouts = self.actuator_of_nodes.observed(record.node).layouts
        stale = [
            f"GPU {b.index} has {layouts.get(b.index, 'nothing reported')}, planned from {b.layout}"
            for b in record.before
            if layouts.get(b.index) != b.layout
        ]
        if stale:
            return given_up(
                record,
                NodeStep.ROLLED_BACK,
                "the node changed since planning (" + "; ".join(stale) + "): left as it is; "
                "planned again after this rollout",
            )
        refused = self.actuator_of_nodes.prepare(record)
        if refused is not None:
            return next_step(record, NodeStep.ROLLED_BACK, refused)
        if record.evict:
            uids, elsewhere = self._pods_to_evict(record)
            if elsewhere:
                return given_up(
                    record,
                    NodeStep.ROLLED_BACK,
                    "pods the plan would evict are no longer on the node ("
                    + "; ".join(elsewhere)
                    + "): nobody evicted, left as it is; planned again after this rollout",
                )
            record = record.model_copy(update={"evict_uids": uids})
        if record.disruptive:
            return next_step(record, NodeStep.CORDONING, "cordoning")
        return next_step(record, NodeStep.PARTITIONING, "only free slices change: no cordon")

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
        if ours:
            self._on_node(record.node, "Normal", "MigplanCordoned", f"cordoned by plan {self.plan}")
        return next_step(record, NodeStep.EVICTING, message)

    def _on_node(self, node: str, kind: str, reason: str, message: str) -> None:
        if self.node_events is not None:
            self.node_events(node, kind, reason, message)

    def _evict(self, record: NodeRollout) -> NodeRollout | None:
        """Evict the planned pods (never others); move on once they are all gone."""
        seen = self.actuator_of_nodes.observed(record.node)
        layouts, in_use = seen.layouts, seen.in_use
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
            return given_up(
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
            return given_up(
                record,
                NodeStep.ROLLING_BACK,
                "pods the plan named were replaced or moved since the rollout began ("
                + ", ".join(replaced)
                + "): they are not evicted; planned again after this rollout",
            )
        if not refused and not terminating:
            return next_step(record, NodeStep.PARTITIONING, "drained")
        if self._in_step(record) > self.drain_timeout:
            evicted = sorted(set(record.evict) - {r.split(":")[0] for r in refused})
            stuck = refused + [f"{p}: still terminating" for p in terminating]
            return next_step(
                record,
                NodeStep.ROLLING_BACK,
                f"drain timed out: {'; '.join(stuck)}"
                + (f" (evicted before giving up: {', '.join(evicted)})" if evicted else ""),
            )
        message = "; ".join(refused + [f"{p}: terminating" for p in terminating])
        if message != record.message:
            return next_step(record, NodeStep.EVICTING, message)
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
            metrics.EVICTIONS.labels(plan=self.plan).inc()
            log.info("evicted", plan=self.plan, node=record.node, pod=pod)
            self.events("Normal", "Evicted", f"{pod} evicted from {record.node}")
            self._on_node(record.node, "Normal", "MigplanEvicted", f"{pod} evicted ({self.plan})")
            return _Eviction.TERMINATING, None
        metrics.EVICTIONS_REFUSED.labels(plan=self.plan).inc()
        tries = (last.tries if last else 0) + 1
        backoff = min(2.0 * 2**tries, 60.0)
        self._refusals[pod] = _Refusal(refusal, tries, time.monotonic() + backoff)
        return _Eviction.REFUSED, refusal

    def _uncordon(self, record: NodeRollout) -> NodeRollout:
        self._release(record.node)
        if record.failure:
            return next_step(record, NodeStep.FAILED, record.message)
        return next_step(record, NodeStep.DONE, "reconfigured")

    def _roll_back(self, record: NodeRollout) -> NodeRollout:
        self._release(record.node)
        return next_step(
            record,
            NodeStep.ROLLED_BACK,
            f"{record.message}; geometry left as it was, node uncordoned",
        )

    def _release(self, name: str) -> None:
        """Uncordon the node if this plan cordoned it."""
        self.api.core.uncordon_node(name=name, annotation=CORDONED_BY, owner=self.plan)


def release_nodes(api: Kube, *, plan: str) -> list[str]:
    """Uncordon every GPU node that `plan` cordoned; their names."""
    released = []
    for node in api.core.list_nodes(label_selector=MIG_CAPABLE):
        name = str(node.metadata.name)
        if (node.metadata.annotations or {}).get(CORDONED_BY) == plan and api.core.uncordon_node(
            name=name, annotation=CORDONED_BY, owner=plan
        ):
            released.append(name)
    return released
