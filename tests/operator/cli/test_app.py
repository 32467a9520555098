"""The root command: its help says what each exit code means; shells can complete it."""

from __future__ import annotations

import pytest

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
