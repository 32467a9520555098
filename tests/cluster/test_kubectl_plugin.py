"""`kubectl migplan ...` works once migplan is installed (the kubectl-migplan entry point)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster


def kubectl(cp, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    env["KUBECONFIG"] = str(cp.kubeconfig)
    return subprocess.run(
        [str(cp.bin_dir / "kubectl"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_kubectl_finds_the_plugin_and_runs_it(crds) -> None:
    listed = kubectl(crds, "plugin", "list")
    assert "kubectl-migplan" in listed.stdout, listed.stdout + listed.stderr
    helped = kubectl(crds, "migplan", "--help")
    assert helped.returncode == 0, helped.stderr
    for command in ("preview", "status", "rebalance"):
        assert command in helped.stdout
    status = kubectl(crds, "migplan", "status", "-o", "json")
    assert status.returncode == 0, status.stderr
    assert isinstance(json.loads(status.stdout), list)
    missing = kubectl(crds, "migplan", "rebalance", "no-such-plan")
    assert missing.returncode == 2
    assert "no GPUPartitionPlan named 'no-such-plan'" in missing.stderr
