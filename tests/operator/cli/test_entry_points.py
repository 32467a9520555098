"""The installed console scripts, run as a user runs them (no traceback on bad input)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def script(name: str) -> str:
    path = shutil.which(name, path=str(BIN)) or shutil.which(name)
    if path is None:
        pytest.fail(f"console script {name} is not installed next to {sys.executable}")
    return path


@pytest.mark.parametrize("name", ["migplan", "kubectl-migplan"])
def test_help_works(name: str) -> None:
    result = subprocess.run([script(name), "--help"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "check-layout" in result.stdout


def test_bad_input_has_no_traceback() -> None:
    result = subprocess.run(
        [script("migplan"), "check-layout", "H100-80GB", "3g.40gb@0+4g"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().count("\n") == 0


def test_version() -> None:
    result = subprocess.run(
        [script("migplan"), "--version"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0
    assert result.stdout.startswith("migplan ")


def test_output_to_a_closed_pipe_is_quiet() -> None:
    result = subprocess.run(
        f"{script('migplan')} layouts H100-80GB | head -n 1",
        shell=True,
        capture_output=True,
        text=True,
        check=False,
    )
    assert "Traceback" not in result.stderr
    assert "BrokenPipe" not in result.stderr


def test_the_entry_point_loads_with_the_collector_paused_and_runs_with_it_on() -> None:
    probe = (
        "import gc, sys, importlib.abc\n"
        "seen = []\n"
        "class Watch(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name == 'migplan.operator.cli.app':\n"
        "            seen.append(gc.isenabled())\n"
        "sys.meta_path.insert(0, Watch())\n"
        "from migplan.operator.cli import main\n"
        "sys.argv = ['migplan', '--version']\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        "    sys.stderr.write(f'{seen} {gc.isenabled()} {gc.get_freeze_count() > 0}')\n"
    )
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert ran.returncode == 0
    assert ran.stdout.startswith("migplan ")
    assert ran.stderr == "[False] True True"
