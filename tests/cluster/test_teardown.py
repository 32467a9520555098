"""No control-plane process outlives the test run: not after a failing test, and not when
pytest itself is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]

FAILING = textwrap.dedent("""
    import pathlib, time

    def test_fails(control_plane):
        pathlib.Path(__file__).with_suffix(".dir").write_text(str(control_plane.run_dir))
        time.sleep(float(__import__("os").environ.get("HOLD", "0")))
        assert False, "deliberately failing"
""")


def run_dir_processes(run_dir: str) -> list[str]:
    ps = subprocess.run(
        ["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True, check=True
    )
    return [line for line in ps.stdout.splitlines() if run_dir in line]


def start(tmp_path: Path, hold: float) -> tuple[subprocess.Popen[str], Path]:
    test = tmp_path / "test_failing.py"
    test.write_text(FAILING)
    # The project's own conftest (with the control_plane fixture) is loaded as a plugin.
    env = {
        **os.environ,
        "HOLD": str(hold),
        "PYTHONSAFEPATH": "1",
        "PYTHONPATH": str(ROOT / "tests"),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "conftest",
            str(test),
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return proc, test.with_suffix(".dir")


def wait_for_file(path: Path, proc: subprocess.Popen[str], timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not path.exists():
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        time.sleep(0.2)
    return path.read_text()


def test_nothing_survives_a_failing_test(tmp_path) -> None:
    proc, marker = start(tmp_path, hold=0)
    try:
        output, _ = proc.communicate(timeout=180)
    finally:
        proc.kill()
    assert proc.returncode == 1, output
    assert "deliberately failing" in output
    run_dir = marker.read_text()
    assert run_dir_processes(run_dir) == []
    assert not Path(run_dir).exists()


def test_nothing_survives_a_killed_pytest(tmp_path) -> None:
    proc, marker = start(tmp_path, hold=60)
    try:
        run_dir = wait_for_file(marker, proc)
        assert run_dir_processes(run_dir), "the control plane should be running now"
    finally:
        proc.send_signal(signal.SIGKILL)  # also when an assertion above fails
        proc.wait()
    deadline = time.monotonic() + 15
    while run_dir_processes(run_dir) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert run_dir_processes(run_dir) == []
