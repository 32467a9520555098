"""`migplan nvml-info`: read-only, and it finds where profiles/ differs from the hardware."""

from __future__ import annotations

import json

from migplan.operator.cli import nvml_info
from migplan.operator.cli.app import run
from migplan.operator.nvml.adapter import NvmlAdapter
from migplan.operator.nvml.compare import compare
from migplan.operator.nvml.emulator import FakeNvml
from migplan.planner.catalog import default_catalog

MUTATING = ("Create", "Destroy", "SetMigMode")


def test_every_catalog_model_matches_itself(capsys, monkeypatch) -> None:
    made: list[FakeNvml] = []
    original = nvml_info._simulated

    def spy(models: str) -> FakeNvml:
        made.append(original(models))
        return made[-1]

    monkeypatch.setattr(nvml_info, "_simulated", spy)
    models = ",".join(default_catalog().keys)
    assert run(["nvml-info", "--simulate", models, "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [e["model"] for e in report] == default_catalog().keys
    assert all(e["differences"] == [] for e in report)
    assert not [c for c in made[0].calls if any(m in c for m in MUTATING)]


def test_a_differing_placement_is_reported(catalog) -> None:
    real = catalog.model("H200-141GB")
    # Suppose the real H200 placed 3g.71gb only at 4 (our starts are inferred from H100).
    profiles = tuple(
        p.model_copy(update={"starts": (4,)}) if p.name == "3g.71gb" else p for p in real.profiles
    )
    hardware = real.model_copy(update={"profiles": profiles})
    with NvmlAdapter(FakeNvml([hardware], mig=True).pynvml) as nvml:
        reported = nvml.profiles(0)
    [difference] = compare(real, reported)
    assert str(difference) == ("3g.71gb: placements is {4}:4 on this GPU, {0,4}:4 in profiles/")


def test_text_output_and_unknown_model_exit_codes(capsys) -> None:
    assert run(["nvml-info", "--simulate", "A30"]) == 0
    assert "matches profiles/" in capsys.readouterr().out
    assert run(["nvml-info", "--simulate", "V100"]) == 2
    assert "unknown GPU model 'V100'" in capsys.readouterr().err
