"""The README's two commands: the demo runs as written, and .ci/run is the test command."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_names_the_two_commands_and_ci_runs_the_second() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "./scripts/demo" in readme
    assert "./scripts/test" in readme
    assert re.search(r"^exec \./scripts/test$", (ROOT / ".ci" / "run").read_text(), re.M)


def test_scripts_parse() -> None:
    for script in (
        "scripts/demo",
        "scripts/test",
        "scripts/lib.sh",
        "scripts/build-image",
        ".ci/run",
        "tests/cluster/build.sh",
        "tests/tools/ensure-chromium.sh",
        "scripts/nvml-evidence",
    ):
        result = subprocess.run(
            ["bash", "-n", str(ROOT / script)], capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, f"{script}: {result.stderr}"


def test_demo_runs_and_shows_the_preview() -> None:
    # Run against the environment the tests run in (its install stamp makes it quick).
    env = {**os.environ, "MIGPLAN_VENV": sys.prefix}
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "demo")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Plan shared-pool" in result.stdout
    assert "Solver: cp-sat OPTIMAL" in result.stdout
    assert "4g.40gb cannot start at slice 4" in result.stdout
    assert "Traceback" not in result.stderr
    assert "\033[" not in result.stdout  # piped: no escape codes


def test_readme_install_command_gives_a_working_kubectl_plugin(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Installing\n", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    install = [line for line in block.splitlines() if line.startswith(("python3 ", "export "))]
    assert len(install) == 2, block
    # HOME is a temporary directory, so ~/.local/migplan is a fresh virtual environment.
    env = {**os.environ, "HOME": str(tmp_path), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("VIRTUAL_ENV", None)
    script = "\n".join(["set -euo pipefail", *install, "kubectl-migplan --help"])
    result = subprocess.run(
        ["bash", "-c", script.replace("python3 ", f"{sys.executable} ", 1)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "status" in result.stdout
    assert "rebalance" in result.stdout
