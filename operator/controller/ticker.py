"""The operator's clock: one thread that ticks every plan in turn, and tidies up after plans
deleted while the operator was away.

kopf timers would do the ticking, but a kopf timer puts a finalizer on every plan (so a plan
could not be deleted while the operator is down) and runs one thread-pool task per plan; one
sequential loop is lighter and deletion never waits on migplan.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime

import structlog

from migplan.operator.cluster_inventory import MIG_CAPABLE
from migplan.operator.controller import metrics
from migplan.operator.controller.cordons import CordonIndex
from migplan.operator.controller.planning import PASS_MEMOS
from migplan.operator.controller.reconciler import PlanController
from migplan.operator.controller.rollout import CORDONED_BY, release_nodes
from migplan.operator.controller.selection import EVERY_PLAN, PlanSelector
from migplan.operator.dra import steer
from migplan.operator.kube.bodies import PlanBody
from migplan.planner.api.labels import label_value
from migplan.planner.rollout.schedule import parse_timestamp
from migplan.planner.status import RolloutStatus

log = structlog.get_logger("migplan.operator")


STALL_FLOOR = 90.0
"""Seconds without a tick that always count as normal: one planning of a big fleet takes
tens of seconds on the ticker's thread."""


class PlanTicker:
    """Calls `controller.tick` for every plan, `interval` seconds apart, in one thread."""

    def __init__(
        self,
        controller: PlanController,
        *,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
        cordons: CordonIndex | None = None,
        selector: PlanSelector = EVERY_PLAN,
    ) -> None:
        self.controller = controller
        self.selector = selector
        """The plans this operator acts on; the others are read, not ticked."""
        self.cordons = cordons
        """Nodes held cordoned, from the node watch; without it (or before its first
        event) every round lists the nodes."""
        self.interval = interval
        self._clock = clock
        self.last_tick = clock()
        """When the ticker last finished a plan's tick or a round (monotonic seconds)."""
        self.started = False
        """Whether it has been told to tick (a follower's ticker waits for the lease)."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._plans: set[str] | None = None
        """The plans the last round saw (None before the first round)."""
        self._steering = False
        """Whether the API server serves DeviceTaintRules (checked on the first round)."""

    def beat(self) -> None:
        """The ticker made progress."""
        self.last_tick = self._clock()

    def stalled(self) -> str | None:
        """Why the ticker looks wedged (no progress for 3 intervals, and at least
        STALL_FLOOR seconds), or None while it ticks."""
        if not self.started:
            return None  # not ticking by design (a follower waiting for the lease)
        quiet = self._clock() - self.last_tick
        if quiet < max(3 * self.interval, STALL_FLOOR):
            return None
        return f"the plan ticker has not ticked for {quiet:.0f} s (interval {self.interval:g} s)"

    def tick_all(self) -> None:
        """One round: every plan this operator acts on once, then nodes cordoned by plans
        that no longer exist (anyone's: another operator's plan still holds its nodes) and
        what passes kept for them; the invariants' gauges refreshed from what the round
        read."""
        api = self.controller.api
        plans = api.plans.list_plans()
        names = {str(p["metadata"]["name"]) for p in plans}
        ours = {str(p["metadata"]["name"]) for p in self.selector.plans(plans)}
        for name in sorted(ours):
            if self._stop.is_set():
                return
            try:
                self.controller.tick(name)
            except Exception as exc:  # one plan's trouble must not stop the others
                log.error(
                    "tick failed",
                    plan=name,
                    error=f"{type(exc).__name__}: {exc}"[:1000],
                    exc_info=True,
                )
            self.beat()
        cordoned = self._cordoned()
        for owner in sorted(set(cordoned.values()) - names):
            released = release_nodes(api, plan=owner)
            log.info("plan gone: its nodes uncordoned", plan=owner, nodes=released)
            if self.cordons is not None:
                for node in (n for n, o in cordoned.items() if o == owner):
                    self.cordons.forget(node)  # released, or already gone
        self._remove_orphan_taint_rules(names)
        PASS_MEMOS.retain(names)
        self.controller.kueue.activate(plans=names)
        metrics.set_invariants(
            rollout_invariants(
                plans=plans,  # as the round began: no second list per round
                cordoned=sorted(cordoned),
                now=self.controller.clock(),
            )
        )

    def _remove_orphan_taint_rules(self, names: set[str]) -> None:
        """Delete the DeviceTaintRules of plans that are gone (DRA steer mode): every rule is
        checked on the first round, then the plans that disappeared since the last round."""
        api = self.controller.api
        if self._plans is None:
            self._steering = api.dra.taint_rules_served()
            owners = (
                {
                    str(r["metadata"]["labels"][steer.PLAN_LABEL])
                    for r in api.dra.list_taint_rules(label_selector=steer.PLAN_LABEL)
                }
                if self._steering
                else set()
            )
            gone = owners - {label_value(n) for n in names}
        else:
            gone = {label_value(n) for n in self._plans - names}
        self._plans = set(names)
        if not self._steering:
            return
        for plan in sorted(gone):
            removed = steer.remove(api, plan=plan)
            if removed:
                log.info("plan gone: its device taint rules removed", plan=plan, rules=removed)

    def _cordoned(self) -> dict[str, str]:
        """Node -> the plan holding it cordoned: from the watch's index when it has heard
        from the nodes, else from a list."""
        if self.cordons is not None and self.cordons.seen:
            return self.cordons.cordoned()
        found = {}
        for node in self.controller.api.core.list_nodes(label_selector=MIG_CAPABLE):
            owner = (node.metadata.annotations or {}).get(CORDONED_BY)
            if owner:
                found[str(node.metadata.name)] = owner
        return found

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.tick_all()
            except Exception as exc:  # the API may be away for a while; try again
                log.error(
                    "tick round failed", error=f"{type(exc).__name__}: {exc}"[:1000], exc_info=True
                )
            self.beat()  # a round that failed on the API still ran: not wedged
            self._stop.wait(max(0.05, self.interval - (time.monotonic() - started)))

    def start(self) -> None:
        """Tick in the background until `stop`."""
        self.beat()
        self.started = True
        self._thread = threading.Thread(target=self._loop, name="migplan-ticker", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop after the plan in hand (its step is recorded, so stopping anywhere is safe)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)


def rollout_invariants(
    *, plans: Sequence[PlanBody], cordoned: list[str], now: datetime
) -> metrics.Invariants:
    """What the operator promises to converge, as numbers: nodes it holds cordoned, nodes
    in each rollout step (over every plan), and how long the oldest unfinished step has
    lasted."""
    steps: dict[str, int] = {}
    oldest = 0.0
    for plan in plans:
        rollout = RolloutStatus.model_validate(((plan.get("status") or {}).get("rollout")) or {})
        for step, count in (rollout.steps or {}).items():
            if count:
                steps[step] = steps.get(step, 0) + count
        if rollout.in_hand and rollout.oldest_step_since:
            since = parse_timestamp(rollout.oldest_step_since)
            oldest = max(oldest, (now - since).total_seconds())
    return metrics.Invariants(cordoned=len(cordoned), steps=steps, oldest_step_seconds=oldest)
