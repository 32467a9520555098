"""The cyclic garbage collector paused for a planning pass.

A pass builds millions of objects that live until it ends (GPU states, pools, the model, the
plan) and almost no reference cycles. CPython's generational collector, seeing the heap grow,
runs a full collection each time the long-lived objects grow by a quarter: 19 full collections
in one 40,000-GPU preview (1.5 s of its 7.8 s), and in the operator, whose informer caches hold
the whole cluster, two a pass of about 1.5 s each (4 s of an 11 s pass at 5,000 nodes).
Objects without cycles are freed by reference counting whether the collector runs or not;
the few cycles a pass leaves (2,600 objects at 40,000 GPUs) wait until it ends.

In the operator the first collections after a pass then scanned the heap the informer caches
fill, and a full one ran about every other pass, on the thread about to write the plan
(sampled at 5,000 nodes: a quarter of the re-plan's time, after the pass, before the status
write). `Settler` moves what the process holds out of the collector's sight after each
re-plan instead (`gc.freeze`), and puts it back every so often (`gc.unfreeze`), so cyclic
garbage frozen meanwhile is still collected.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class _Pause:
    """Counts the passes under way (the operator plans several plans on threads): the
    collector is off while any is, and on again after the last, unless it was off before."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._passes = 0
        self._restore = False

    def enter(self) -> None:
        with self._lock:
            if self._passes == 0:
                self._restore = gc.isenabled()
                gc.disable()
            self._passes += 1

    def leave(self) -> None:
        with self._lock:
            self._passes -= 1
            if self._passes == 0 and self._restore:
                gc.enable()


_PAUSE = _Pause()

SETTLE_EVERY = 10
"""Re-plans between two returns of the frozen objects to the collector."""


class Settler:
    """After each re-plan of a long-running process, with the collector paused: freeze what
    the process holds, or, every `every`-th time, unfreeze it, so a full collection soon
    scans it once and reclaims the cycles frozen since (at most `every` re-plans' worth)."""

    def __init__(self, every: int = SETTLE_EVERY) -> None:
        self._lock = threading.Lock()
        self._every = every
        self._count = 0

    def settle(self) -> None:
        """One re-plan done: freeze, or unfreeze every `every`-th call."""
        with self._lock:
            self._count += 1
            if self._count % self._every:
                gc.freeze()
            else:
                gc.unfreeze()


@contextmanager
def gc_paused(*, settler: Settler | None = None) -> Iterator[None]:
    """Run the block with the cyclic collector off (reference counting still frees what has
    no cycles); it is back on afterwards, also when the block raises. With `settler`, it
    settles (`Settler.settle`) before the collector is back on."""
    _PAUSE.enter()
    try:
        yield
    finally:
        try:
            if settler is not None:
                settler.settle()
        finally:
            _PAUSE.leave()
