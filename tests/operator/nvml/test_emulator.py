"""The emulator rejects what real NVML rejects, with the same codes (each provoked here),
through the real pynvml functions (`fake.pynvml`)."""

from __future__ import annotations

import ctypes
import time

import pytest

from migplan.operator.nvml import errors
from migplan.operator.nvml.emulator import BindingMisuse, FakeNvml
from migplan.operator.nvml.emulator.library import ARGUMENT_VERSION_MISMATCH


class Node:
    """A FakeNvml and its pynvml, initialised, with GPU 0's handle."""

    def __init__(self, *models: str, mig: bool = True) -> None:
        self.fake = FakeNvml(models, mig=mig)
        self.nvml = self.fake.pynvml
        self.nvml.nvmlInit()
        self.handle = self.nvml.nvmlDeviceGetHandleByIndex(0)

    def __getattr__(self, name: str):
        return getattr(self.fake, name)


def nvml(*models: str, mig: bool = True) -> tuple[Node, object]:
    node = Node(*models, mig=mig)
    return node, node.handle


def create(node: Node, handle, profile_id: int, start: int, size: int):
    placement = node.nvml.c_nvmlGpuInstancePlacement_t()
    placement.start, placement.size = start, size
    return node.nvml.nvmlDeviceCreateGpuInstanceWithPlacement(
        handle, profile_id, ctypes.byref(placement)
    )


def placements(node: Node, handle, profile_id: int) -> list[tuple[int, int]]:
    """nvml.h's two calls: the count first (no buffer), then a buffer of that size."""
    count = ctypes.c_uint()
    node.nvml.nvmlDeviceGetGpuInstancePossiblePlacements(
        handle, profile_id, None, ctypes.byref(count)
    )
    buffer = (node.nvml.c_nvmlGpuInstancePlacement_t * count.value)()
    node.nvml.nvmlDeviceGetGpuInstancePossiblePlacements(
        handle, profile_id, buffer, ctypes.byref(count)
    )
    return [(p.start, p.size) for p in buffer[: count.value]]


def code_of(call) -> int:
    with pytest.raises(Exception) as caught:  # noqa: PT011 - each node's pynvml has its own
        call()
    return caught.value.value


def test_uninitialized() -> None:
    fake = FakeNvml(["A30"])
    assert code_of(fake.pynvml.nvmlDeviceGetCount) == errors.UNINITIALIZED


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


def test_mig_off_creates_nothing_and_lists_nothing() -> None:
    fake, h = nvml("H100-80GB", mig=False)
    assert code_of(lambda: create(fake, h, 0, 0, 8)) == errors.NOT_SUPPORTED
    buffer = (fake.nvml.c_nvmlGpuInstance_t * 1)()
    count = ctypes.c_uint(5)
    # as a real H200 answered with MIG off (profiles/evidence/): success, none, no MIG devices
    fake.nvml.nvmlDeviceGetGpuInstances(h, 0, buffer, ctypes.byref(count))
    assert count.value == 0
    assert fake.nvml.nvmlDeviceGetMaxMigDeviceCount(h) == 0


def test_destroy_with_compute_instance_or_process_is_in_use() -> None:
    fake, h = nvml("H100-80GB")
    gi = create(fake, h, 9, 0, 4)
    ci = fake.nvml.nvmlGpuInstanceCreateComputeInstance(gi, 2)
    assert code_of(lambda: fake.nvml.nvmlGpuInstanceDestroy(gi)) == errors.IN_USE
    fake.attach_process(0, gi=fake.nvml.nvmlGpuInstanceGetInfo(gi).id, pid=4242)
    assert code_of(lambda: fake.nvml.nvmlComputeInstanceDestroy(ci)) == errors.IN_USE
    fake.detach_processes(0)
    fake.nvml.nvmlComputeInstanceDestroy(ci)
    fake.nvml.nvmlGpuInstanceDestroy(gi)
    assert str(fake.layout(0)) == "-"


def test_second_full_compute_instance_is_refused() -> None:
    fake, h = nvml("A30")
    gi = create(fake, h, 0, 0, 4)
    fake.nvml.nvmlGpuInstanceCreateComputeInstance(gi, 3)
    assert code_of(lambda: fake.nvml.nvmlGpuInstanceCreateComputeInstance(gi, 3)) == (
        errors.INSUFFICIENT_RESOURCES
    )


def test_mig_mode_needs_a_reset_on_ampere_only() -> None:
    fake, a100 = nvml("A100-40GB", mig=False)
    assert fake.nvml.nvmlDeviceSetMigMode(a100, 1) == errors.RESET_REQUIRED
    assert fake.nvml.nvmlDeviceGetMigMode(a100) == [0, 1]
    fake.reset_gpu(0)
    assert fake.nvml.nvmlDeviceGetMigMode(a100) == [1, 1]
    hopper, h100 = nvml("H100-80GB", mig=False)
    assert hopper.nvml.nvmlDeviceSetMigMode(h100, 1) == errors.SUCCESS
    assert hopper.nvml.nvmlDeviceGetMigMode(h100) == [1, 1]


def test_mode_change_with_instances_or_processes_is_in_use() -> None:
    fake, h = nvml("H100-80GB")
    create(fake, h, 0, 0, 8)
    assert code_of(lambda: fake.nvml.nvmlDeviceSetMigMode(h, 0)) == errors.IN_USE
    idle, h2 = nvml("H100-80GB", mig=False)
    idle.attach_process(0, pid=1)
    assert code_of(lambda: idle.nvml.nvmlDeviceSetMigMode(h2, 1)) == errors.IN_USE


