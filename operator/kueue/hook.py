"""The controller's one way into Kueue: whether it is installed (asked at most once a
minute), which Workloads wait on migplan's AdmissionChecks for a plan, whether they call
for planning again, and telling them how they stand."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from migplan.operator.kube.seam import Kube
from migplan.operator.kueue.checks import (
    RETRY_AFTER_SECONDS,
    Waiting,
    activate_checks,
    needs_planning,
    update_checks,
    waiting_for,
)
from migplan.planner.rollout.schedule import parse_timestamp

RECHECK_SECONDS = 60.0
"""How long the answer to "is Kueue installed?" is trusted."""


@dataclass
class KueueHook:
    """Kueue as one plan's reconciliation sees it; nothing happens where it is not
    installed."""

    api: Kube
    monotonic: Callable[[], float] = time.monotonic
    _served: tuple[float, bool] | None = field(default=None, init=False)
    """(monotonic time asked, answer) of the last discovery call."""

    def served(self) -> bool:
        """Whether Kueue's API is installed, asked at most once a minute (every tick of every
        plan would otherwise add a discovery call)."""
        now = self.monotonic()
        if self._served is None or now - self._served[0] >= RECHECK_SECONDS:
            self._served = (now, self.api.kueue.served())
        return self._served[1]

    def waiting(self, *, plan: str) -> Waiting:
        """The Workloads waiting on migplan's AdmissionChecks for `plan` (read once a tick:
        whether to re-plan for them, then what to tell them)."""
        return waiting_for(self.api, plan=plan) if self.served() else []

    def calls_for_planning(
        self, status: dict[str, Any], *, now: datetime, waiting: Waiting
    ) -> bool:
        """Whether a waiting Workload was not considered by the plan's last planning, or was
        not met and may now be retried."""
        last = status.get("lastPlanned")
        since = (now - parse_timestamp(last)).total_seconds() if last else None
        return needs_planning(
            waiting,
            records=status.get("kueue") or {},
            retry_due=since is None or since >= RETRY_AFTER_SECONDS,
        )

    def tell(self, *, plan: str, waiting: Waiting) -> None:
        """Tell the `waiting` Workloads how they stand with `plan` (as its status says now)."""
        if not waiting:
            return
        body = self.api.plans.get_plan(name=plan)
        if body is None:
            return
        status = body.get("status") or {}
        update_checks(
            self.api, waiting, phase=status.get("phase"), records=status.get("kueue") or {}
        )

    def activate(self, *, plans: Iterable[str]) -> None:
        """Mark migplan's AdmissionChecks Active (Kueue keeps their ClusterQueues inactive
        until then)."""
        if self.served():
            activate_checks(self.api, plans=plans)
