"""Maintenance windows and cron schedules at fixed instants, across time zones and DST."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from migplan.planner.api.spec import WindowSpec
from migplan.planner.rollout.schedule import (
    is_due,
    next_run,
    parse_timestamp,
    timestamp,
    window_state,
)

SATURDAY_2AM_BERLIN = WindowSpec(start="0 2 * * 6", duration="2h", time_zone="Europe/Berlin")


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("now", "is_open"),
    [
        ("2026-11-21T00:59:59", False),  # Berlin is UTC+1 in November: 01:59:59 local
        ("2026-11-21T01:00:00", True),  # the window's first second
        ("2026-11-21T02:59:59", True),
        ("2026-11-21T03:00:00", False),  # two hours later it is closed
        ("2026-11-22T01:30:00", False),  # Sunday
        ("2026-11-21T00:59:59.500000", False),  # half a second before it opens
    ],
)
def test_window_open_in_its_time_zone(now, is_open) -> None:
    assert window_state(SATURDAY_2AM_BERLIN, at(now)).open is is_open


def test_open_window_says_when_it_closes_and_when_the_next_opens() -> None:
    state = window_state(SATURDAY_2AM_BERLIN, at("2026-11-21T01:30:00"))
    assert state.closes_at == at("2026-11-21T03:00:00")
    assert state.next_start == at("2026-11-28T01:00:00")


def test_next_window_follows_daylight_saving_time() -> None:
    # Berlin moves to UTC+2 on 2027-03-28, so 02:00 local on the next Saturday is 00:00 UTC.
    state = window_state(SATURDAY_2AM_BERLIN, at("2027-03-28T12:00:00"))
    assert state.next_start == at("2027-04-03T00:00:00")
    assert not state.open


def test_a_window_longer_than_its_period_is_always_open() -> None:
    always = WindowSpec(start="* * * * *", duration="1h")
    assert window_state(always, at("2026-11-22T10:17:31")).open


def test_cron_runs_and_is_due() -> None:
    assert next_run("*/15 * * * *", at("2026-11-22T10:07:00")) == at("2026-11-22T10:15:00")
    assert is_due("*/15 * * * *", last=at("2026-11-22T10:07:00"), now=at("2026-11-22T10:15:00"))
    assert not is_due("*/15 * * * *", last=at("2026-11-22T10:15:00"), now=at("2026-11-22T10:29:59"))


def test_naive_times_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        window_state(SATURDAY_2AM_BERLIN, datetime(2026, 11, 21, 1, 0))


def test_timestamps_round_trip() -> None:
    moment = at("2026-11-22T10:07:03")
    assert timestamp(moment) == "2026-11-22T10:07:03Z"
    assert parse_timestamp(timestamp(moment)) == moment


def test_overlapping_windows_are_open_the_second_before_the_next_starts() -> None:
    # Hourly windows of two hours: at 00:59:59 the one from 00:00 is open (till 02:00).
    hourly = WindowSpec(start="0 * * * *", duration="2h")
    state = window_state(hourly, at("2026-11-22T00:59:59"))
    assert state.open
    assert state.closes_at == at("2026-11-22T02:00:00")


def test_a_run_missed_long_ago_is_due() -> None:
    assert is_due("0 2 * * *", last=at("2026-11-20T03:00:00"), now=at("2026-11-22T10:00:00"))


def test_window_states_are_values() -> None:
    when = at("2026-11-21T01:30:00")
    assert (
        len({window_state(SATURDAY_2AM_BERLIN, when), window_state(SATURDAY_2AM_BERLIN, when)}) == 1
    )
