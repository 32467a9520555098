"""`migplan nvml-info`: read-only, and it finds where profiles/ differs from the hardware."""

from __future__ import annotations

import json

from migplan.operator.cli import nvml_info
from migplan.operator.cli.app import run
from migplan.operator.nvml.adapter import NvmlAdapter
from migplan.operator.nvml.compare import compare
from migplan.operator.nvml.emulator import FakeNvml
from migplan.planner.hardware.catalog import default_catalog

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


def _check(hardware, capsys, monkeypatch) -> tuple[int, dict]:
    monkeypatch.setattr(nvml_info, "_simulated", lambda models: FakeNvml([hardware], mig=True))
    code = run(["nvml-info", "--simulate", "H200-141GB", "--check", "-o", "json"])
    [entry] = json.loads(capsys.readouterr().out)
    return code, entry["check"]


def test_check_gives_each_hardware_difference_with_its_fix(catalog, capsys, monkeypatch) -> None:
    real = catalog.model("H200-141GB")
    profiles = tuple(
        p.model_copy(update={"multiprocessors": 62}) if p.name == "3g.71gb" else p
        for p in real.profiles
    )
    memory = real.memory.model_copy(update={"mib": 143000})
    hardware = real.model_copy(update={"profiles": profiles, "memory": memory})
    code, check = _check(hardware, capsys, monkeypatch)
    assert code == 1
    assert {
        (d["profile"], d["fact"], d["nvml"], d["profiles"], d["kind"]) for d in check["differences"]
    } == {
        ("3g.71gb", "SMs", "62", "60", "hardware"),
        ("GPU", "memory MiB", "143000", "143771", "hardware"),
    }
    fixes = {d["fix"] for d in check["differences"]}
    sm_fix = (
        "in profiles/h200-141gb.yaml, 3g.71gb: set multiprocessors: 62 "
        "(evidence multiprocessors: read)"
    )
    assert sm_fix in fixes
    assert "in profiles/h200-141gb.yaml set memory: {mib: 143000, evidence: read}" in fixes


def test_check_lists_the_inferred_facts_nvml_confirms(catalog, capsys, monkeypatch) -> None:
    code, check = _check(catalog.model("A100-80GB"), capsys, monkeypatch)
    # profiles/ has no memory for 1g.20gb, so whatever NVML says differs
    assert [(d["profile"], d["fact"]) for d in check["differences"]] == [("1g.20gb", "memory MiB")]
    assert code == nvml_info.EXIT_MISMATCH
    confirmed = {(c["profile"], c["fact"]) for c in check["confirmed"]}
    # A100-80GB placements are inferred from the 40GB in profiles/; its IDs and counts are read
    assert ("3g.40gb", "placements") in confirmed
    assert not [c for c in confirmed if c[1] in ("id", "maxCount")]


def test_without_check_hardware_facts_do_not_count(catalog, capsys, monkeypatch) -> None:
    real = catalog.model("H200-141GB")
    profiles = tuple(p.model_copy(update={"multiprocessors": 1}) for p in real.profiles)
    hardware = real.model_copy(update={"profiles": profiles})
    monkeypatch.setattr(nvml_info, "_simulated", lambda models: FakeNvml([hardware], mig=True))
    assert run(["nvml-info", "--simulate", "H200-141GB"]) == 0
    assert "matches profiles/" in capsys.readouterr().out


def test_placements_are_read_and_compared_with_mig_off_too(catalog) -> None:
    # nvml.h: PossiblePlacements_v2 returns every placement whether MIG is on or not.
    fake = FakeNvml(["H100-80GB"], mig=False)
    with NvmlAdapter(fake.pynvml) as nvml:
        reported = nvml.profiles(0)
    by_id = {p.id: p.placements for p in reported}
    assert by_id[9] == ((0, 4), (4, 4))  # 3g.40gb
    assert compare(catalog.model("H100-80GB"), reported) == []
