"""Files the CLI writes appear whole or not at all, never over an input, never through a link."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from migplan.operator.cli.app import run

ROOT = Path(__file__).resolve().parents[3]
PLAN = ROOT / "examples" / "plan.yaml"
CLUSTER = ROOT / "examples" / "cluster.yaml"


def preview_html(target: Path, capsys) -> tuple[int, str]:
    code = run(["preview", str(PLAN), "--cluster", str(CLUSTER), "--html", str(target)])
    return code, capsys.readouterr().err


def test_a_write_that_fails_midway_keeps_the_previous_report(tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    report.write_text("previous report")
    # A 2 KiB file-size limit makes the write fail partway, as a full disk would.
    script = (
        "import resource, signal, sys;"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN);"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048));"
        "from migplan.operator.cli.app import main; sys.argv = sys.argv[1:]; main()"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            "migplan",
            "preview",
            str(PLAN),
            "--cluster",
            str(CLUSTER),
            "--html",
            str(report),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONSAFEPATH": "1"},
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("migplan: error: cannot write")
    assert report.read_text() == "previous report"
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]  # no temporary left


def test_refuses_to_overwrite_an_input_file(tmp_path: Path, capsys) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN.read_text())
    code = run(["preview", str(plan), "--cluster", str(CLUSTER), "--html", str(plan)])
    err = capsys.readouterr().err
    assert code == 2
    assert "refusing to overwrite an input file" in err
    assert plan.read_text() == PLAN.read_text()


def test_a_link_is_replaced_not_followed(tmp_path: Path, capsys) -> None:
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me")
    link = tmp_path / "report.html"
    link.symlink_to(precious)
    code, err = preview_html(link, capsys)
    assert code == 0, err
    assert precious.read_text() == "keep me"
    assert not link.is_symlink()
    assert "<html" in link.read_text()


def test_a_device_or_a_pipe_is_written_into_not_replaced(tmp_path: Path, capsys) -> None:
    # As root, `--html /dev/null` used to replace the machine's /dev/null with a 0600 file.
    link = tmp_path / "to-null"
    link.symlink_to("/dev/null")
    for target in (Path("/dev/null"), link):
        code, err = preview_html(target, capsys)
        assert code == 0, err
    assert Path("/dev/null").is_char_device()
    assert link.is_symlink()
    pipe = tmp_path / "report.pipe"
    os.mkfifo(pipe)
    reader = subprocess.Popen(["cat", str(pipe)], stdout=subprocess.PIPE)
    code, err = preview_html(pipe, capsys)
    out, _ = reader.communicate(timeout=30)
    assert code == 0, err
    assert b"<html" in out
    assert pipe.is_fifo()


def test_a_new_report_gets_the_usual_permissions_and_a_replaced_one_keeps_its_own(
    tmp_path: Path, capsys
) -> None:
    fresh = tmp_path / "fresh.html"
    previous = os.umask(0o022)
    try:
        assert preview_html(fresh, capsys)[0] == 0
    finally:
        os.umask(previous)
    assert fresh.stat().st_mode & 0o777 == 0o644
    kept = tmp_path / "kept.html"
    kept.write_text("old")
    kept.chmod(0o640)
    assert preview_html(kept, capsys)[0] == 0
    assert kept.stat().st_mode & 0o777 == 0o640


def test_the_report_written_is_said_and_readable_by_others(tmp_path: Path, capsys) -> None:
    target = tmp_path / "report.html"
    previous = os.umask(0o022)
    try:
        code, err = preview_html(target, capsys)
    finally:
        os.umask(previous)
    assert code == 0
    assert f"migplan: wrote the geometry report to {target}" in err
    assert target.stat().st_mode & 0o044 == 0o044  # umask 022: not 0600
