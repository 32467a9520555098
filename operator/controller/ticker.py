"""The operator's clock: one thread that ticks every plan in turn, and tidies up after plans
deleted while the operator was away.

kopf timers would do the ticking, but a kopf timer puts a finalizer on every plan (so a plan
could not be deleted while the operator is down) and runs one thread-pool task per plan; one
sequential loop is lighter and deletion never waits on migplan.
"""

from __future__ import annotations

import threading
import time

import structlog

from migplan.operator.cluster_inventory import MIG_CAPABLE
from migplan.operator.controller.reconciler import PlanController
from migplan.operator.controller.rollout import CORDONED_BY, release_nodes
from migplan.operator.kube import client as kube

log = structlog.get_logger("migplan.operator")


class PlanTicker:
    """Calls `controller.tick` for every plan, `interval` seconds apart, in one thread."""

    def __init__(self, controller: PlanController, *, interval: float) -> None:
        self.controller = controller
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tick_all(self) -> None:
        """One round: every plan once, then nodes cordoned by plans that no longer exist."""
        api = self.controller.api
        names = {str(p["metadata"]["name"]) for p in kube.list_plans(api)}
        for name in sorted(names):
            if self._stop.is_set():
                return
            try:
                self.controller.tick(name)
            except Exception as exc:  # one plan's trouble must not stop the others
                log.error("tick failed", plan=name, error=repr(exc))
        for node in kube.list_nodes(api, label_selector=MIG_CAPABLE):
            owner = (node.metadata.annotations or {}).get(CORDONED_BY)
            if owner and owner not in names:
                released = release_nodes(api, plan=owner)
                log.info("plan gone: its nodes uncordoned", plan=owner, nodes=released)

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.tick_all()
            except Exception as exc:  # the API may be away for a while; try again
                log.error("tick round failed", error=repr(exc))
            self._stop.wait(max(0.05, self.interval - (time.monotonic() - started)))

    def start(self) -> None:
        """Tick in the background until `stop`."""
        self._thread = threading.Thread(target=self._loop, name="migplan-ticker", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop after the plan in hand (its step is recorded, so stopping anywhere is safe)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
