"""An NVML emulator: the `pynvml` functions the adapter uses, answered with the real rules.

GPUs are built from `profiles/` (catalog models). The rules and codes follow nvml.h and
shared/reference/mig-hardware-facts.md: a GPU instance only at an allowed placement of its
profile (INVALID_ARGUMENT otherwise), never on occupied memory slices and within max counts
and media-engine exclusivity (INSUFFICIENT_RESOURCES), MIG operations with MIG off
(NOT_SUPPORTED), destroying a GPU instance that has compute instances or processes, or a
compute instance with processes (IN_USE), and on Ampere a MIG mode change that stays pending
until the GPU is reset (the call returns NVML_ERROR_RESET_REQUIRED as its activation
status). Instances do not survive a reset.

Tests attach fake processes and inject faults: an error on the n-th call of a function, or a
call that hangs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from migplan.operator.nvml import errors
from migplan.operator.nvml.adapter import CI_PROFILE_BY_SLICES
from migplan.planner.catalog import GpuModel, Profile, default_catalog
from migplan.planner.layout import Instance, Layout, check_layout

NVML_DEVICE_MIG_DISABLE = 0
NVML_DEVICE_MIG_ENABLE = 1
NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED = 0
NVML_GPU_INSTANCE_PROFILE_COUNT = 18
NVML_COMPUTE_INSTANCE_PROFILE_COUNT = 9
MIG_DEVICES_PER_GPU = 7


class NVMLError(Exception):
    """Raised like pynvml.NVMLError: `value` is the NVML return code."""

    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {errors.NAMES.get(value, value)}")
        self.value = value


@dataclass
class _Placement:
    """Like pynvml.c_nvmlGpuInstancePlacement_t: default-constructible, fields set after."""

    start: int = 0
    size: int = 0


@dataclass
class _ProfileInfo:
    id: int
    sliceCount: int
    instanceCount: int
    memorySizeMB: int


@dataclass
class _Process:
    pid: int
    usedGpuMemory: int = 0


@dataclass
class _ComputeInstance:
    id: int
    profile_id: int
    processes: list[_Process] = field(default_factory=list)


@dataclass
class _GpuInstance:
    id: int
    profile_id: int
    start: int
    size: int
    compute: dict[int, _ComputeInstance] = field(default_factory=dict)
    processes: list[_Process] = field(default_factory=list)


@dataclass
class _Gpu:
    index: int
    model: GpuModel
    uuid: str
    mig_current: int = NVML_DEVICE_MIG_DISABLE
    mig_pending: int = NVML_DEVICE_MIG_DISABLE
    instances: dict[int, _GpuInstance] = field(default_factory=dict)
    processes: list[_Process] = field(default_factory=list)  # non-MIG use

    def layout(self) -> Layout:
        return Layout.of(
            [
                Instance(gi.start, _profile(self.model, gi.profile_id).name)
                for gi in self.instances.values()
            ]
        )


def _profile(model: GpuModel, profile_id: int) -> Profile:
    profile = model.profile_by_id(profile_id)
    assert profile is not None, "only catalog profiles are ever created"
    return profile


@dataclass(frozen=True)
class _DeviceHandle:
    gpu: int


@dataclass(frozen=True)
class _GiHandle:
    gpu: int
    gi: int


@dataclass(frozen=True)
class _CiHandle:
    gpu: int
    gi: int
    ci: int


@dataclass(frozen=True)
class _MigDeviceHandle:
    gpu: int
    gi: int
    ci: int


@dataclass
class _GiInfo:
    device: _DeviceHandle
    id: int
    profileId: int
    placement: _Placement


@dataclass
class _CiInfo:
    device: _DeviceHandle
    gpuInstance: _GiHandle
    id: int
    profileId: int


class FakeNvml:
    """A stand-in for the `pynvml` module over emulated GPUs.

    `FakeNvml(["A100-40GB", "H100-80GB"])` has two GPUs with MIG off; `mig=True` turns it on.
    """

    NVMLError = NVMLError
    NVML_DEVICE_MIG_DISABLE = NVML_DEVICE_MIG_DISABLE
    NVML_DEVICE_MIG_ENABLE = NVML_DEVICE_MIG_ENABLE
    NVML_SUCCESS = errors.SUCCESS
    NVML_ERROR_RESET_REQUIRED = errors.RESET_REQUIRED
    NVML_ERROR_NOT_SUPPORTED = errors.NOT_SUPPORTED
    NVML_ERROR_NOT_FOUND = errors.NOT_FOUND
    NVML_GPU_INSTANCE_PROFILE_COUNT = NVML_GPU_INSTANCE_PROFILE_COUNT
    NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED = NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
    c_nvmlGpuInstancePlacement_t = _Placement

    def __init__(self, models: Iterable[str | GpuModel], *, mig: bool = False) -> None:
        catalog = default_catalog()
        self._lock = threading.RLock()
        self._gpus: list[_Gpu] = []
        for n, model in enumerate(models):
            resolved = model if isinstance(model, GpuModel) else catalog.model(model)
            mode = NVML_DEVICE_MIG_ENABLE if mig else NVML_DEVICE_MIG_DISABLE
            self._gpus.append(
                _Gpu(n, resolved, f"GPU-emulated-{n:04d}-{resolved.model.lower()}", mode, mode)
            )
        self._initialized = 0
        self._faults: dict[str, list[tuple[int, Callable[[], None]]]] = {}
        self._calls: dict[str, int] = {}
        self.calls: list[str] = []
        """Calls that reached the emulated NVML, by name, in order (tests count NVML
        operations with it; a call an injected fault stopped first is not in it)."""

    # ---- test controls ----------------------------------------------------------------------

    def fail(self, call: str, *, code: int, nth: int = 1) -> None:
        """Make the `nth` next call of `call` raise NVMLError(code)."""

        def raise_it() -> None:
            raise NVMLError(code)

        self._at(call, nth, raise_it)

    def hang(self, call: str, *, seconds: float, nth: int = 1) -> None:
        """Make the `nth` next call of `call` block for `seconds` before it runs."""
        self._at(call, nth, lambda: time.sleep(seconds))

    def before(self, call: str, action: Callable[[], None], *, nth: int = 1) -> None:
        """Run `action` just before the `nth` next call of `call` (tests crash the caller
        there by raising)."""
        self._at(call, nth, action)

    def _at(self, call: str, nth: int, action: Callable[[], None]) -> None:
        with self._lock:
            target = self._calls.get(call, 0) + nth
            self._faults.setdefault(call, []).append((target, action))

    def attach_process(self, gpu: int, *, gi: int | None = None, pid: int) -> None:
        """Pretend process `pid` runs on GPU instance `gi` (its first compute instance if it
        has one), or on the whole GPU when `gi` is None."""
        with self._lock:
            target = self._gpus[gpu]
            if gi is None:
                target.processes.append(_Process(pid))
                return
            instance = target.instances[gi]
            if instance.compute:
                next(iter(instance.compute.values())).processes.append(_Process(pid))
            else:
                instance.processes.append(_Process(pid))

    def detach_process(self, gpu: int, pid: int) -> None:
        """Process `pid` ends."""
        with self._lock:
            target = self._gpus[gpu]
            groups = [target.processes] + [gi.processes for gi in target.instances.values()]
            groups += [
                ci.processes for gi in target.instances.values() for ci in gi.compute.values()
            ]
            for group in groups:
                group[:] = [p for p in group if p.pid != pid]

    def gpu_instance_id(self, gpu: int, instance: Instance) -> int | None:
        """The GPU-instance id of `instance` on `gpu`, if it exists."""
        model = self._gpus[gpu].model
        for gi in self._gpus[gpu].instances.values():
            if gi.start == instance.start and _profile(model, gi.profile_id).name == (
                instance.profile
            ):
                return gi.id
        return None

    def gpu_count(self) -> int:
        """How many GPUs are emulated."""
        return len(self._gpus)

    def detach_processes(self, gpu: int) -> None:
        """Every process on `gpu` ends."""
        with self._lock:
            target = self._gpus[gpu]
            target.processes.clear()
            for gi in target.instances.values():
                gi.processes.clear()
                for ci in gi.compute.values():
                    ci.processes.clear()

    def reset_gpu(self, gpu: int) -> None:
        """A GPU reset: the pending MIG mode applies and every instance is gone."""
        with self._lock:
            target = self._gpus[gpu]
            target.mig_current = target.mig_pending
            target.instances.clear()

    def layout(self, gpu: int) -> Layout:
        """The GPU's instances as a layout (for assertions)."""
        return self._gpus[gpu].layout()

    # ---- plumbing -----------------------------------------------------------------------------

    def _enter(self, call: str) -> None:
        with self._lock:
            count = self._calls[call] = self._calls.get(call, 0) + 1
            due = [a for n, a in self._faults.get(call, []) if n == count]
            self._faults[call] = [(n, a) for n, a in self._faults.get(call, []) if n != count]
        for action in due:
            action()
        self.calls.append(call)
        if not self._initialized and call not in ("nvmlInit", "nvmlShutdown"):
            raise NVMLError(errors.UNINITIALIZED)

    def _gpu(self, handle: _DeviceHandle) -> _Gpu:
        if not isinstance(handle, _DeviceHandle) or not 0 <= handle.gpu < len(self._gpus):
            raise NVMLError(errors.INVALID_ARGUMENT)
        return self._gpus[handle.gpu]

    def _mig_on(self, gpu: _Gpu) -> None:
        if gpu.mig_current != NVML_DEVICE_MIG_ENABLE:
            raise NVMLError(errors.NOT_SUPPORTED)

    def _instance(self, handle: _GiHandle) -> tuple[_Gpu, _GpuInstance]:
        gpu = self._gpu(_DeviceHandle(handle.gpu))
        self._mig_on(gpu)
        if handle.gi not in gpu.instances:
            raise NVMLError(errors.INVALID_ARGUMENT)
        return gpu, gpu.instances[handle.gi]

    # ---- the pynvml surface -----------------------------------------------------------------

    def nvmlInit(self) -> None:
        self._enter("nvmlInit")
        self._initialized += 1

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        if not self._initialized:
            raise NVMLError(errors.UNINITIALIZED)
        self._initialized -= 1

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self._gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _DeviceHandle:
        self._enter("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self._gpus):
            raise NVMLError(errors.INVALID_ARGUMENT)
        return _DeviceHandle(index)

    def nvmlDeviceGetName(self, handle: _DeviceHandle) -> str:
        self._enter("nvmlDeviceGetName")
        return self._gpu(handle).model.products[0].nvml

    def nvmlDeviceGetUUID(self, handle: _DeviceHandle | _MigDeviceHandle) -> str:
        self._enter("nvmlDeviceGetUUID")
        if isinstance(handle, _MigDeviceHandle):
            return f"MIG-{self._gpus[handle.gpu].uuid[4:]}-{handle.gi}-{handle.ci}"
        return self._gpu(handle).uuid

    def nvmlDeviceGetMemoryInfo(self, handle: _DeviceHandle) -> Any:
        self._enter("nvmlDeviceGetMemoryInfo")
        model = self._gpu(handle).model
        mib = max((p.memory_mib or 0) for p in model.profiles)
        return type("Memory", (), {"total": mib * 1024 * 1024})()

    def nvmlDeviceGetMigMode(self, handle: _DeviceHandle) -> list[int]:
        self._enter("nvmlDeviceGetMigMode")
        gpu = self._gpu(handle)
        return [gpu.mig_current, gpu.mig_pending]

    def nvmlDeviceSetMigMode(self, handle: _DeviceHandle, mode: int) -> int:
        self._enter("nvmlDeviceSetMigMode")
        with self._lock:
            gpu = self._gpu(handle)
            if mode not in (NVML_DEVICE_MIG_DISABLE, NVML_DEVICE_MIG_ENABLE):
                raise NVMLError(errors.INVALID_ARGUMENT)
            if gpu.instances or gpu.processes:
                raise NVMLError(errors.IN_USE)
            gpu.mig_pending = mode
            if gpu.model.mig_mode_change_needs_reset and gpu.mig_current != mode:
                return errors.RESET_REQUIRED
            gpu.mig_current = mode
            return errors.SUCCESS

    def nvmlDeviceGetGpuInstanceProfileInfo(
        self, handle: _DeviceHandle, profile: int
    ) -> _ProfileInfo:
        self._enter("nvmlDeviceGetGpuInstanceProfileInfo")
        gpu = self._gpu(handle)
        found = next((p for p in gpu.model.profiles if p.nvml_index == profile), None)
        if found is None:
            raise NVMLError(errors.NOT_SUPPORTED)
        return _ProfileInfo(found.id, found.compute_slices, found.max_count, found.memory_mib or 0)

    def nvmlDeviceGetGpuInstancePossiblePlacements(
        self, handle: _DeviceHandle, profile_id: int
    ) -> list[_Placement]:
        self._enter("nvmlDeviceGetGpuInstancePossiblePlacements")
        profile = self._gpu(handle).model.profile_by_id(profile_id)
        if profile is None:
            raise NVMLError(errors.INVALID_ARGUMENT)
        return [_Placement(s, profile.size) for s in profile.starts]

    def nvmlDeviceCreateGpuInstanceWithPlacement(
        self, handle: _DeviceHandle, profile_id: int, placement: Any
    ) -> _GiHandle:
        self._enter("nvmlDeviceCreateGpuInstanceWithPlacement")
        with self._lock:
            gpu = self._gpu(handle)
            self._mig_on(gpu)
            profile = gpu.model.profile_by_id(profile_id)
            if (
                profile is None
                or placement.start not in profile.starts
                or (placement.size != profile.size)
            ):
                raise NVMLError(errors.INVALID_ARGUMENT)
            grown = gpu.layout().with_instance(Instance(placement.start, profile.name))
            if check_layout(gpu.model, grown):
                raise NVMLError(errors.INSUFFICIENT_RESOURCES)
            gi_id = min(set(range(1, 64)) - set(gpu.instances))
            gpu.instances[gi_id] = _GpuInstance(gi_id, profile.id, placement.start, profile.size)
            return _GiHandle(gpu.index, gi_id)

    def nvmlDeviceGetGpuInstances(self, handle: _DeviceHandle, profile_id: int) -> list[_GiHandle]:
        self._enter("nvmlDeviceGetGpuInstances")
        gpu = self._gpu(handle)
        self._mig_on(gpu)
        return [
            _GiHandle(gpu.index, gi.id)
            for gi in sorted(gpu.instances.values(), key=lambda g: g.id)
            if gi.profile_id == profile_id
        ]

    def nvmlGpuInstanceGetInfo(self, handle: _GiHandle) -> _GiInfo:
        self._enter("nvmlGpuInstanceGetInfo")
        _, gi = self._instance(handle)
        return _GiInfo(
            _DeviceHandle(handle.gpu), gi.id, gi.profile_id, _Placement(gi.start, gi.size)
        )

    def nvmlGpuInstanceGetComputeInstanceProfileInfo(
        self, handle: _GiHandle, profile: int, engine: int
    ) -> _ProfileInfo:
        self._enter("nvmlGpuInstanceGetComputeInstanceProfileInfo")
        gpu, gi = self._instance(handle)
        slices = _profile(gpu.model, gi.profile_id).compute_slices
        wanted = {v: k for k, v in CI_PROFILE_BY_SLICES.items()}.get(profile)
        if wanted is None or wanted > slices or engine != 0:
            raise NVMLError(errors.NOT_SUPPORTED)
        return _ProfileInfo(profile, wanted, slices // wanted, 0)

    def nvmlGpuInstanceCreateComputeInstance(self, handle: _GiHandle, profile_id: int) -> _CiHandle:
        self._enter("nvmlGpuInstanceCreateComputeInstance")
        with self._lock:
            gpu, gi = self._instance(handle)
            slices = _profile(gpu.model, gi.profile_id).compute_slices
            if profile_id != CI_PROFILE_BY_SLICES.get(slices):
                raise NVMLError(errors.INVALID_ARGUMENT)  # only the full-size default CI
            if gi.compute:
                raise NVMLError(errors.INSUFFICIENT_RESOURCES)
            ci_id = 0
            gi.compute[ci_id] = _ComputeInstance(ci_id, profile_id)
            return _CiHandle(handle.gpu, gi.id, ci_id)

    def nvmlGpuInstanceGetComputeInstances(
        self, handle: _GiHandle, profile_id: int
    ) -> list[_CiHandle]:
        self._enter("nvmlGpuInstanceGetComputeInstances")
        _, gi = self._instance(handle)
        return [
            _CiHandle(handle.gpu, gi.id, ci.id)
            for ci in gi.compute.values()
            if ci.profile_id == profile_id
        ]

    def nvmlComputeInstanceGetInfo(self, handle: _CiHandle) -> _CiInfo:
        self._enter("nvmlComputeInstanceGetInfo")
        _, gi = self._instance(_GiHandle(handle.gpu, handle.gi))
        ci = gi.compute.get(handle.ci)
        if ci is None:
            raise NVMLError(errors.INVALID_ARGUMENT)
        return _CiInfo(
            _DeviceHandle(handle.gpu), _GiHandle(handle.gpu, handle.gi), ci.id, ci.profile_id
        )

    def nvmlComputeInstanceDestroy(self, handle: _CiHandle) -> None:
        self._enter("nvmlComputeInstanceDestroy")
        with self._lock:
            _, gi = self._instance(_GiHandle(handle.gpu, handle.gi))
            ci = gi.compute.get(handle.ci)
            if ci is None:
                raise NVMLError(errors.INVALID_ARGUMENT)
            if ci.processes:
                raise NVMLError(errors.IN_USE)
            del gi.compute[handle.ci]

    def nvmlGpuInstanceDestroy(self, handle: _GiHandle) -> None:
        self._enter("nvmlGpuInstanceDestroy")
        with self._lock:
            gpu, gi = self._instance(handle)
            if gi.compute or gi.processes:
                raise NVMLError(errors.IN_USE)
            del gpu.instances[gi.id]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: _DeviceHandle) -> int:
        self._enter("nvmlDeviceGetMaxMigDeviceCount")
        return (
            MIG_DEVICES_PER_GPU
            if self._gpu(handle).model.compute_slices == 7
            else (self._gpu(handle).model.max_instances)
        )

    def _mig_devices(self, gpu: _Gpu) -> list[_MigDeviceHandle]:
        return [
            _MigDeviceHandle(gpu.index, gi.id, ci.id)
            for gi in sorted(gpu.instances.values(), key=lambda g: g.start)
            for ci in gi.compute.values()
        ]

    def nvmlDeviceGetMigDeviceHandleByIndex(
        self, handle: _DeviceHandle, index: int
    ) -> _MigDeviceHandle:
        self._enter("nvmlDeviceGetMigDeviceHandleByIndex")
        gpu = self._gpu(handle)
        self._mig_on(gpu)
        devices = self._mig_devices(gpu)
        if not 0 <= index < len(devices):
            raise NVMLError(errors.NOT_FOUND)
        return devices[index]

    def nvmlDeviceGetGpuInstanceId(self, handle: _MigDeviceHandle) -> int:
        self._enter("nvmlDeviceGetGpuInstanceId")
        return handle.gi

    def nvmlDeviceGetComputeInstanceId(self, handle: _MigDeviceHandle) -> int:
        self._enter("nvmlDeviceGetComputeInstanceId")
        return handle.ci

    def nvmlDeviceGetComputeRunningProcesses(
        self, handle: _DeviceHandle | _MigDeviceHandle
    ) -> list[_Process]:
        self._enter("nvmlDeviceGetComputeRunningProcesses")
        if isinstance(handle, _MigDeviceHandle):
            _, gi = self._instance(_GiHandle(handle.gpu, handle.gi))
            ci = gi.compute.get(handle.ci)
            return list(gi.processes) + (list(ci.processes) if ci else [])
        return list(self._gpu(handle).processes)
