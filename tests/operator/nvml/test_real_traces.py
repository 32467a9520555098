"""The emulator answers as real GPUs did: each transcript in profiles/evidence/ replayed.

A transcript is `migplan nvml-info --check -o json` from a GPU node and, beside it, the NVML
calls that reading made (`--trace`): entry points, integer arguments, return codes and the
counts NVML wrote back. The same reading on the emulator, built from profiles/ with the GPU's
model and MIG mode, must report the same profiles and make the same calls with the same
answers; a difference is either a fact profiles/ has wrong or behaviour the emulator has wrong.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from migplan.operator.cli import nvml_info
from migplan.operator.cli.app import run
from migplan.operator.nvml.emulator import FakeNvml
from migplan.operator.nvml.trace import TracedCall, traced_pynvml

EVIDENCE = Path(__file__).parents[3] / "profiles" / "evidence"
TRACES = sorted(EVIDENCE.glob("*.trace.json"))
REPORTED = ("name", "memoryMiB", "pciDeviceId", "migEnabled", "migPending", "model", "profiles")
MUTATING = ("Create", "Destroy", "Set")


def _replay(trace: Path, tmp_path: Path, monkeypatch, capsys) -> tuple[list, list[TracedCall]]:
    devices = json.loads(trace.read_text())["devices"]
    [mig] = {d["migEnabled"] for d in devices}
    fake = FakeNvml([d["name"] for d in devices], mig=mig)
    monkeypatch.setattr(nvml_info, "_simulated", lambda models: fake)
    out = tmp_path / "trace.json"
    names = ",".join(d["name"] for d in devices)
    run(["nvml-info", "--simulate", names, "--check", "-o", "json", "--trace", str(out)])
    report = json.loads(capsys.readouterr().out)
    return report, [TracedCall.read(c) for c in json.loads(out.read_text())["calls"]]


def test_there_is_evidence_from_real_gpus() -> None:
    assert TRACES, "profiles/evidence/ holds no trace"
    for trace in TRACES:
        assert trace.with_name(trace.name.replace(".trace.json", ".json")).exists()


@pytest.mark.parametrize("trace", TRACES, ids=[t.name for t in TRACES])
def test_the_emulator_reports_what_the_gpu_reported(trace, tmp_path, monkeypatch, capsys) -> None:
    real = json.loads(trace.with_name(trace.name.replace(".trace.json", ".json")).read_text())
    emulated, _ = _replay(trace, tmp_path, monkeypatch, capsys)
    for gpu, twin in zip(real, emulated, strict=True):
        assert {k: twin[k] for k in REPORTED} == {k: gpu[k] for k in REPORTED}


@pytest.mark.parametrize("trace", TRACES, ids=[t.name for t in TRACES])
def test_the_emulator_answers_each_call_as_the_gpu_did(
    trace, tmp_path, monkeypatch, capsys
) -> None:
    real = [TracedCall.read(c) for c in json.loads(trace.read_text())["calls"]]
    _, emulated = _replay(trace, tmp_path, monkeypatch, capsys)
    assert not [c for c in real if any(m in c.entry for m in MUTATING)]
    for n, (ours, theirs) in enumerate(zip(emulated, real, strict=False)):
        assert ours == theirs, f"call {n}: emulator {ours}, GPU {theirs}"
    assert len(emulated) == len(real)


def test_a_trace_records_each_call_and_an_entry_point_the_library_lacks() -> None:
    fake = FakeNvml(["H100-80GB"], mig=False)
    binding, recorder = traced_pynvml(fake.library)
    binding.nvmlInit()
    handle = binding.nvmlDeviceGetHandleByIndex(0)
    assert binding.nvmlDeviceGetMigMode(handle) == [0, 0]
    with pytest.raises(binding.NVMLError):
        binding.nvmlDeviceGetTemperature(handle, 0)  # the emulator implements no such call
    binding.nvmlShutdown()
    calls = [(c.entry, c.code, c.out) for c in recorder.calls]
    assert calls[:3] == [
        ("nvmlInitWithFlags", 0, ()),
        ("nvmlDeviceGetHandleByIndex_v2", 0, ()),
        ("nvmlDeviceGetMigMode", 0, (0, 0)),
    ]
    assert ("nvmlDeviceGetTemperature", None, ()) in calls
    assert TracedCall.read(recorder.calls[2].document()) == recorder.calls[2]


def test_a_trace_that_cannot_be_written_is_bad_input(tmp_path, capsys) -> None:
    target = tmp_path / "missing-folder" / "trace.json"
    code = run(["nvml-info", "--simulate", "A30", "--trace", str(target)])
    assert code == 2
    assert f"cannot write the trace to {target}" in capsys.readouterr().err
