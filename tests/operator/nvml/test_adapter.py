"""The NVML adapter, run against the emulator (the same pynvml function surface)."""

from __future__ import annotations

import pytest

from migplan.operator.nvml import errors
from migplan.operator.nvml.adapter import MigModeChange, NvmlAdapter
from migplan.operator.nvml.emulator import FakeNvml


@pytest.fixture
def fake() -> FakeNvml:
    return FakeNvml(["A100-40GB", "H100-80GB"], mig=True)


def test_devices(fake) -> None:
    with NvmlAdapter(fake.pynvml) as nvml:
        devices = nvml.devices()
    assert [d.name for d in devices] == ["NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3"]
    assert all(d.mig_enabled and d.mig_pending for d in devices)


def test_profiles_match_the_catalog(fake, catalog) -> None:
    with NvmlAdapter(fake.pynvml) as nvml:
        profiles = nvml.profiles(1)
    h100 = catalog.model("H100-80GB")
    assert [(p.id, p.placements) for p in profiles] == sorted(
        ((p.id, tuple((s, p.size) for s in p.starts)) for p in h100.profiles),
        key=lambda item: next(q.nvml_index for q in h100.profiles if q.id == item[0]),
    )


def test_create_list_and_destroy(fake, catalog) -> None:
    h100 = catalog.model("H100-80GB")
    with NvmlAdapter(fake.pynvml) as nvml:
        first = nvml.create_instance(1, profile_id=5, start=0, size=4)
        nvml.create_instance(1, profile_id=9, start=4, size=4)
        layout, by_instance = nvml.layout(1, h100)
        assert str(layout) == "4g.40gb@0+3g.40gb@4"
        assert all(gi.compute_instances == (0,) for gi in by_instance.values())
        fake.attach_process(1, gi=first, pid=777)
        [busy] = [gi for gi in nvml.instances(1) if gi.id == first]
        assert busy.pids == (777,)
        with pytest.raises(errors.InUseError, match=f"GPU 1 GI {first}"):
            nvml.destroy_instance(1, first)
        fake.detach_processes(1)
        nvml.destroy_instance(1, first)
        assert str(nvml.layout(1, h100)[0]) == "3g.40gb@4"


def test_a_failed_compute_instance_leaves_no_gpu_instance(fake) -> None:
    fake.fail("nvmlGpuInstanceCreateComputeInstance", code=errors.UNKNOWN)
    with NvmlAdapter(fake.pynvml) as nvml:
        with pytest.raises(errors.NvmlError, match="NVML_ERROR_UNKNOWN"):
            nvml.create_instance(0, profile_id=9, start=0, size=4)
        assert nvml.instances(0) == []


def test_errors_are_typed_with_place(fake) -> None:
    with NvmlAdapter(fake.pynvml) as nvml:
        nvml.create_instance(1, profile_id=5, start=0, size=4)
        with pytest.raises(errors.InsufficientResourcesError) as caught:
            nvml.create_instance(1, profile_id=9, start=0, size=4)
    assert caught.value.code == errors.INSUFFICIENT_RESOURCES
    assert "GPU 1 profile 9 at 0" in str(caught.value)


def test_mig_mode_changes() -> None:
    fake = FakeNvml(["A100-40GB", "H100-80GB"], mig=False)
    with NvmlAdapter(fake.pynvml) as nvml:
        assert nvml.set_mig_mode(0, enabled=True) is MigModeChange.RESET_REQUIRED
        assert nvml.set_mig_mode(1, enabled=True) is MigModeChange.APPLIED
        assert nvml.set_mig_mode(1, enabled=True) is MigModeChange.UNCHANGED
        device = nvml.devices()[0]
        assert (device.mig_enabled, device.mig_pending) == (False, True)
