"""The simulated fleet's pace: how often its agents sweep, changed while it runs."""

from __future__ import annotations

import threading
import time

from migplan.operator.sim.fleet import SimulatedFleet
from migplan.planner.hardware.catalog import default_catalog


class _Counted(SimulatedFleet):
    """A fleet of no nodes that counts its sweeps."""

    def __init__(self, interval: float) -> None:
        super().__init__(api=None, nodes={}, catalog=default_catalog(), interval=interval)  # type: ignore[arg-type]
        self.sweeps = 0
        self.swept = threading.Event()

    def sweep(self) -> None:
        self.sweeps += 1
        self.swept.set()


def _until(check, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return False


def test_a_faster_pace_sweeps_at_once_and_then_at_that_pace() -> None:
    fleet = _Counted(interval=600).start()
    try:
        assert fleet.swept.wait(5)
        time.sleep(0.2)
        assert fleet.sweeps == 1  # idle: the next sweep is ten minutes away
        fleet.pace(0.02)
        assert _until(lambda: fleet.sweeps >= 5)
    finally:
        fleet.stop()


def test_stop_does_not_wait_out_a_slow_pace() -> None:
    fleet = _Counted(interval=600).start()
    assert fleet.swept.wait(5)
    began = time.monotonic()
    fleet.stop()
    assert time.monotonic() - began < 2  # stop() joins the sweeping thread
