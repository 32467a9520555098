"""The CLI finds its cluster as kubectl does: --kubeconfig, KUBECONFIG (several files,
merged), ~/.kube/config, and --context picks one of a kubeconfig's contexts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.cluster
MIGPLAN = str(Path(sys.executable).parent / "migplan")


def migplan(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MIGPLAN, *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def bare_env(home: Path) -> dict[str, str]:
    """The environment without KUBECONFIG or in-cluster settings, HOME at `home`."""
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG",)}
    env.pop("KUBERNETES_SERVICE_HOST", None)
    return {**env, "HOME": str(home)}


def two_contexts(real: Path, target: Path) -> str:
    """`real`'s kubeconfig plus a context `elsewhere` (nothing listens there), made current;
    the real context's name."""
    document = yaml.safe_load(real.read_text())
    good = document["current-context"]
    cluster = {"name": "nowhere", "cluster": {"server": "https://127.0.0.1:9"}}
    document["clusters"].append(cluster)
    context = document["contexts"][0]["context"]
    document["contexts"].append(
        {"name": "elsewhere", "context": {"cluster": "nowhere", "user": context["user"]}}
    )
    document["current-context"] = "elsewhere"
    target.write_text(yaml.safe_dump(document))
    return str(good)


def test_context_picks_the_cluster_of_a_multi_context_kubeconfig(crds, tmp_path) -> None:
    merged = tmp_path / "config"
    good = two_contexts(Path(crds.kubeconfig), merged)
    env = bare_env(tmp_path)
    chosen = migplan(
        "status", "-o", "json", "--kubeconfig", str(merged), "--context", good, env=env
    )
    assert chosen.returncode == 0, chosen.stderr
    assert isinstance(json.loads(chosen.stdout), list)
    current = migplan("status", "--kubeconfig", str(merged), env=env)
    assert current.returncode != 0  # the current context points nowhere
    said = [line for line in current.stderr.splitlines() if not line.startswith("migplan: [")]
    assert len(said) == 1, current.stderr
    unknown = migplan("status", "--kubeconfig", str(merged), "--context", "nope", env=env)
    assert unknown.returncode == 2
    assert "nope" in unknown.stderr


def test_the_default_kubeconfig_and_a_kubeconfig_list_are_found(crds, tmp_path) -> None:
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text(Path(crds.kubeconfig).read_text())
    found = migplan("status", "-o", "json", env=bare_env(home))
    assert found.returncode == 0, found.stderr
    listed = {**bare_env(tmp_path), "KUBECONFIG": f"{tmp_path}/missing:{crds.kubeconfig}"}
    merged = migplan("status", "-o", "json", env=listed)
    assert merged.returncode == 0, merged.stderr
