"""The agent's per-GPU pass on the NVML emulator: converges, refuses to destroy running work,
and finishes after a crash at any step without an extra destroy."""

from __future__ import annotations

from collections import Counter

import pytest

from migplan.operator.agent.node import still_evicted
from migplan.operator.agent.reconcile import GpuPhase, reconcile_gpu
from migplan.operator.nvml import errors
from migplan.operator.nvml.adapter import NvmlAdapter
from migplan.operator.nvml.emulator import FakeNvml
from migplan.planner.hardware.layout import Instance, Layout

MUTATING = (
    "nvmlDeviceCreateGpuInstanceWithPlacement",
    "nvmlGpuInstanceCreateComputeInstance",
    "nvmlComputeInstanceDestroy",
    "nvmlGpuInstanceDestroy",
    "nvmlDeviceSetMigMode",
)


class Crash(Exception):
    """The agent dies here."""


def gpu(model: str = "H100-80GB", layout: str = "-", *, mig: bool = True) -> FakeNvml:
    fake = FakeNvml([model], mig=mig)
    with NvmlAdapter(fake.pynvml) as nvml:
        for instance in Layout.parse(layout).instances:
            p = fake._gpus[0].model.profile(instance.profile)
            nvml.create_instance(0, profile_id=p.id, start=instance.start, size=p.size)
    fake.calls.clear()
    return fake


def run(fake: FakeNvml, desired: str, **kw):
    with NvmlAdapter(fake.pynvml) as nvml:
        return reconcile_gpu(
            nvml, index=0, model=fake._gpus[0].model, desired=Layout.parse(desired), **kw
        )


def mutations(fake: FakeNvml) -> list[str]:
    return [c for c in fake.calls if c in MUTATING]


def test_fresh_hopper_gpu_with_mig_off() -> None:
    fake = gpu(mig=False)
    outcome = run(fake, "3g.40gb@0+2g.20gb@4+1g.10gb@6")
    assert outcome.phase is GpuPhase.CONVERGED
    assert outcome.steps[0] == "enable MIG"
    assert str(fake.layout(0)) == "3g.40gb@0+2g.20gb@4+1g.10gb@6"


def test_ampere_waits_for_a_reset_then_converges() -> None:
    fake = gpu("A100-40GB", mig=False)
    assert run(fake, "7g.40gb@0").phase is GpuPhase.RESET_REQUIRED
    fake.reset_gpu(0)
    assert run(fake, "7g.40gb@0").phase is GpuPhase.CONVERGED
    assert str(fake.layout(0)) == "7g.40gb@0"


def test_partial_change_next_to_a_busy_instance() -> None:
    fake = gpu(layout="3g.40gb@0+1g.10gb@4+1g.10gb@5")
    busy = next(gi for gi in fake._gpus[0].instances.values() if gi.start == 0)
    fake.attach_process(0, gi=busy.id, pid=100)
    outcome = run(fake, "3g.40gb@0+2g.20gb@4")
    assert outcome.phase is GpuPhase.CONVERGED
    assert outcome.steps == ["destroy 1g.10gb@4", "destroy 1g.10gb@5", "create 2g.20gb@4"]
    assert busy.id in fake._gpus[0].instances  # untouched, still the same GPU instance


def test_full_rebuild() -> None:
    fake = gpu(layout="1g.10gb@0+1g.10gb@1+2g.20gb@2+3g.40gb@4")
    outcome = run(fake, "7g.80gb@0")
    assert outcome.phase is GpuPhase.CONVERGED
    assert Counter(s.split()[0] for s in outcome.steps) == {"destroy": 4, "create": 1}


def test_never_destroys_an_instance_with_processes() -> None:
    fake = gpu(layout="1g.10gb@0+1g.10gb@1")
    gi = next(iter(fake._gpus[0].instances))
    fake.attach_process(0, gi=gi, pid=7)
    outcome = run(fake, "7g.80gb@0")
    assert outcome.phase is GpuPhase.BLOCKED
    assert "still runs processes [7]" in outcome.reasons[0]
    assert not outcome.stopping  # a process no pod holds is not going away on its own
    assert mutations(fake) == []


