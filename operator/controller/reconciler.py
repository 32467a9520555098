"""The operator's decisions for one GPUPartitionPlan, free of kopf so tests and the CLI can
drive them: plan on a spec change, and on every tick re-plan when a rebalance is due, then
advance the rollout inside the maintenance window.

Every call re-reads the plan from the API (kopf's cached body lags behind our own status
writes) and holds the plan's lock, so a tick and a spec change never interleave.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from kubernetes.client.exceptions import ApiException

from migplan.operator.conditions import condition, merge_conditions
from migplan.operator.controller import metrics, mig_manager
from migplan.operator.controller.actuators.base import DEFAULT_MIG_CONFIG_MAP
from migplan.operator.controller.conflicts import conflicting_plan
from migplan.operator.controller.planning import plan_status, replacing_plan
from migplan.operator.controller.rollout import (
    Boundary,
    NodeEventSink,
    NodeStepper,
    no_boundary,
    release_nodes,
)
from migplan.operator.controller.rollout_book import RolloutBook, rollout_id
from migplan.operator.controller.scale_out import Outcome, ScaleOut
from migplan.operator.controller.scale_out_settings import ScaleOutSettings
from migplan.operator.gpu_operator import GpuOperatorSettings
from migplan.operator.kube.bodies import PlanBody
from migplan.operator.kube.seam import Kube
from migplan.operator.kueue.checks import Waiting
from migplan.operator.kueue.hook import KueueHook
from migplan.operator.skipped import Skipped
from migplan.planner.api.nodepartition import ConditionType
from migplan.planner.api.spec import (
    Actuator,
    DraMode,
    GPUPartitionPlan,
    PlanPhase,
    PlanSpec,
    duration_seconds,
)
from migplan.planner.errors import MigplanInputError
from migplan.planner.gc_pause import Settler, gc_paused
from migplan.planner.hardware.catalog import Catalog
from migplan.planner.pipeline import check_policy
from migplan.planner.plan import Plan
from migplan.planner.rollout.records import (
    NodeRollout,
    NodeStep,
    nodes_to_start,
    rollout_nodes,
    rollout_phase,
)
from migplan.planner.rollout.schedule import (
    is_due,
    next_run,
    parse_timestamp,
    timestamp,
    window_state,
)
from migplan.planner.schema import parse_model
from migplan.planner.status import ReplanReason, ScaleOutStatus

log = structlog.get_logger("migplan.operator")

SETTLER = Settler()
"""One a process: every plan's re-plans settle the same heap."""

STALE_REPLANS = 3
"""Automatic re-plans after nodes were given up because the cluster changed under the plan."""
TICK_FAILED = ConditionType.TICK_FAILED
"""Condition set while the plan's periodic work fails (cleared by the next good tick)."""
ARRIVAL_RETRY = 30.0
"""Seconds between re-plans for a node that joined for a scale-out but that the last plan
left out (preflight refused it while the GPU Operator's pods start, say)."""
MESSAGE_LIMIT = 1024
"""Longest error message written into a condition or an event."""
REBALANCE = "migplan.io/rebalance"
"""Annotation `migplan rebalance` sets (a timestamp): re-plan now."""
Events = Callable[[Mapping[str, Any], str, str, str], None]
"""(plan object, Normal|Warning, reason, message) -> posts an event on the plan."""


STEP_WORKERS = 8
"""Nodes whose steps are taken at once. A node's steps are a few API calls each (its record,
the node, its events); one after another, on a loaded API server at 5,000 nodes (~0.8 s a
step), 50 nodes in hand took two minutes to start."""
FAILED_LISTED = 20
"""Nodes named in the Degraded condition's message (the rest are counted)."""
MAX_WARNED = 10_000
"""Skipped objects remembered as told (one Warning event each); past that, told again."""


