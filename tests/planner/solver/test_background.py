"""`Background`: work on a thread of its own, its answer or its exception handed back."""

from __future__ import annotations

import threading

import pytest

from migplan.planner.solver.background import Background


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