def test_a_pod_must_be_evicted_first_and_gone() -> None:
    fake = gpu(layout="1g.10gb@3")
    held = {Instance(3, "1g.10gb"): "team/job-1"}
    blocked = run(fake, "7g.80gb@0", assigned=held)
    assert blocked.phase is GpuPhase.BLOCKED
    assert "used by pod team/job-1, which has not been evicted" in blocked.reasons[0]
    assert not blocked.stopping
    fake.attach_process(0, gi=next(iter(fake._gpus[0].instances)), pid=9)
    waiting = run(fake, "7g.80gb@0", assigned=held, evicted={"team/job-1"})
    assert waiting.phase is GpuPhase.BLOCKED
    assert "waiting for it to stop" in waiting.reasons[0]
    assert waiting.stopping
    fake.detach_processes(0)
    done = run(fake, "7g.80gb@0", assigned=held, evicted={"team/job-1"})
    assert done.phase is GpuPhase.CONVERGED


def test_nvml_error_midway_then_the_next_pass_finishes() -> None:
    fake = gpu(layout="1g.10gb@0+1g.10gb@1")
    fake.fail("nvmlDeviceCreateGpuInstanceWithPlacement", code=errors.UNKNOWN)
    failed = run(fake, "4g.40gb@0+3g.40gb@4")
    assert failed.phase is GpuPhase.FAILED
    assert "NVML_ERROR_UNKNOWN" in failed.reasons[0]
    assert str(failed.after) == "-"  # destroys happened, the first create failed
    assert run(fake, "4g.40gb@0+3g.40gb@4").phase is GpuPhase.CONVERGED


def test_second_pass_makes_no_nvml_change() -> None:
    fake = gpu(layout="1g.10gb@0")
    run(fake, "3g.40gb@0+3g.40gb@4")
    fake.calls.clear()
    again = run(fake, "3g.40gb@0+3g.40gb@4")
    assert again.phase is GpuPhase.CONVERGED
    assert again.steps == []
    assert mutations(fake) == []


def test_invalid_target_touches_nothing() -> None:
    fake = gpu(layout="1g.10gb@0")
    outcome = run(fake, "3g.40gb@0+4g.40gb@4")
    assert outcome.phase is GpuPhase.INVALID
    assert mutations(fake) == []


START, TARGET = "3g.40gb@0+1g.10gb@4+1g.10gb@5+1g.10gb@6", "3g.40gb@0+2g.20gb@4+1g.10gb@6"


def crash_points() -> list[tuple[str, int]]:
    fake = gpu(layout=START)
    run(fake, TARGET)
    seen: Counter[str] = Counter()
    points = []
    for call in mutations(fake):
        seen[call] += 1
        points.append((call, seen[call]))
    return points


@pytest.mark.parametrize(("call", "nth"), crash_points())
def test_crash_before_any_nvml_change_then_restart_converges(call, nth) -> None:
    fake = gpu(layout=START)
    kept = {gi.id for gi in fake._gpus[0].instances.values() if gi.start in (0, 6)}

    def crash() -> None:
        raise Crash

    fake.before(call, crash, nth=nth)
    with pytest.raises(Crash):
        run(fake, TARGET)
    outcome = run(fake, TARGET)
    assert outcome.phase is GpuPhase.CONVERGED
    assert str(fake.layout(0)) == TARGET
    assert kept <= set(fake._gpus[0].instances)  # kept instances never destroyed
    destroyed = Counter(c for c in fake.calls if c == "nvmlGpuInstanceDestroy")
    assert destroyed["nvmlGpuInstanceDestroy"] == 2  # 1g@4 and 1g@5, once each


def test_a_pod_made_again_under_an_evicted_name_is_not_evicted() -> None:
    # The operator evicted ml/db-0 (UID a); a StatefulSet made ml/db-0 again (UID b), and
    # the device plugin gave it the same instance before its process started: by name
    # alone the agent destroyed the new pod's instance.
    uids = {"ml/db-0": "a", "ml/web": "w"}
    live = {("ml", "db-0"): "b", ("ml", "web"): "w"}
    evicted = ["ml/db-0", "ml/web", "ml/gone", "ml/old"]
    assert still_evicted(
        evicted, uids={**uids, "ml/gone": "g"}, uid_of=lambda ns, name: live.get((ns, name))
    ) == ["ml/web", "ml/gone", "ml/old"]
