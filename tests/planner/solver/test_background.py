"""`Background` and `Forked`: work on a thread or in a forked process of its own, its answer
or its exception handed back."""

from __future__ import annotations

import gc
import io
import multiprocessing
import os
import sys
import threading
import time

import pytest

from migplan.planner.solver.background import Background, Forked


def test_the_work_runs_on_another_thread_and_its_value_comes_back() -> None:
    started = threading.Event()
    job = Background(lambda: (started.set(), threading.get_ident())[1])
    assert started.wait(5)
    assert job.result() != threading.get_ident()
    assert job.result() == job.result()  # asked twice: the same answer


def test_what_the_work_raises_is_raised_to_the_caller() -> None:
    def fails() -> int:
        raise ValueError("planner bug")

    job = Background(fails)
    with pytest.raises(ValueError, match="planner bug"):
        job.result()


def test_forked_work_runs_in_another_process_and_its_value_comes_back() -> None:
    runs: list[int] = []

    def work() -> int:
        runs.append(os.getpid())
        return os.getpid()

    job = Forked(work)
    child = job.result()
    assert child != os.getpid()
    assert job.result() == child  # asked twice: the same answer, not a second run
    assert runs == []  # the child's writes stay in the child


def test_what_forked_work_raises_is_raised_here_from_a_run_of_its_own() -> None:
    runs: list[int] = []

    def fails() -> int:
        runs.append(os.getpid())
        raise ValueError("planner bug")

    job = Forked(fails)
    with pytest.raises(ValueError, match="planner bug"):
        job.result()
    assert runs == [os.getpid()]


def test_a_value_that_does_not_pickle_is_made_here() -> None:
    made: list[int] = []

    def unpicklable() -> object:
        made.append(os.getpid())
        return lambda: "not picklable"

    value = Forked(unpicklable).result()
    assert callable(value)
    assert made == [os.getpid()]


def test_where_fork_is_not_trusted_the_work_runs_here(monkeypatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    assert Forked(os.getpid).result() == os.getpid()


def test_a_child_nobody_asks_ends_quietly(tmp_path, capfd) -> None:
    started = tmp_path / "pid"

    def work() -> str:
        started.write_text(str(os.getpid()))
        return "x" * 1_000_000  # more than a pipe holds: the child waits for a reader

    job = Forked(work)
    deadline = time.monotonic() + 10
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    child = int(started.read_text())
    del job  # as when the caller raised before asking: its end of the pipe is closed
    gc.collect()
    while time.monotonic() < deadline and child in {
        p.pid for p in multiprocessing.active_children()
    }:
        time.sleep(0.01)
    assert child not in {p.pid for p in multiprocessing.active_children()}
    assert "Traceback" not in capfd.readouterr().err


def test_where_the_fork_fails_the_work_runs_here(monkeypatch) -> None:
    def refused(self) -> None:
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refused)
    assert Forked(os.getpid).result() == os.getpid()


def _asked(job: Forked, *, within: float) -> list[object]:
    """`job.result()` asked on a thread of its own, waited for at most `within` seconds: a
    caller held forever shows as an empty list, not as a test run that never ends."""
    answers: list[object] = []
    asking = threading.Thread(target=lambda: answers.append(job.result()), daemon=True)
    asking.start()
    asking.join(within)
    return answers


def test_a_child_stuck_on_its_way_out_does_not_hold_the_caller(monkeypatch) -> None:
    # A lock another thread of the caller held when it forked stays held in the child for
    # good: here one that a stream's flush takes in the child, as a child ending the usual
    # way flushes its streams (this process flushes before it forks, so not here).
    held = threading.Lock()
    caller = os.getpid()

    class Stream(io.StringIO):
        def flush(self) -> None:
            if os.getpid() != caller:
                held.acquire()
            super().flush()

    monkeypatch.setattr(sys, "stdout", Stream())
    with held:
        job = Forked(lambda: 42)
    assert _asked(job, within=20) == [42]
    assert not multiprocessing.active_children()


def test_a_child_that_does_not_answer_in_time_is_stopped_and_the_work_runs_here() -> None:
    held = threading.Lock()

    def work() -> int:
        with held:  # held for good in the child (see above), free here by the time it runs
            return os.getpid()

    with held:
        job = Forked(work, until=time.monotonic() + 1.0)
    started = time.monotonic()
    assert _asked(job, within=20) == [os.getpid()]
    assert time.monotonic() - started < 10
    assert not multiprocessing.active_children()
