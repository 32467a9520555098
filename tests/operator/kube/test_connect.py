"""Where the kubeconfig is looked for, as kubectl looks (no cluster needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from migplan.operator.kube.connect import connect, kubeconfig_files
from migplan.planner.errors import MigplanInputError


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    return tmp_path


def test_the_flag_then_kubeconfig_then_the_default_file(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert kubeconfig_files() is None
    default = home / ".kube" / "config"
    default.parent.mkdir()
    default.write_text("{}")
    assert kubeconfig_files() == str(default)
    monkeypatch.setenv("KUBECONFIG", "/a:/b")
    assert kubeconfig_files() == "/a:/b"
    assert kubeconfig_files("/flag") == "/flag"
    monkeypatch.setenv("KUBECONFIG", ":")  # only empty parts: as if unset
    assert kubeconfig_files() == str(default)


def test_a_context_without_a_kubeconfig_is_bad_input(home: Path) -> None:
    with pytest.raises(MigplanInputError, match="--context dev: no kubeconfig to find it in"):
        connect(context="dev")
