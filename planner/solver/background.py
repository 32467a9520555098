"""Work beside the planner's own: on a thread (`Background`) for OR-Tools' solvers (CP-SAT,
GLOP), which hold no Python lock while they search, and in a forked process (`Forked`) for
Python work, which a thread would run under the interpreter lock, so on the same core."""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import pickle
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Generic, TypeVar

T = TypeVar("T")


class Background(Generic[T]):
    """`work()` started on a daemon thread; `result()` waits for it."""

    def __init__(self, work: Callable[[], T]) -> None:
        self._work = work
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._work()
        except BaseException as exc:  # handed to the caller of result()
            self._error = exc

    def result(self) -> T:
        """What `work()` returned, once it has; what it raised is raised here."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]  # set: the work returned


CHILD_EXIT_SECONDS = 1.0
"""How long a child that has answered, or whose pipe broke, may take to end before it is
killed."""


class Forked(Generic[T]):
    """`work()` in a forked copy of this process, its value pickled back: pure-Python work
    that runs on the second core while this process goes on. Where the platform does not
    fork safely (only Linux is trusted here), the fork fails, or the child gives no answer
    (it raised, its value did not pickle, it was killed, or `until` came first),
    `result()` runs `work()` here instead, so the value is the same either way and an error
    is raised from this process, with its traceback. The child reads the memory it was
    forked with: only work that writes nothing the caller reads afterwards belongs here.

    A child has only the thread that forked it, and any lock another thread held at the
    fork stays held in it for good (the operator forks beside its informer and kopf
    threads, which write logs): so the child ends at once after answering, without the
    usual flush of its streams, and a child still silent at `until` (time.monotonic()) is
    taken for stuck and killed, so it never holds its caller."""

    def __init__(self, work: Callable[[], T], *, until: float = math.inf) -> None:
        self._work = work
        self._until = until
        self._answer: tuple[T] | None = None
        self._child: multiprocessing.process.BaseProcess | None = None
        self._receive: Connection | None = None
        if sys.platform == "linux":
            self._start()

    def _start(self) -> None:
        context = multiprocessing.get_context("fork")
        receive, send = context.Pipe(duplex=False)
        child = context.Process(target=_answer, args=(self._work, send, receive), daemon=True)
        try:
            child.start()
        except (OSError, AssertionError):
            # No fork to be had (memory or process limits), or this process is a daemonic
            # multiprocessing child, which may have none: the work runs here.
            receive.close()
        else:
            self._child, self._receive = child, receive
        finally:
            send.close()

    def result(self) -> T:
        """What `work()` returned, from the child where it answered, else from a run here."""
        if self._answer is None:
            self._answer = (self._received() if self._receive is not None else None) or (
                self._work(),
            )
        return self._answer[0]

    def _received(self) -> tuple[T] | None:
        assert self._receive is not None
        assert self._child is not None
        left = self._until - time.monotonic()
        answered = False
        try:
            if not self._receive.poll(None if math.isinf(left) else max(0.0, left)):
                return None
            answered = True
            return (pickle.loads(self._receive.recv_bytes()),)
        except (EOFError, OSError):
            return None
        finally:
            self._receive.close()
            self._receive = None
            # A child that answered (or ended) has a moment to go; one given up on, none.
            self._child.join(CHILD_EXIT_SECONDS if answered else 0)
            if self._child.is_alive():
                self._child.kill()
                self._child.join()


def _answer(work: Callable[[], object], send: Connection, receive: Connection) -> None:
    """In the child: send `work()`'s value, pickled; on any error send nothing (the parent
    then runs the work itself and raises what it raises). The child's copy of the reading
    end is closed first, so that the pipe breaks, and the child ends, once the parent's is.
    The child then ends at once: flushing the streams, as a process ending the usual way
    does, could wait for good on a lock another thread of the parent held at the fork."""
    receive.close()
    try:
        data = pickle.dumps(work(), protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:  # the parent reruns the work and raises it there
        data = None
    if data is not None:
        # A caller that raised before asking has closed its end: nobody is left to answer.
        with contextlib.suppress(OSError):
            send.send_bytes(data)
    send.close()
    os._exit(0)