@dataclass
class PlanController:
    """Plans and rolls out GPUPartitionPlans on the cluster behind `api`."""

    api: Kube
    catalog: Catalog
    events: Events
    agent_timeout: float = 600.0
    mig_config_map: tuple[str, str] = DEFAULT_MIG_CONFIG_MAP
    default_actuator: Actuator = Actuator.AGENT
    """The actuator of plans that name none."""
    gpu_operator: GpuOperatorSettings = field(default_factory=GpuOperatorSettings)
    mig_config_propagation: float = 90.0
    """Seconds kubelet may take to put a ConfigMap change into mig-manager's file."""
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    boundary: Boundary = no_boundary
    """Called at each node's step boundaries (tests stop the operator there)."""
    node_events: NodeEventSink | None = None
    """Posts an event on a Node (node name, Normal|Warning, reason, message)."""
    _locks: dict[str, threading.Lock] = field(default_factory=dict)
    _guard: threading.Lock = field(default_factory=threading.Lock)
    _warned: set[tuple[str | None, str]] = field(default_factory=set)
    """Skipped objects already told so with an event: (uid, why)."""
    scale_out: ScaleOutSettings = field(default_factory=ScaleOutSettings)
    """Where the placeholders that ask the autoscaler for nodes live (spec.scaleOut)."""
    book: RolloutBook = field(init=False)
    """Each plan's rollout records (kept in the NodePartitions)."""
    kueue: KueueHook = field(init=False)
    """Kueue, as this controller's plans see it (nothing where it is not installed)."""
    scaler: ScaleOut = field(init=False)

    def __post_init__(self) -> None:
        self.book = RolloutBook(self.api)
        self.kueue = KueueHook(self.api)
        self.scaler = ScaleOut(self.api, self.scale_out)

    def _warn_skipped(self, skipped: Sequence[Skipped]) -> None:
        """A Warning event on each object a pass left out, once per object and reason (the
        plan's status lists them every pass)."""
        for s in skipped:
            key = (s.uid or s.where, s.why)
            with self._guard:
                if key in self._warned:
                    continue
                if len(self._warned) >= MAX_WARNED:  # objects come and go: forget, re-warn
                    self._warned.clear()
                self._warned.add(key)
            try:
                self.api.core.create_event(
                    obj=s.body(),
                    kind="Warning",
                    reason="MigplanSkipped",
                    message=f"migplan does not plan for this {s.kind}: {s.why}",
                )
            except ApiException as exc:  # the note on the plan still says it
                log.warning("event not posted", object=s.where, status=exc.status)

    def _records(self, body: PlanBody) -> dict[str, NodeRollout]:
        """The records of the plan's current rollout, node -> record."""
        rollout = (body.get("status") or {}).get("rollout") or {}
        return self.book.records(
            body["metadata"]["name"],
            input_hash=rollout.get("id") or rollout.get("inputHash"),
            legacy=rollout.get("nodes") if isinstance(rollout.get("nodes"), dict) else None,
        )

    def _in_progress(self, body: PlanBody) -> bool:
        """Whether some node of the plan's rollout is in hand."""
        return any(r.in_progress for r in self._records(body).values())

    def _lock(self, name: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(name, threading.Lock())

    def _manifest(self, body: PlanBody) -> GPUPartitionPlan | None:
        """The plan, its actuator resolved to the default where it names none; or None after
        marking the plan Invalid."""
        name = body["metadata"]["name"]
        try:
            manifest = parse_model(GPUPartitionPlan, body, source=f"GPUPartitionPlan {name}")
            if manifest.spec.policy.allowed_profiles:
                check_policy(manifest.spec.policy, self.catalog)
        except MigplanInputError as exc:
            self._conclude(body, PlanPhase.INVALID, warning=("Invalid", str(exc)))
            return None
        return manifest.with_default_actuator(self.default_actuator)

    def _write(self, body: PlanBody, status: dict[str, Any]) -> None:
        self.api.plans.patch_plan_status(name=body["metadata"]["name"], status=status)

    def _conclude(
        self,
        body: PlanBody,
        phase: PlanPhase,
        *,
        warning: tuple[str, str] | None = None,
        status: dict[str, Any] | None = None,
    ) -> None:
        """End a pass in `phase`: write it (with observedGeneration and any other `status`
        fields), post the `warning` (reason, message) if any, and set the phase metric."""
        self._write(
            body, {"phase": phase, "observedGeneration": _generation(body), **(status or {})}
        )
        if warning is not None:
            self.events(body, "Warning", *warning)
        metrics.set_phase(body["metadata"]["name"], phase)

    def spec_changed(self, name: str) -> None:
        """A new or changed spec: plan now, or after the nodes in hand if a rollout runs."""
        with self._lock(name):
            body = self.api.plans.get_plan(name=name)
            if body is None:
                return
            if self._in_progress(body):
                self._write(
                    body, {"replanPending": True, "replanReason": ReplanReason.SPEC_CHANGED}
                )
                self.events(
                    body,
                    "Normal",
                    "ReplanDeferred",
                    "spec changed: re-planning once the nodes in hand are finished",
                )
                return
            self._replan(body, reason="spec")

    def resumed(self, name: str) -> None:
        """The operator (re)started: plan only if the spec changed while it was away."""
        body = self.api.plans.get_plan(name=name)
        if body is None:
            return
        status = body.get("status") or {}
        if status.get("inputHash") and status.get("observedGeneration") == _generation(body):
            log.info("resumed", plan=name, phase=status.get("phase"))
            metrics.set_phase(name, status.get("phase"))
            return
        self.spec_changed(name)

    def forget(self, name: str) -> None:
        """The plan is being deleted: uncordon the nodes it cordoned (a node in hand keeps
        the geometry it has; its NodePartition stays, so its agent keeps reporting). Its
        DeviceTaintRules go in the ticker's next round (`PlanTicker`), which also catches
        deletions this handler never saw. Nodes that joined for its scale-out and are still
        kept from consolidation are let go (its placeholders go with it: it owns them)."""
        with self._lock(name):
            released = release_nodes(self.api, plan=name)
            body = self.api.plans.get_plan(name=name)
            arrived = ((body or {}).get("status") or {}).get("scaleOut") or {}
            for node in arrived.get("arrived") or ():
                self.scaler.release(node, plan=name)
            self.book.forget(name)
        if released:
            log.info("plan deleted mid-rollout: nodes uncordoned", plan=name, nodes=released)
        metrics.set_phase(name, None)

    def _replan(
        self, body: PlanBody, *, reason: str, manifest: GPUPartitionPlan | None = None
    ) -> None:
        """Plan `body` now (`manifest`: its spec, when the caller parsed it already). The
        cyclic collector stays paused until the plan is written, and what the process holds
        is then settled out of its sight (`planner/gc_pause.py`): the collections a pass's
        new objects set off would otherwise run before the write, over the informer caches."""
        with gc_paused(settler=SETTLER):
            self._replan_now(body, reason=reason, manifest=manifest)

    def _replan_now(
        self, body: PlanBody, *, reason: str, manifest: GPUPartitionPlan | None
    ) -> None:
        name = body["metadata"]["name"]
        manifest = manifest or self._manifest(body)
        if manifest is None:
            return
        status = body.get("status") or {}
        generation = _generation(body)
        now = self.clock()
        if manifest.spec.suspend:
            self._conclude(body, PlanPhase.SUSPENDED)
            return
        other = conflicting_plan(self.api, body)
        if other is not None:
            message = f"plan {other} selects some of the same nodes and came first: doing nothing"
            conflict = condition(
                ConditionType.CONFLICT, True, "OverlappingSelector", message, generation
            )
            self._conclude(
                body,
                PlanPhase.CONFLICT,
                warning=None
                if status.get("phase") == PlanPhase.CONFLICT
                else ("Conflict", message),
                status={"conditions": merge_conditions(status.get("conditions") or [], [conflict])},
            )
            return
        started, cpu = time.monotonic(), time.thread_time()
        try:
            result = plan_status(
                body=body,
                manifest=manifest,
                api=self.api,
                catalog=self.catalog,
                gpu_operator=self.gpu_operator,
            )
        except MigplanInputError as exc:
            self._conclude(body, PlanPhase.INVALID, warning=("Invalid", str(exc)))
            return
        planned_in, cpu = time.monotonic() - started, time.thread_time() - cpu
        metrics.observe_pass(
            name, seconds=planned_in, cpu=cpu, read=result.read_seconds, kept=result.kept
        )
        self._warn_skipped(result.skipped)
        new = result.status
        new["plan"] = replacing_plan(status.get("plan"), new["plan"])
        new["conditions"] = merge_conditions(
            status.get("conditions") or [],
            new["conditions"]
            + [
                condition(
                    ConditionType.CONFLICT,
                    False,
                    "NoOverlap",
                    "no other plan selects these nodes",
                    generation,
                )
            ],
        )
        new["replanPending"] = None
        new["replanReason"] = None
        if reason != "stale":
            new["staleReplans"] = 0
        new["lastPlanned"] = timestamp(now)
        if reason in ("cron", "requested"):
            new["lastRebalance"] = timestamp(now)
        annotation = (body["metadata"].get("annotations") or {}).get(REBALANCE)
        if annotation:
            new["rebalanceHandled"] = annotation
        if not manifest.spec.dry_run:
            new.update(self._new_rollout(name, result.plan, manifest, now))
        scaled = None
        if manifest.spec.scale_out is not None or status.get("scaleOut"):
            scaled = self.scaler.request(
                body=body,
                manifest=manifest,
                plan=result.plan,
                previous=status.get("scaleOut"),
                now=now,
            )
            new["scaleOut"] = scaled.body(status.get("scaleOut"))
        self._write(body, new)
        if scaled is not None:
            self._post(body, scaled)
        self._preflight_event(body, before=status.get("conditions") or [], after=new["conditions"])
        s = result.plan.summary
        metrics.DEMAND_MET.labels(plan=name).set(s.met / s.requested if s.requested else 1.0)
        metrics.set_phase(name, new["phase"])
        self.events(body, "Normal", "Planned", f"{result.summary} [{reason}]")
        log.info(
            "planned",
            plan=name,
            reason=reason,
            met=s.met,
            requested=s.requested,
            gpus_changed=s.gpus_changed,
            nodes=s.nodes_touched,
            evictions=s.evictions,
            seconds=round(time.monotonic() - started, 3),
            pass_seconds=round(planned_in, 3),
            read_seconds=round(result.read_seconds, 3),
            cpu_seconds=round(cpu, 3),
            kept=result.kept,
        )

    def _post(self, body: PlanBody, outcome: Outcome) -> None:
        for kind, reason, message in outcome.events:
            self.events(body, kind, reason, message)

    def _take_in_arrivals(
        self, body: PlanBody, manifest: GPUPartitionPlan, now: datetime
    ) -> PlanBody:
        """Nodes asked of the autoscaler that joined: planned again now (after the nodes in
        hand, during a rollout) so they are laid out; the plan as it is afterwards."""
        name = body["metadata"]["name"]
        status = body.get("status") or {}
        outcome = self.scaler.watch(
            body=body,
            manifest=manifest,
            previous=status.get("scaleOut"),
            records=self._records(body),
            left_out=((status.get("plan") or {}).get("leftOut") or {}).keys(),
            now=now,
        )
        update: dict[str, Any] = {}
        if outcome.status != ScaleOutStatus.model_validate(status.get("scaleOut") or {}):
            update["scaleOut"] = outcome.body(status.get("scaleOut"))  # not every tick
        last = status.get("lastPlanned")
        again = bool(outcome.waiting) and (
            last is None or now - parse_timestamp(last) >= timedelta(seconds=ARRIVAL_RETRY)
        )
        in_progress = self._in_progress(body)
        if (outcome.arrived or again) and in_progress:
            update.update(replanPending=True, replanReason=ReplanReason.NODES_ARRIVED)
        if update:
            self._write(body, update)
        self._post(body, outcome)
        body = self.api.plans.get_plan(name=name) or body
        if (outcome.arrived or again) and not in_progress:
            self._replan(body, reason="scale-out", manifest=manifest)
            body = self.api.plans.get_plan(name=name) or body
        return body

    def _new_rollout(
        self, name: str, plan: Plan, manifest: GPUPartitionPlan, now: datetime
    ) -> dict[str, Any]:
        """Record a fresh rollout of `plan` in its nodes' NodePartitions (an older rollout's
        records no longer count); the status fields that say so. Should the operator stop
        before the plan's status is written, the older rollout (none of whose nodes were in
        hand: a re-plan waits for them) goes on without the nodes recorded anew, which the
        next re-plan takes up."""
        steering = manifest.spec.dra is not None and manifest.spec.dra.mode is DraMode.STEER
        records = rollout_nodes(plan, every_node=steering)
        if (manifest.spec.actuator or self.default_actuator) is Actuator.MIG_MANAGER:
            records = self._write_mig_configs(records, now)
        rollout = rollout_id(plan.input_hash, records)
        self.book.begin(name, input_hash=rollout, records=records)
        spec = manifest.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
        return {
            "rollout": {
                "inputHash": plan.input_hash,
                "id": rollout,
                "nodes": None,
                "spec": spec,
                **rollout_summary(records, now=now),
            },
            "progress": f"0/{len(records)}",
            "phase": PlanPhase.READY if not records else PlanPhase.PENDING,
        }

    def _write_mig_configs(self, records: list[NodeRollout], now: datetime) -> list[NodeRollout]:
        """Write every node's mig-parted entries now, so kubelet has put them into
        mig-manager's file by the time the rollout reaches the node."""
        namespace, config_map = self.mig_config_map
        names = mig_manager.write_configs(
            self.api,
            targets={r.node: {t.index: t.layout for t in r.gpus} for r in records},
            namespace=namespace,
            config_map=config_map,
        )
        return [
            r.model_copy(
                update={
                    "mig_config": names[r.node][0],
                    "mig_config_retry": names[r.node][1],
                    "mig_config_written": timestamp(now),
                }
            )
            for r in records
        ]

    def _preflight_event(
        self, body: PlanBody, *, before: list[dict[str, Any]], after: list[dict[str, Any]]
    ) -> None:
        """A Warning event when preflight finds something new (not again on every re-plan)."""
        new = next((c for c in after if c.get("type") == ConditionType.PREFLIGHT), None)
        if new is None or new.get("reason") == "Passed":
            return
        if _condition(before, ConditionType.PREFLIGHT) == (new.get("status"), new.get("message")):
            return
        self.events(body, "Warning", "Preflight", str(new.get("message")))

    def _rebalance_reason(
        self, body: PlanBody, manifest: GPUPartitionPlan, now: datetime, waiting: Waiting
    ) -> str | None:
        """Why the plan should be planned again now, if it should."""
        status = body.get("status") or {}
        pending = status.get("replanPending")
        if pending:
            # "stale" is how replanPending said ClusterChanged before it became a boolean.
            stale = pending == "stale" or status.get("replanReason") == ReplanReason.CLUSTER_CHANGED
            return "stale" if stale else "spec"
        annotation = (body["metadata"].get("annotations") or {}).get(REBALANCE)
        if annotation and annotation != status.get("rebalanceHandled"):
            return "requested"
        schedule = manifest.spec.rebalance_schedule
        last = status.get("lastRebalance") or status.get("lastPlanned")
        if schedule and last and is_due(schedule, last=parse_timestamp(last), now=now):
            return "cron"
        if self.kueue.calls_for_planning(status, now=now, waiting=waiting):
            return "kueue"
        return None

    def tick(self, name: str) -> None:
        """Periodic work: re-plan when due, then advance the rollout. An error is recorded in
        the plan (condition `TickFailed`, an event when its message is new) and raised."""
        try:
            self._tick(name)
        except Exception as exc:
            self._tick_failed(name, exc)
            raise

    def _tick_failed(self, name: str, exc: Exception) -> None:
        try:
            body = self.api.plans.get_plan(name=name)
            if body is None:
                return
            message = f"{type(exc).__name__}: {exc}"[:MESSAGE_LIMIT]
            previous = (body.get("status") or {}).get("conditions") or []
            if _condition(previous, TICK_FAILED) == ("True", message):
                return
            update = condition(TICK_FAILED, True, type(exc).__name__, message, _generation(body))
            self._write(body, {"conditions": merge_conditions(previous, [update])})
            self.events(body, "Warning", TICK_FAILED, message)
        except Exception as again:  # the API may be the trouble: the log has both
            log.error("recording a failed tick failed", plan=name, error=repr(again))

    def _tick(self, name: str) -> None:
        with self._lock(name):
            body = self.api.plans.get_plan(name=name)
            if body is None or body["metadata"].get("deletionTimestamp"):
                return
            status = body.get("status") or {}
            if not status.get("inputHash") and status.get("phase") not in (
                PlanPhase.CONFLICT,
                PlanPhase.SUSPENDED,
            ):
                return  # not planned yet: the spec handler does that
            manifest = self._manifest(body)
            if manifest is None:
                if self._in_progress(body):
                    self._finish_in_hand(body)
                return
            now = self.clock()
            if status.get("phase") in (PlanPhase.CONFLICT, PlanPhase.SUSPENDED):
                if not manifest.spec.suspend and conflicting_plan(self.api, body) is None:
                    self._replan(body, reason="spec", manifest=manifest)
                return
            if status.get("observedGeneration") != _generation(body) and not self._in_progress(
                body
            ):
                self._replan(body, reason="spec", manifest=manifest)
                body = self.api.plans.get_plan(name=name) or body
            if manifest.spec.scale_out is not None or status.get("scaleOut"):
                body = self._take_in_arrivals(body, manifest, now)
            failing = _condition(status.get("conditions") or [], TICK_FAILED)[0] == "True"
            # Read once: whether to re-plan for them, then what to tell them.
            waiting = self.kueue.waiting(plan=name)
            reason = self._rebalance_reason(body, manifest, now, waiting)
            if reason and not self._in_progress(body):
                self._replan(body, reason=reason, manifest=manifest)
                body = self.api.plans.get_plan(name=name) or body
            self._advance(body, manifest, now)
            self.kueue.tell(plan=name, waiting=waiting)
            if failing:
                self._clear_tick_failure(name)

    def _advance(self, body: PlanBody, manifest: GPUPartitionPlan, now: datetime) -> None:
        """Advance the rollout and refresh the plan's phase, progress and window fields."""
        name = body["metadata"]["name"]
        status = body.get("status") or {}
        spec = manifest.spec
        update: dict[str, Any] = {}
        if spec.rebalance_schedule:
            zone = spec.window.time_zone if spec.window else "UTC"
            update["nextRebalance"] = timestamp(
                next_run(spec.rebalance_schedule, now, time_zone=zone)
            )
        if spec.dry_run or spec.window is None or status.get("phase") == PlanPhase.INVALID:
            self._write_if_changed(body, update)
            return
        window = window_state(spec.window, now)
        update["windowOpen"] = window.open
        update["nextWindow"] = timestamp(window.next_start)
        records = self._records(body)
        stepper = self._stepper(body, spec)
        in_hand = [r for r in sorted(records.values(), key=lambda r: r.order) if r.in_progress]
        records.update((r.node, r) for r in _advance_each(stepper, in_hand))
        # A suspended plan finishes the nodes in hand and starts no other.
        while not spec.suspend:
            starting = nodes_to_start(
                records.values(),
                max_unavailable=spec.rollout.max_unavailable,
                window_open=window.open,
                create_outside_window=spec.policy.create_outside_window,
            )
            if not starting:
                break
            started = _advance_each(stepper, [records[node] for node in starting])
            records.update((r.node, r) for r in started)
        generation = _generation(body)
        if records or status.get("rollout") is not None:
            phase = rollout_phase(records.values())
            done = sum(1 for r in records.values() if r.finished)
            update["progress"] = f"{done}/{len(records)}"
            update["rollout"] = rollout_summary(records.values(), now=now)
            if (status.get("rollout") or {}).get("nodes"):  # an older migplan's, taken over
                update["rollout"]["nodes"] = None
            update["phase"] = phase.value
            failed = sorted(
                n for n, r in records.items() if r.finished and r.step is not NodeStep.DONE
            )
            update["conditions"] = merge_conditions(
                status.get("conditions") or [],
                [
                    condition(
                        ConditionType.READY,
                        phase is PlanPhase.READY,
                        phase.value,
                        f"{done} of {len(records)} nodes finished"
                        if records
                        else "the plan changes nothing",
                        generation,
                    ),
                    condition(
                        ConditionType.PROGRESSING,
                        phase is PlanPhase.PROGRESSING,
                        "NodesInHand" if phase is PlanPhase.PROGRESSING else phase.value,
                        ", ".join(sorted(n for n, r in records.items() if r.in_progress))
                        or ("window closed" if not window.open else "nothing in hand"),
                        generation,
                    ),
                    condition(
                        ConditionType.DEGRADED,
                        bool(failed),
                        "NodesNotReconfigured" if failed else "AllNodesOk",
                        _failed_message(failed, records),
                        generation,
                    ),
                ],
            )
            metrics.set_phase(name, phase.value)
            stale = any(r.stale for r in records.values())
            tries = int(status.get("staleReplans") or 0)
            if stale and all(r.finished for r in records.values()) and tries < STALE_REPLANS:
                # The cluster moved under the plan (a pod took a slice it was to reuse):
                # plan again from what is there now, a bounded number of times.
                update["replanPending"] = True
                update["replanReason"] = ReplanReason.CLUSTER_CHANGED
                update["staleReplans"] = tries + 1
        self._write_if_changed(body, update)

    def _stepper(self, body: PlanBody, spec: PlanSpec) -> NodeStepper:
        name = body["metadata"]["name"]
        rollout = (body.get("status") or {}).get("rollout") or {}
        input_hash = rollout.get("id") or rollout.get("inputHash") or ""
        return NodeStepper(
            api=self.api,
            plan=name,
            keep=lambda record: self.book.write(name, input_hash=input_hash, record=record),
            plan_generation=_generation(body),
            drain_timeout=duration_seconds(spec.rollout.drain_timeout),
            agent_timeout=self.agent_timeout,
            events=lambda kind, reason, message: self.events(body, kind, reason, message),
            clock=self.clock,
            actuator=spec.actuator or self.default_actuator,
            mig_config_map=self.mig_config_map,
            gpu_operator=self.gpu_operator,
            mig_config_propagation=self.mig_config_propagation,
            dra_mode=spec.dra.mode if spec.dra else None,
            boundary=self.boundary,
            node_events=self.node_events,
        )

    def _finish_in_hand(self, body: PlanBody) -> None:
        """The spec was edited into one the planner rejects mid-rollout: the nodes already in
        hand go on under the spec their rollout began with (drain timeout, rollback,
        uncordon by their own rules); no node is started and the phase stays Invalid."""
        stepper = self._stepper(body, self._rollout_spec(body))
        for record in sorted(self._records(body).values(), key=lambda r: r.order):
            if record.in_progress:
                stepper.advance(record)

    def _rollout_spec(self, body: PlanBody) -> PlanSpec:
        """The spec the running rollout began under (recorded with it), else the defaults."""
        recorded = ((body.get("status") or {}).get("rollout") or {}).get("spec")
        for spec in (recorded, {"nodeSelector": {}, "dryRun": True}):
            if not isinstance(spec, dict):
                continue
            document = {**body, "spec": spec, "status": {}}
            try:
                manifest = parse_model(GPUPartitionPlan, document, source="recorded spec")
            except MigplanInputError:
                continue
            return manifest.with_default_actuator(self.default_actuator).spec
        raise AssertionError("the default spec always parses")

    def _clear_tick_failure(self, name: str) -> None:
        body = self.api.plans.get_plan(name=name)
        previous = ((body or {}).get("status") or {}).get("conditions") or []
        if body is not None and _condition(previous, TICK_FAILED)[0] == "True":
            update = condition(TICK_FAILED, False, "Ticking", "", _generation(body))
            self._write(body, {"conditions": merge_conditions(previous, [update])})

    def _write_if_changed(self, body: PlanBody, update: dict[str, Any]) -> None:
        fresh = self.api.plans.get_plan(name=body["metadata"]["name"]) or body
        status = fresh.get("status") or {}
        if any(_differs(status.get(k), v) for k, v in update.items()):
            self._write(fresh, update)


def _advance_each(stepper: NodeStepper, records: Sequence[NodeRollout]) -> list[NodeRollout]:
    """Advance each node (independent of the others) as far as it goes now, STEP_WORKERS at
    a time; the records as last kept, in the order given."""
    if len(records) <= 1:
        return [stepper.advance(r) for r in records]
    stepper.actuator_of_nodes  # noqa: B018  made once, before the threads share it
    workers = min(STEP_WORKERS, len(records))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="migplan-steps") as pool:
        return list(pool.map(stepper.advance, records))