def test_reset_loses_instances() -> None:
    fake, h = nvml("H100-80GB")
    create(fake, h, 0, 0, 8)
    fake.reset_gpu(0)
    assert str(fake.layout(0)) == "-"


def test_rtx_pro_6000_uses_a_twelve_unit_axis() -> None:
    fake, h = nvml("RTX-PRO-6000")
    assert placements(fake, h, 14) == [(0, 3), (3, 3), (6, 3), (9, 3)]
    create(fake, h, 5, 6, 6)  # 2g.48gb at 6
    assert code_of(lambda: create(fake, h, 14, 9, 3)) == errors.INSUFFICIENT_RESOURCES


def test_injected_error_on_the_nth_call_and_a_hang() -> None:
    fake, h = nvml("A30")
    fake.fail("nvmlDeviceCreateGpuInstanceWithPlacement", code=errors.UNKNOWN, nth=2)
    create(fake, h, 14, 0, 1)
    assert code_of(lambda: create(fake, h, 14, 1, 1)) == errors.UNKNOWN
    create(fake, h, 14, 1, 1)  # only the 2nd call failed
    fake.hang("nvmlDeviceGetCount_v2", seconds=0.3)
    started = time.monotonic()
    fake.nvml.nvmlDeviceGetCount()
    assert time.monotonic() - started >= 0.3


def test_me_all_allows_only_no_media_neighbours_on_rtx_pro_6000() -> None:
    fake, h = nvml("RTX-PRO-6000")
    create(fake, h, 65, 0, 3)  # 1g.24gb+me.all
    assert code_of(lambda: create(fake, h, 14, 3, 3)) == errors.INSUFFICIENT_RESOURCES  # plain
    create(fake, h, 67, 3, 3)  # 1g.24gb-me is fine
    assert str(fake.layout(0)) == "1g.24gb+me.all@0+1g.24gb-me@3"


# ---- what C cannot check, and what pynvml's own code paths need ------------------------------


def test_a_buffer_too_small_for_the_instances_fails_the_caller() -> None:
    fake, h = nvml("H100-80GB")
    create(fake, h, 19, 0, 1)
    create(fake, h, 19, 1, 1)
    small = (fake.nvml.c_nvmlGpuInstance_t * 1)()  # 1g.10gb has 7: nvml.h wants room for 7
    count = ctypes.c_uint()
    with pytest.raises(BindingMisuse, match="into a 8-byte buffer"):
        fake.nvml.nvmlDeviceGetGpuInstances(h, 19, small, ctypes.byref(count))


def test_a_struct_passed_by_value_where_nvml_h_wants_a_pointer_is_refused() -> None:
    fake, h = nvml("H100-80GB")
    placement = fake.nvml.c_nvmlGpuInstancePlacement_t()
    placement.start, placement.size = 0, 4
    with pytest.raises(ctypes.ArgumentError):
        fake.nvml.nvmlDeviceCreateGpuInstanceWithPlacement(h, 9, placement)
    assert str(fake.layout(0)) == "-"


def test_a_versioned_struct_of_the_wrong_version_is_a_version_mismatch() -> None:
    fake, h = nvml("H100-80GB")
    assert fake.nvml.nvmlDeviceGetGpuInstanceProfileInfo(h, 0).sliceCount == 1  # v2 by default
    v1 = fake.nvml.c_nvmlGpuInstanceProfileInfo_t()
    function = fake.nvml._nvmlGetFunctionPointer("nvmlDeviceGetGpuInstanceProfileInfoV")
    assert function(h, 0, ctypes.byref(v1)) == ARGUMENT_VERSION_MISMATCH


def test_an_entry_point_the_emulator_lacks_is_function_not_found() -> None:
    fake, h = nvml("H100-80GB")
    assert code_of(lambda: fake.nvml.nvmlDeviceGetPowerUsage(h)) == (
        fake.nvml.NVML_ERROR_FUNCTION_NOT_FOUND
    )


def test_processes_take_two_calls_and_name_their_instance() -> None:
    fake, h = nvml("H100-80GB")
    gi = create(fake, h, 9, 4, 4)
    fake.nvml.nvmlGpuInstanceCreateComputeInstance(gi, 2)
    fake.attach_process(0, gi=fake.nvml.nvmlGpuInstanceGetInfo(gi).id, pid=31)
    fake.attach_process(0, gi=fake.nvml.nvmlGpuInstanceGetInfo(gi).id, pid=32)
    mig = fake.nvml.nvmlDeviceGetMigDeviceHandleByIndex(h, 0)
    processes = fake.nvml.nvmlDeviceGetComputeRunningProcesses(mig)  # sizes, then fills
    assert [(p.pid, p.gpuInstanceId, p.computeInstanceId) for p in processes] == [
        (31, 1, 0),
        (32, 1, 0),
    ]
    assert fake.nvml.nvmlDeviceGetName(mig) == "NVIDIA H100 80GB HBM3 MIG 3g.40gb"
    assert fake.calls.count("nvmlDeviceGetComputeRunningProcesses_v3") == 2


def test_an_error_inside_the_emulator_reaches_the_caller() -> None:
    fake, h = nvml("H100-80GB")

    def broken(*args: object) -> None:
        raise RuntimeError("emulator bug")

    fake.library._gpus[0].require_mig = broken  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="emulator bug"):
        create(fake, h, 9, 4, 4)


def test_error_codes_come_back_as_pynvml_classes_with_nvml_text() -> None:
    fake, h = nvml("H100-80GB")
    create(fake, h, 0, 0, 8)
    with pytest.raises(fake.nvml.NVMLError_InsufficientResources) as caught:
        create(fake, h, 0, 0, 8)
    assert str(caught.value) == "NVML_ERROR_INSUFFICIENT_RESOURCES"  # via nvmlErrorString
