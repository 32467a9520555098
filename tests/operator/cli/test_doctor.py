"""`migplan doctor` offline: findings with fixes, exit 1 when a node would be refused."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from migplan.operator.cli.app import run

ROOT = Path(__file__).resolve().parents[3]


def inventory(tmp_path: Path, strategies: dict[str, str | None]) -> Path:
    document = yaml.safe_load((ROOT / "examples" / "cluster.yaml").read_text())
    nodes = []
    for template, (name, strategy) in zip(document["nodes"], strategies.items(), strict=False):
        labels = {k: v for k, v in template["labels"].items() if k != "nvidia.com/mig.strategy"}
        if strategy:
            labels["nvidia.com/mig.strategy"] = strategy
        nodes.append({**template, "name": name, "labels": labels})
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump({**document, "nodes": nodes}))
    return path


def test_the_bundled_example_is_ready(capsys) -> None:
    assert run(["doctor", "--cluster", str(ROOT / "examples" / "cluster.yaml")]) == 0
    out = capsys.readouterr().out
    assert "5 GPU nodes, actuator agent, inventory file" in out
    assert "ready: 0 blocking, 0 warnings" in out


def test_a_single_strategy_node_is_refused_and_the_fix_named(tmp_path, capsys) -> None:
    path = inventory(tmp_path, {"gpu-a": "mixed", "gpu-b": "single", "gpu-c": None})
    assert run(["doctor", "--cluster", str(path)]) == 1
    out = capsys.readouterr().out
    assert "gpu-b" in out
    assert "MIG strategy single" in out
    assert "some nodes would be refused: 1 blocking, 1 warnings" in out
    assert run(["doctor", "--cluster", str(path), "-o", "json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert (document["passed"], document["reason"], document["live"]) == (
        False,
        "MigStrategy",
        False,
    )
    blocking = [f for f in document["findings"] if f["severity"] == "blocking"]
    assert [(f["node"], f["check"]) for f in blocking] == [("gpu-b", "MigStrategy")]
    assert "mig.strategy=mixed" in blocking[0]["fix"]


def test_a_plan_limits_the_check_to_its_nodes(tmp_path, capsys) -> None:
    path = inventory(tmp_path, {"gpu-a": "mixed", "gpu-b": "single"})
    plan = yaml.safe_load((ROOT / "examples" / "plan.yaml").read_text())
    plan["spec"]["nodeSelector"] = {"matchLabels": {"kubernetes.io/hostname": "nowhere"}}
    plan_path = tmp_path / "plan.yaml"
    plan_path.write_text(yaml.safe_dump(plan))
    assert run(["doctor", "--cluster", str(path), "--plan", str(plan_path)]) == 0
    assert "0 GPU nodes" in capsys.readouterr().out


def test_a_missing_inventory_is_a_clear_error(tmp_path, capsys) -> None:
    code = run(["doctor", "--cluster", str(tmp_path / "nope.yaml")])
    assert code != 0
    err = capsys.readouterr().err
    assert "nope.yaml" in err
    assert "Traceback" not in err
