"""Maintenance windows and cron schedules, evaluated in the plan's time zone.

Pure functions of a spec and an instant, so the operator, `migplan status` and tests agree on
whether a window is open and when the next one starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter

from migplan.planner.api.spec import WindowSpec, duration_seconds


@dataclass(frozen=True)
class WindowState:
    """Whether a window is open at an instant, when it closes, and when the next one opens."""

    open: bool
    closes_at: datetime | None
    next_start: datetime


def _zoned(now: datetime, time_zone: str) -> datetime:
    if now.tzinfo is None:
        raise ValueError("schedule times must be timezone-aware")
    return now.astimezone(ZoneInfo(time_zone))


def window_state(window: WindowSpec, now: datetime) -> WindowState:
    """The state of `window` at `now` (a window that has just started counts as open)."""
    local = _zoned(now, window.time_zone)
    length = timedelta(seconds=duration_seconds(window.duration))
    # croniter's get_prev skips an occurrence equal to its start, so start a second later.
    last_start = croniter(window.start, local + timedelta(seconds=1)).get_prev(datetime)
    next_start = croniter(window.start, local).get_next(datetime)
    closes = last_start + length
    is_open = last_start <= local < closes
    return WindowState(
        open=is_open,
        closes_at=closes.astimezone(UTC) if is_open else None,
        next_start=next_start.astimezone(UTC),
    )


def next_run(expression: str, now: datetime, *, time_zone: str = "UTC") -> datetime:
    """The first time after `now` that the 5-field cron `expression` fires (in UTC)."""
    local = _zoned(now, time_zone)
    return croniter(expression, local).get_next(datetime).astimezone(UTC)


def is_due(expression: str, *, last: datetime, now: datetime, time_zone: str = "UTC") -> bool:
    """Whether `expression` fired in (last, now]."""
    return next_run(expression, last, time_zone=time_zone) <= now


def timestamp(moment: datetime) -> str:
    """RFC 3339 in UTC with seconds, as Kubernetes writes times."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(text: str) -> datetime:
    """The inverse of `timestamp`."""
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
