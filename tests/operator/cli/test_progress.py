"""Progress lines on stderr for long planning passes only."""

from __future__ import annotations

import io
import re
import time
from pathlib import Path

import pytest

from migplan.operator.cli import progress
from migplan.operator.cli.app import run
from migplan.operator.cli.progress import StderrProgress


def test_a_short_pass_prints_nothing() -> None:
    out = io.StringIO()
    with StderrProgress(stream=out, quiet=5.0) as progress:
        progress("reading")
        progress("solving")
    assert out.getvalue() == ""


def test_a_long_pass_prints_the_step_under_way_then_each_next_step() -> None:
    out = io.StringIO()
    with StderrProgress(stream=out, quiet=0.05) as progress:
        progress("reading")
        progress("solving stage 1")
        deadline = time.monotonic() + 10
        while not out.getvalue() and time.monotonic() < deadline:  # the quiet time's timer
            time.sleep(0.01)
        assert out.getvalue(), "the step under way was not printed after the quiet time"
        progress("solving stage 2")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("migplan: [")
    assert lines[0].endswith("] solving stage 1")
    assert lines[1].endswith("] solving stage 2")


@pytest.mark.parametrize(
    ("argv", "step"),
    [
        (["doctor", "--cluster", "examples/cluster.yaml"], "reading examples/cluster.yaml"),
        (
            ["export", "mig-parted", "examples/plan.yaml", "--cluster", "examples/cluster.yaml"],
            "reading examples/plan.yaml",
        ),
    ],
    ids=lambda v: v[0] if isinstance(v, list) else None,
)
def test_commands_that_wait_say_what_for(capsys, monkeypatch, argv, step) -> None:
    monkeypatch.chdir(Path(__file__).resolve().parents[3])
    monkeypatch.setattr(progress, "QUIET_SECONDS", 0.0)  # as if each step were slow
    run(argv)
    err = capsys.readouterr().err
    assert re.search(rf"migplan: \[ *\d+\.\d s\] {re.escape(step)}", err), err
