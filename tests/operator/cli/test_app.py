"""The root command: its help says what each exit code means; shells can complete it."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
import yaml

from migplan.operator.cli.app import EXIT_API, EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_NVML, run


def test_help_says_what_each_exit_code_means(capsys) -> None:
    assert run(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "Exit codes: 0 done; 1 a finding" in text
    for code, meaning in (
        (EXIT_BAD_INPUT, "bad input"),
        (EXIT_NVML, "NVML failed"),
        (EXIT_API, "the Kubernetes API failed"),
        (EXIT_INTERNAL, "a migplan bug"),
    ):
        assert f"{code} {meaning}" in text


def test_the_shell_completion_script_is_offered(capsys) -> None:
    with pytest.raises(SystemExit) as done:  # click ends the process after printing it
        run(["--show-completion", "bash"])
    assert done.value.code in (0, None)
    script = capsys.readouterr().out
    assert "_migplan_completion" in script
    assert "complete_bash" in script or "_MIGPLAN_COMPLETE" in script


def test_flags_take_no_value_in_the_help(capsys) -> None:
    assert run(["doctor", "--help"]) == 0
    lines = capsys.readouterr().out.splitlines()
    flag = next(line for line in lines if "--all" in line)
    assert "<bool>" not in flag
    assert "<str>" in next(line for line in lines if "--kubeconfig" in line)


@pytest.mark.parametrize(
    "argv",
    [
        ["profiles"],
        ["profiles", "H100-80GB"],
        ["layouts", "A100-40GB"],
        ["check-layout", "H100-80GB", "3g.40gb@0+3g.40gb@4"],
        ["doctor", "--cluster", "examples/cluster.yaml"],
        ["nvml-info", "--simulate", "A100-40GB"],
    ],
    ids=lambda argv: argv[0],
)
def test_yaml_is_the_same_document_as_json(capsys, monkeypatch, argv: list[str]) -> None:
    monkeypatch.chdir(Path(__file__).resolve().parents[3])
    run([*argv, "-o", "json"])
    as_json = json.loads(capsys.readouterr().out)
    run([*argv, "-o", "yaml"])
    assert yaml.safe_load(capsys.readouterr().out) == as_json


def _stdin(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


def test_a_plan_can_come_from_stdin(capsys, monkeypatch) -> None:
    root = Path(__file__).resolve().parents[3]
    _stdin(monkeypatch, (root / "examples" / "plan.yaml").read_bytes())
    code = run(["preview", "-", "--cluster", str(root / "examples" / "cluster.yaml"), "-o", "json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["name"] == "shared-pool"


def test_bad_input_on_stdin_is_named_stdin(capsys, monkeypatch) -> None:
    _stdin(monkeypatch, b"kind: [unclosed")
    assert run(["preview", "-", "--cluster", "examples/cluster.yaml"]) == EXIT_BAD_INPUT
    assert capsys.readouterr().err.startswith("migplan: error: stdin: not valid YAML")


def test_a_malformed_plan_selector_stops_the_operator_with_a_message(capsys) -> None:
    assert run(["operator", "--standalone", "--plan-selector", "team"]) == 2
    err = capsys.readouterr().err
    assert "--plan-selector: 'team' is not key=value" in err
    assert "Traceback" not in err