def _differs(current: Any, update: Any) -> bool:
    """Whether merging `update` into `current` would change it (a map merges key by key)."""
    if isinstance(update, dict) and isinstance(current, dict):
        return any(_differs(current.get(k), v) for k, v in update.items())
    return bool(current != update)


def rollout_summary(records: Iterable[NodeRollout], *, now: datetime) -> dict[str, Any]:
    """The plan status's summary of a rollout: nodes in all, per step (every step, so a
    merge patch zeroes those left), the nodes in hand and when the oldest of their steps
    began."""
    chosen = list(records)
    steps = dict.fromkeys((s.value for s in NodeStep), 0)
    for record in chosen:
        steps[record.step.value] += 1
    in_hand = sorted((r for r in chosen if r.in_progress), key=lambda r: r.order)
    began = [r.since for r in in_hand if r.since]
    return {
        "total": len(chosen),
        "steps": steps,
        "inHand": [r.node for r in in_hand],
        "oldestStepSince": min(began, key=parse_timestamp) if began else None,
    }


def _failed_message(failed: Sequence[str], records: Mapping[str, NodeRollout]) -> str:
    """The Degraded condition's message: the first FAILED_LISTED failed nodes and why."""
    listed = "; ".join(f"{n}: {records[n].message}" for n in failed[:FAILED_LISTED])
    more = len(failed) - FAILED_LISTED
    return (listed + (f"; and {more} more" if more > 0 else "")) or "none"


def _condition(conditions: list[dict[str, Any]], kind: str) -> tuple[str | None, str | None]:
    """(status, message) of the condition of type `kind`."""
    for item in conditions:
        if item.get("type") == kind:
            return item.get("status"), item.get("message")
    return None, None


def _generation(body: PlanBody) -> int:
    return int(body["metadata"].get("generation", 0))
