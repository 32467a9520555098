"""`kubectl migplan ...` works once migplan is installed (the kubectl-migplan entry point),
and through krew (scripts/krew_package.py's archive and manifest, krew's own validator)."""

from __future__ import annotations

import functools
import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]


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


@pytest.fixture
def published(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """scripts/krew_package.py's archive and manifest, the archive served over HTTP where the
    manifest says it is published."""
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0),
        functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path)),
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    uri = f"http://127.0.0.1:{server.server_address[1]}"
    packaged = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "krew_package.py"), "--uri-base", uri,
         "--out", str(tmp_path)],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert packaged.returncode == 0, packaged.stderr
    try:
        yield tmp_path / "migplan.yaml", uri
    finally:
        server.shutdown()


def test_the_krew_manifest_passes_krews_validator_and_installs(crds, published, tmp_path) -> None:
    manifest, _ = published
    venv = Path(sys.executable).parent
    path = f"{crds.bin_dir}:{venv}:{os.environ.get('PATH', '')}"
    # krew's own validator: the schema, then an install of each platform from the URI, and
    # a licence file in what was installed.
    validated = subprocess.run(
        [str(crds.bin_dir / "validate-krew-manifest"), "-manifest", str(manifest)],
        capture_output=True, text=True, check=False, timeout=120, env={"PATH": path},
    )  # fmt: skip
    assert validated.returncode == 0, validated.stderr[-3000:]
    root = tmp_path / "krew-root"
    env = {"PATH": f"{root / 'bin'}:{path}", "KREW_ROOT": str(root), "HOME": str(tmp_path)}
    env["KUBECONFIG"] = str(crds.kubeconfig)
    installed = subprocess.run(
        [str(crds.bin_dir / "kubectl"), "krew", "install", f"--manifest={manifest}"],
        capture_output=True, text=True, check=False, timeout=120, env=env,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    assert "pip install migplan" in installed.stderr + installed.stdout  # the caveats
    helped = subprocess.run(
        [str(crds.bin_dir / "kubectl"), "migplan", "status", "-o", "json"],
        capture_output=True, text=True, check=False, timeout=60, env=env,
    )  # fmt: skip
    assert helped.returncode == 0, helped.stderr
    assert isinstance(json.loads(helped.stdout), list)
    # Without a Python that has migplan, the launcher says what to install.
    bare = {**env, "PATH": f"{root / 'bin'}:{crds.bin_dir}:/usr/bin:/bin"}
    missing = subprocess.run(
        [str(crds.bin_dir / "kubectl"), "migplan", "--help"],
        capture_output=True, text=True, check=False, timeout=60, env=bare,
    )  # fmt: skip
    assert missing.returncode == 1
    assert "pip install migplan" in missing.stderr
