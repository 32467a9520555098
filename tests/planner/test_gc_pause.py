"""The cyclic collector paused for a planning pass, and on again after it."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from migplan.operator.cli.files import load_inventory, load_plan_manifest
from migplan.planner.gc_pause import Settler, gc_paused
from migplan.planner.hardware.catalog import default_catalog
from migplan.planner.pipeline import plan_fleet

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    gc.unfreeze()  # a heap frozen by an earlier test would pass the freeze checks here
    yield
    gc.unfreeze()
    if was:
        gc.enable()
    else:
        gc.disable()


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def _dropped_cycle() -> weakref.ref[_Cycle]:
    """A reference cycle no one holds any more: only the collector can free it."""
    return weakref.ref(_Cycle())


def test_the_collector_is_off_inside_and_on_after() -> None:
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_collector_is_on_again_after_the_block_raises() -> None:
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("a pass that fails")
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with gc_paused():
        pass
    assert not gc.isenabled()


def test_it_stays_off_until_the_last_of_overlapping_passes_ends() -> None:
    first_in, second_done, seen = threading.Event(), threading.Event(), []

    def first() -> None:
        with gc_paused():
            first_in.set()
            second_done.wait(5)
            seen.append(gc.isenabled())

    thread = threading.Thread(target=first)
    thread.start()
    first_in.wait(5)
    with gc_paused():
        pass
    seen.append(gc.isenabled())  # the first pass is still under way
    second_done.set()
    thread.join(5)
    assert seen == [False, False]
    assert gc.isenabled()


def test_a_planning_pass_runs_with_the_collector_off() -> None:
    manifest = load_plan_manifest(ROOT / "examples" / "plan.yaml")
    inventory = load_inventory(ROOT / "examples" / "cluster.yaml")
    on_while_planning: list[bool] = []
    plan_fleet(
        manifest,
        inventory,
        default_catalog(),
        progress=lambda _: on_while_planning.append(gc.isenabled()),
    )
    assert on_while_planning
    assert not any(on_while_planning)
    assert gc.isenabled()


def test_settling_hides_the_heap_from_collections_then_returns_it() -> None:
    settler = Settler(every=3)
    with gc_paused(settler=settler):
        frozen_garbage = _dropped_cycle()
    assert gc.get_freeze_count() > 0
    gc.collect()
    assert frozen_garbage() is not None  # frozen: out of the collector's sight
    with gc_paused(settler=settler):
        pass
    gc.collect()
    assert frozen_garbage() is not None
    with gc_paused(settler=settler):  # the third: unfrozen
        pass
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert frozen_garbage() is None


def test_a_re_plan_that_fails_still_settles_and_the_collector_is_on_again() -> None:
    with pytest.raises(RuntimeError), gc_paused(settler=Settler()):
        raise RuntimeError("a re-plan that fails")
    assert gc.get_freeze_count() > 0
    assert gc.isenabled()
