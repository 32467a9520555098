"""`migplan status` and `migplan rebalance` without a usable cluster: one line, no traceback."""

from __future__ import annotations

import pytest

from migplan.operator.cli import cluster_commands
from migplan.operator.cli.app import run


@pytest.mark.parametrize("argv", [["status"], ["status", "p"], ["rebalance", "p"]])
def test_no_cluster_is_one_line_and_exit_2(capsys, monkeypatch, argv) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    code = run([*argv, "--kubeconfig", "/nonexistent/config"])
    _, err = capsys.readouterr()
    assert code == 2
    assert err.startswith("migplan: error: no cluster to talk to")
    assert err.count("\n") == 1


def test_rebalance_needs_a_plan_name(capsys) -> None:
    assert run(["rebalance"]) == 2
    assert "Missing argument 'PLAN'" in capsys.readouterr().err


def test_help_explains_the_commands(capsys) -> None:
    assert run(["status", "--help"]) == 0
    out = capsys.readouterr().out
    assert "node by node" in out
    assert "Evicting" in out


def test_an_operators_plan_selector_is_read_from_either_flag_form() -> None:
    assert cluster_commands._flag(["operator", "--plan-selector=team=a"], "--plan-selector") == (
        "team=a"
    )
    assert cluster_commands._flag(["operator", "--plan-selector", "team=b"], "--plan-selector") == (
        "team=b"
    )
    assert cluster_commands._flag(["operator", "--plan-selector"], "--plan-selector") is None
    assert cluster_commands._flag(["operator", "--tick=1"], "--plan-selector") is None
