"""The HTML geometry report renders in headless Chromium: every GPU drawn, evictions marked,
no console errors. Chromium is installed by tests/tools/ensure-chromium.sh if missing."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from migplan.operator.cli.app import run

ROOT = Path(__file__).resolve().parents[3]
PLAN = str(ROOT / "examples" / "plan.yaml")
CLUSTER = str(ROOT / "examples" / "cluster.yaml")
HEADLESS = ("--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0")


@pytest.fixture(scope="session")
def chromium() -> str:
    result = subprocess.run(
        ["bash", str(ROOT / "tests" / "tools" / "ensure-chromium.sh")],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip().splitlines()[-1]


def headless(chromium: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [chromium, *HEADLESS, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_report_renders_every_gpu_without_console_errors(chromium, tmp_path, capsys) -> None:
    report = tmp_path / "report.html"
    assert run(["preview", PLAN, "--cluster", CLUSTER, "--html", str(report), "-o", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    url = report.as_uri()

    dom = headless(chromium, "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    # The page's script counts the GPUs it drew; both must match the plan.
    assert f'data-gpus="{len(plan["gpus"])}"' in dom.stdout
    assert len(re.findall(r'class="gpu (?:changed|unchanged)"', dom.stdout)) == len(plan["gpus"])
    evicted = sum(len(g["evict"]) for g in plan["gpus"])
    assert dom.stdout.count(' evicted"') == evicted > 0
    assert ":CONSOLE" not in dom.stderr, dom.stderr

    shot = tmp_path / "report.png"
    taken = headless(chromium, f"--screenshot={shot}", "--window-size=1200,1600", url)
    assert taken.returncode == 0, taken.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 20_000  # a drawn page, not a blank one
    assert ":CONSOLE" not in taken.stderr, taken.stderr


def test_report_is_self_contained(tmp_path) -> None:
    report = tmp_path / "report.html"
    assert run(["preview", PLAN, "--cluster", CLUSTER, "--html", str(report)]) == 0
    text = report.read_text()
    assert not re.search(r'(src|href)="(https?:)?//', text)
    assert "<script src" not in text


def test_unwritable_report_path_is_one_line(tmp_path, capsys) -> None:
    code = run(["preview", PLAN, "--cluster", CLUSTER, "--html", str(tmp_path / "no" / "r.html")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("migplan: error: cannot write")
