"""Text output that fits where it goes: piped, no trailing spaces and plain tables; at 80
columns, names kept whole and commands copyable; large fleets show what changes."""

from __future__ import annotations

from pathlib import Path

import yaml

from migplan.operator.cli.app import run

ROOT = Path(__file__).resolve().parents[3]
PLAN = str(ROOT / "examples" / "plan.yaml")
CLUSTER = str(ROOT / "examples" / "cluster.yaml")


def preview_text(capsys, *extra: str) -> list[str]:
    assert run(["preview", PLAN, "--cluster", CLUSTER, *extra]) == 0
    return capsys.readouterr().out.splitlines()


def test_piped_text_has_no_trailing_spaces_and_no_box_characters(capsys) -> None:
    lines = preview_text(capsys)
    assert lines
    assert all(line == line.rstrip() for line in lines)
    assert not any(ch in line for line in lines for ch in "━┃│┏┡└─")


def test_at_80_columns_names_stay_whole(capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    lines = preview_text(capsys)
    assert all(len(line) <= 80 for line in lines if line.startswith(("|", "+")))
    text = "\n".join(lines)
    for name in ("nvidia.com/mig-1g.10gb", "inference/llm-serve-1", "research/notebook-0"):
        assert name in text  # never split across lines
    assert "Why not met" in text


def test_a_fix_to_copy_is_one_line_at_any_width(capsys, monkeypatch, tmp_path) -> None:
    document = yaml.safe_load(Path(CLUSTER).read_text())
    document["nodes"][0]["labels"]["nvidia.com/mig.strategy"] = "single"
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(document))
    monkeypatch.setenv("COLUMNS", "60")
    assert run(["doctor", "--cluster", str(cluster)]) == 1
    out = capsys.readouterr().out
    assert "--reuse-values --set mig.strategy=mixed" in out  # the command, whole on its line


def test_changed_only_hides_unchanged_gpus_and_says_so(capsys) -> None:
    every = preview_text(capsys, "--all-gpus")
    changed = preview_text(capsys, "--changed-only")
    assert sum("unchanged" in line for line in every) == 4
    assert not any(line.lstrip().startswith("gpu") and "unchanged" in line for line in changed)
    assert "(4 unchanged GPUs not shown; --all-gpus shows them)" in changed
    default = preview_text(capsys)  # 8 GPUs: a small fleet shows them all
    assert sum("unchanged" in line for line in default) == 4
