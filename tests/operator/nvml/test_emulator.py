"""The emulator rejects what real NVML rejects, with the same codes (each provoked here)."""

from __future__ import annotations

import time

import pytest

from migplan.operator.nvml import errors
from migplan.operator.nvml.emulator import FakeNvml, NVMLError


def nvml(*models: str, mig: bool = True) -> tuple[FakeNvml, object]:
    fake = FakeNvml(models, mig=mig)
    fake.nvmlInit()
    return fake, fake.nvmlDeviceGetHandleByIndex(0)


def create(fake, handle, profile_id: int, start: int, size: int):
    placement = fake.c_nvmlGpuInstancePlacement_t()
    placement.start, placement.size = start, size
    return fake.nvmlDeviceCreateGpuInstanceWithPlacement(handle, profile_id, placement)


def code_of(call) -> int:
    with pytest.raises(NVMLError) as caught:
        call()
    return caught.value.value


def test_uninitialized() -> None:
    fake = FakeNvml(["A30"])
    assert code_of(fake.nvmlDeviceGetCount) == errors.UNINITIALIZED


def test_placement_rules_on_h100() -> None:
    fake, h = nvml("H100-80GB")
    create(fake, h, 5, 0, 4)  # 4g.40gb at 0
    # 3g.40gb (id 9) at 0 overlaps; at 2 is no allowed start; at 4 fits
    assert code_of(lambda: create(fake, h, 9, 0, 4)) == errors.INSUFFICIENT_RESOURCES
    assert code_of(lambda: create(fake, h, 9, 2, 4)) == errors.INVALID_ARGUMENT
    assert code_of(lambda: create(fake, h, 9, 4, 2)) == errors.INVALID_ARGUMENT  # wrong size
    create(fake, h, 9, 4, 4)
    assert str(fake.layout(0)) == "4g.40gb@0+3g.40gb@4"
    # the 4g cannot start at 4 even on an empty GPU
    fake2, h2 = nvml("H100-80GB")
    assert code_of(lambda: create(fake2, h2, 5, 4, 4)) == errors.INVALID_ARGUMENT


def test_unknown_profile_and_max_count_and_media_engines() -> None:
    fake, h = nvml("A30")
    assert code_of(lambda: create(fake, h, 99, 0, 1)) == errors.INVALID_ARGUMENT
    create(fake, h, 21, 0, 1)  # 1g.6gb+me
    assert code_of(lambda: create(fake, h, 21, 1, 1)) == errors.INSUFFICIENT_RESOURCES  # max 1
    assert code_of(lambda: create(fake, h, 6, 2, 2)) == errors.INSUFFICIENT_RESOURCES  # +me


def test_occupied_placement_is_insufficient_resources_not_already_exists() -> None:
    fake, h = nvml("A100-40GB")
    create(fake, h, 19, 3, 1)
    assert code_of(lambda: create(fake, h, 19, 3, 1)) == errors.INSUFFICIENT_RESOURCES


def test_mig_off_is_not_supported() -> None:
    fake, h = nvml("H100-80GB", mig=False)
    assert code_of(lambda: create(fake, h, 0, 0, 8)) == errors.NOT_SUPPORTED
    assert code_of(lambda: fake.nvmlDeviceGetGpuInstances(h, 0)) == errors.NOT_SUPPORTED


def test_destroy_with_compute_instance_or_process_is_in_use() -> None:
    fake, h = nvml("H100-80GB")
    gi = create(fake, h, 9, 0, 4)
    ci = fake.nvmlGpuInstanceCreateComputeInstance(gi, 2)
    assert code_of(lambda: fake.nvmlGpuInstanceDestroy(gi)) == errors.IN_USE
    fake.attach_process(0, gi=gi.gi, pid=4242)
    assert code_of(lambda: fake.nvmlComputeInstanceDestroy(ci)) == errors.IN_USE
    fake.detach_processes(0)
    fake.nvmlComputeInstanceDestroy(ci)
    fake.nvmlGpuInstanceDestroy(gi)
    assert str(fake.layout(0)) == "-"


def test_second_full_compute_instance_is_refused() -> None:
    fake, h = nvml("A30")
    gi = create(fake, h, 0, 0, 4)
    fake.nvmlGpuInstanceCreateComputeInstance(gi, 3)
    assert code_of(lambda: fake.nvmlGpuInstanceCreateComputeInstance(gi, 3)) == (
        errors.INSUFFICIENT_RESOURCES
    )


def test_mig_mode_needs_a_reset_on_ampere_only() -> None:
    fake, a100 = nvml("A100-40GB", mig=False)
    assert fake.nvmlDeviceSetMigMode(a100, 1) == errors.RESET_REQUIRED
    assert fake.nvmlDeviceGetMigMode(a100) == [0, 1]
    fake.reset_gpu(0)
    assert fake.nvmlDeviceGetMigMode(a100) == [1, 1]
    hopper, h100 = nvml("H100-80GB", mig=False)
    assert hopper.nvmlDeviceSetMigMode(h100, 1) == errors.SUCCESS
    assert hopper.nvmlDeviceGetMigMode(h100) == [1, 1]


def test_mode_change_with_instances_or_processes_is_in_use() -> None:
    fake, h = nvml("H100-80GB")
    create(fake, h, 0, 0, 8)
    assert code_of(lambda: fake.nvmlDeviceSetMigMode(h, 0)) == errors.IN_USE
    idle, h2 = nvml("H100-80GB", mig=False)
    idle.attach_process(0, pid=1)
    assert code_of(lambda: idle.nvmlDeviceSetMigMode(h2, 1)) == errors.IN_USE


def test_reset_loses_instances() -> None:
    fake, h = nvml("H100-80GB")
    create(fake, h, 0, 0, 8)
    fake.reset_gpu(0)
    assert str(fake.layout(0)) == "-"


def test_rtx_pro_6000_uses_a_twelve_unit_axis() -> None:
    fake, h = nvml("RTX-PRO-6000")
    assert [(p.start, p.size) for p in fake.nvmlDeviceGetGpuInstancePossiblePlacements(h, 14)] == [
        (0, 3),
        (3, 3),
        (6, 3),
        (9, 3),
    ]
    create(fake, h, 5, 6, 6)  # 2g.48gb at 6
    assert code_of(lambda: create(fake, h, 14, 9, 3)) == errors.INSUFFICIENT_RESOURCES


def test_injected_error_on_the_nth_call_and_a_hang() -> None:
    fake, h = nvml("A30")
    fake.fail("nvmlDeviceCreateGpuInstanceWithPlacement", code=errors.UNKNOWN, nth=2)
    create(fake, h, 14, 0, 1)
    assert code_of(lambda: create(fake, h, 14, 1, 1)) == errors.UNKNOWN
    create(fake, h, 14, 1, 1)  # only the 2nd call failed
    fake.hang("nvmlDeviceGetCount", seconds=0.3)
    started = time.monotonic()
    fake.nvmlDeviceGetCount()
    assert time.monotonic() - started >= 0.3


def test_me_all_allows_only_no_media_neighbours_on_rtx_pro_6000() -> None:
    fake, h = nvml("RTX-PRO-6000")
    create(fake, h, 65, 0, 3)  # 1g.24gb+me.all
    assert code_of(lambda: create(fake, h, 14, 3, 3)) == errors.INSUFFICIENT_RESOURCES  # plain
    create(fake, h, 67, 3, 3)  # 1g.24gb-me is fine
    assert str(fake.layout(0)) == "1g.24gb+me.all@0+1g.24gb-me@3"
