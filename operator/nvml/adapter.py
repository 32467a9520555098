"""The NVML adapter: the one place migplan calls NVML (nvidia-ml-py's `pynvml`).

Typed results in, typed errors out (`errors.NvmlError` with the NVML code and the GPU or
instance concerned). It takes the binding module: the installed `pynvml` on a GPU node, or an
emulator's copy of it (`FakeNvml(...).pynvml`, the same module over emulated GPUs) anywhere.
NVML's list functions fill a caller's buffer and count: the buffers are sized as nvml.h says
(a profile's instance count for GPU and compute instances, a first call for placements).
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

import pynvml

from migplan.operator.nvml import errors
from migplan.operator.nvml.metrics import NVML_CALL_SECONDS, NVML_ERRORS
from migplan.planner.hardware.catalog import GpuModel
from migplan.planner.hardware.layout import Instance, Layout

# compute slices -> NVML_COMPUTE_INSTANCE_PROFILE_<n>_SLICE (nvml.h; checked against pynvml by
# tests/operator/nvml/test_errors.py)
CI_PROFILE_BY_SLICES = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 5, 6: 6}
T = TypeVar("T")


@dataclass(frozen=True)
class GpuDevice:
    """A physical GPU."""

    index: int
    uuid: str
    name: str
    memory_mib: int
    mig_enabled: bool
    mig_pending: bool
    pci_device_id: str = ""
    """The PCI device ID as profiles/ writes it (`0x2330`), empty when NVML has none."""


@dataclass(frozen=True)
class InstanceProfile:
    """A GPU-instance profile as NVML reports it on one GPU."""

    id: int
    nvml_index: int
    compute_slices: int
    max_count: int
    memory_mib: int
    placements: tuple[tuple[int, int], ...]
    """(start, size) pairs, in memory slices (listed whether MIG mode is on or not)."""
    multiprocessors: int = 0
    engines: tuple[int, int, int, int, int] = (0, 0, 0, 0, 0)
    """Copy engines, decoders, encoders, JPEG decoders, optical-flow accelerators."""
    p2p: bool = False


@dataclass(frozen=True)
class GpuInstance:
    """An existing GPU instance with its compute instances and the processes on it."""

    id: int
    profile_id: int
    start: int
    size: int
    compute_instances: tuple[int, ...]
    pids: tuple[int, ...]


class MigModeChange(StrEnum):
    """What a MIG mode change did."""

    UNCHANGED = "unchanged"
    APPLIED = "applied"
    RESET_REQUIRED = "reset-required"
    """Pending until the GPU is reset (Ampere; or a VM without reset rights)."""


def default_nvml() -> Any:
    """The real NVML binding."""
    return pynvml


class NvmlAdapter:
    """NVML, typed. Use as a context manager (init / shutdown)."""

    def __init__(self, nvml: Any = None) -> None:
        self._nvml = nvml if nvml is not None else default_nvml()

    def __enter__(self) -> NvmlAdapter:
        self._call("nvmlInit", "", self._nvml.nvmlInit)
        return self

    def __exit__(self, *exc: object) -> None:
        self._call("nvmlShutdown", "", self._nvml.nvmlShutdown)

    def _call(self, name: str, where: str, function: Callable[..., T], *args: Any) -> T:
        started = time.perf_counter()
        try:
            return function(*args)
        except self._nvml.NVMLError as exc:
            code = int(exc.value)
            NVML_ERRORS.labels(call=name, error=errors.NAMES.get(code, str(code))).inc()
            raise errors.typed(code, name, where) from None
        finally:
            NVML_CALL_SECONDS.labels(call=name).observe(time.perf_counter() - started)

    def _handle(self, index: int) -> Any:
        return self._call(
            "nvmlDeviceGetHandleByIndex",
            f"GPU {index}",
            self._nvml.nvmlDeviceGetHandleByIndex,
            index,
        )

    # ---- reading -----------------------------------------------------------------------------

    def driver_version(self) -> str:
        """The driver's version (`580.159.04`): evidence names it, and facts vary by it."""
        return _text(
            self._call("nvmlSystemGetDriverVersion", "", self._nvml.nvmlSystemGetDriverVersion)
        )

    def devices(self) -> list[GpuDevice]:
        """Every GPU NVML sees, with its MIG mode."""
        found = []
        count = self._call("nvmlDeviceGetCount", "", self._nvml.nvmlDeviceGetCount)
        for index in range(count):
            where = f"GPU {index}"
            handle = self._handle(index)
            name = self._call("nvmlDeviceGetName", where, self._nvml.nvmlDeviceGetName, handle)
            uuid = self._call("nvmlDeviceGetUUID", where, self._nvml.nvmlDeviceGetUUID, handle)
            memory = self._call(
                "nvmlDeviceGetMemoryInfo", where, self._nvml.nvmlDeviceGetMemoryInfo, handle
            )
            pci = self._call("nvmlDeviceGetPciInfo", where, self._nvml.nvmlDeviceGetPciInfo, handle)
            try:
                current, pending = self._call(
                    "nvmlDeviceGetMigMode", where, self._nvml.nvmlDeviceGetMigMode, handle
                )
            except errors.NotSupportedError:
                current = pending = 0  # not MIG-capable
            found.append(
                GpuDevice(
                    index=index,
                    uuid=_text(uuid),
                    name=_text(name),
                    memory_mib=int(memory.total) // (1024 * 1024),
                    mig_enabled=current == self._nvml.NVML_DEVICE_MIG_ENABLE,
                    mig_pending=pending == self._nvml.NVML_DEVICE_MIG_ENABLE,
                    pci_device_id=_pci_device_id(int(pci.pciDeviceId)),
                )
            )
        return found

    def _profile_infos(self, handle: Any, where: str) -> Iterator[tuple[int, Any]]:
        """(NVML profile index, profile info) for each profile the GPU supports."""
        for nvml_index in range(self._nvml.NVML_GPU_INSTANCE_PROFILE_COUNT):
            try:
                info = self._call(
                    "nvmlDeviceGetGpuInstanceProfileInfo",
                    where,
                    self._nvml.nvmlDeviceGetGpuInstanceProfileInfo,
                    handle,
                    nvml_index,
                )
            except errors.NvmlError as exc:
                if exc.code in (errors.NOT_SUPPORTED, errors.INVALID_ARGUMENT):
                    continue
                raise
            yield nvml_index, info

    def _placements(self, handle: Any, profile_id: int, where: str) -> tuple[tuple[int, int], ...]:
        """The profile's possible placements: a first call without a buffer for the count
        (nvml.h), then one with a buffer of that size."""
        count = ctypes.c_uint(0)
        self._possible_placements(handle, profile_id, None, count, where)
        buffer = (self._nvml.c_nvmlGpuInstancePlacement_t * count.value)()
        self._possible_placements(handle, profile_id, buffer, count, where)
        return tuple(sorted((int(p.start), int(p.size)) for p in buffer[: count.value]))

    def _possible_placements(
        self, handle: Any, profile_id: int, buffer: Any, count: ctypes.c_uint, where: str
    ) -> None:
        self._call(
            "nvmlDeviceGetGpuInstancePossiblePlacements",
            where,
            self._nvml.nvmlDeviceGetGpuInstancePossiblePlacements,
            handle,
            profile_id,
            buffer,
            ctypes.byref(count),
        )

    def profiles(self, index: int) -> list[InstanceProfile]:
        """The GPU-instance profiles the GPU supports, with their possible placements."""
        handle = self._handle(index)
        where = f"GPU {index}"
        found = []
        for nvml_index, info in self._profile_infos(handle, where):
            found.append(
                InstanceProfile(
                    id=int(info.id),
                    nvml_index=nvml_index,
                    compute_slices=int(info.sliceCount),
                    max_count=int(info.instanceCount),
                    memory_mib=int(info.memorySizeMB),
                    placements=self._placements(handle, int(info.id), f"{where} profile {info.id}"),
                    multiprocessors=int(info.multiprocessorCount),
                    engines=(
                        int(info.copyEngineCount),
                        int(info.decoderCount),
                        int(info.encoderCount),
                        int(info.jpegCount),
                        int(info.ofaCount),
                    ),
                    p2p=bool(info.isP2pSupported),
                )
            )
        return found

    def _gpu_instances(self, handle: Any, profile_id: int, capacity: int, where: str) -> list[Any]:
        """The GPU instances of one profile (`capacity`: the profile's instance count)."""
        buffer = (self._nvml.c_nvmlGpuInstance_t * capacity)()
        count = ctypes.c_uint(0)
        self._call(
            "nvmlDeviceGetGpuInstances",
            where,
            self._nvml.nvmlDeviceGetGpuInstances,
            handle,
            profile_id,
            buffer,
            ctypes.byref(count),
        )
        return list(buffer[: count.value])

    def instances(self, index: int) -> list[GpuInstance]:
        """The GPU instances that exist, with compute instances and processes (MIG on)."""
        handle = self._handle(index)
        where = f"GPU {index}"
        pids = self._pids_by_instance(handle, where)
        found = []
        for _, profile in self._profile_infos(handle, where):
            for gi in self._gpu_instances(
                handle, int(profile.id), int(profile.instanceCount), where
            ):
                info = self._call(
                    "nvmlGpuInstanceGetInfo", where, self._nvml.nvmlGpuInstanceGetInfo, gi
                )
                cis = self._compute_instances(gi, f"{where} GI {info.id}")
                found.append(
                    GpuInstance(
                        id=int(info.id),
                        profile_id=int(info.profileId),
                        start=int(info.placement.start),
                        size=int(info.placement.size),
                        compute_instances=tuple(sorted(int(c) for c, _ in cis)),
                        pids=tuple(sorted(pids.get(int(info.id), ()))),
                    )
                )
        return sorted(found, key=lambda g: g.start)

    def _compute_instances(self, gi: Any, where: str) -> list[tuple[int, Any]]:
        found = []
        for ci_profile in sorted(set(CI_PROFILE_BY_SLICES.values())):
            try:
                info = self._call(
                    "nvmlGpuInstanceGetComputeInstanceProfileInfo",
                    where,
                    self._nvml.nvmlGpuInstanceGetComputeInstanceProfileInfo,
                    gi,
                    ci_profile,
                    self._nvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
                )
            except errors.NotSupportedError:
                continue
            buffer = (self._nvml.c_nvmlComputeInstance_t * int(info.instanceCount))()
            count = ctypes.c_uint(0)
            self._call(
                "nvmlGpuInstanceGetComputeInstances",
                where,
                self._nvml.nvmlGpuInstanceGetComputeInstances,
                gi,
                info.id,
                buffer,
                ctypes.byref(count),
            )
            for ci in buffer[: count.value]:
                ci_info = self._call(
                    "nvmlComputeInstanceGetInfo", where, self._nvml.nvmlComputeInstanceGetInfo, ci
                )
                found.append((int(ci_info.id), ci))
        return found

    def _mig_handles(self, handle: Any, where: str) -> Iterator[tuple[Any, int]]:
        """Each MIG device of the GPU with its GPU-instance id."""
        count = self._call(
            "nvmlDeviceGetMaxMigDeviceCount",
            where,
            self._nvml.nvmlDeviceGetMaxMigDeviceCount,
            handle,
        )
        for k in range(int(count)):
            try:
                mig = self._call(
                    "nvmlDeviceGetMigDeviceHandleByIndex",
                    where,
                    self._nvml.nvmlDeviceGetMigDeviceHandleByIndex,
                    handle,
                    k,
                )
            except errors.NvmlError as exc:
                if exc.code in (errors.NOT_FOUND, errors.INVALID_ARGUMENT):
                    continue
                raise
            gi = self._call(
                "nvmlDeviceGetGpuInstanceId", where, self._nvml.nvmlDeviceGetGpuInstanceId, mig
            )
            yield mig, int(gi)

    def _pids_by_instance(self, handle: Any, where: str) -> dict[int, list[int]]:
        """Processes per GPU-instance id."""
        found: dict[int, list[int]] = {}
        for mig, gi in self._mig_handles(handle, where):
            processes = self._call(
                "nvmlDeviceGetComputeRunningProcesses",
                where,
                self._nvml.nvmlDeviceGetComputeRunningProcesses,
                mig,
            )
            found.setdefault(gi, []).extend(int(p.pid) for p in processes)
        return found

    def mig_devices(self, index: int) -> dict[str, int]:
        """MIG device UUID (what the device plugin hands to pods) -> GPU-instance id."""
        where = f"GPU {index}"
        return {
            _text(self._call("nvmlDeviceGetUUID", where, self._nvml.nvmlDeviceGetUUID, mig)): gi
            for mig, gi in self._mig_handles(self._handle(index), where)
        }

    def layout(self, index: int, model: GpuModel) -> tuple[Layout, dict[Instance, GpuInstance]]:
        """The GPU's instances as a layout of `model`, and the NVML instance behind each."""
        by_instance = {}
        for gi in self.instances(index):
            profile = model.profile_by_id(gi.profile_id)
            if profile is None:
                raise errors.NvmlError(
                    errors.UNKNOWN,
                    "layout",
                    f"GPU {index}",
                    f"profile id {gi.profile_id} is not in profiles/ for {model.model}",
                )
            by_instance[Instance(gi.start, profile.name)] = gi
        return Layout.of(list(by_instance)), by_instance

    # ---- changing ----------------------------------------------------------------------------

    def create_instance(self, index: int, *, profile_id: int, start: int, size: int) -> int:
        """Create a GPU instance at an explicit placement and its default compute instance;
        returns the GPU-instance id. A GPU instance whose compute instance cannot be made is
        destroyed again, so no unusable instance is left behind."""
        handle = self._handle(index)
        where = f"GPU {index} profile {profile_id} at {start}"
        placement = self._nvml.c_nvmlGpuInstancePlacement_t()
        placement.start, placement.size = start, size
        gi = self._call(
            "nvmlDeviceCreateGpuInstanceWithPlacement",
            where,
            self._nvml.nvmlDeviceCreateGpuInstanceWithPlacement,
            handle,
            profile_id,
            ctypes.byref(placement),  # nvml.h takes a pointer; a struct would go by value
        )
        info = self._call("nvmlGpuInstanceGetInfo", where, self._nvml.nvmlGpuInstanceGetInfo, gi)
        try:
            self._create_default_compute_instance(index, gi, profile_id, where)
        except errors.NvmlError:
            self._call("nvmlGpuInstanceDestroy", where, self._nvml.nvmlGpuInstanceDestroy, gi)
            raise
        return int(info.id)

    def ensure_compute_instance(self, index: int, gi_id: int) -> bool:
        """Give a GPU instance its default compute instance if it has none (a create that
        was interrupted); True if one was made."""
        handle = self._handle(index)
        where = f"GPU {index} GI {gi_id}"
        gi = self._gpu_instance(handle, gi_id, where)
        if self._compute_instances(gi, where):
            return False
        info = self._call("nvmlGpuInstanceGetInfo", where, self._nvml.nvmlGpuInstanceGetInfo, gi)
        self._create_default_compute_instance(index, gi, int(info.profileId), where)
        return True

    def _create_default_compute_instance(
        self, index: int, gi: Any, profile_id: int, where: str
    ) -> None:
        """The full-size compute instance of a GPU instance (what `nvidia-smi mig -cgi -C`
        and the device plugin expect)."""
        slices = {p.id: p.compute_slices for p in self.profiles(index)}[profile_id]
        ci_info = self._call(
            "nvmlGpuInstanceGetComputeInstanceProfileInfo",
            where,
            self._nvml.nvmlGpuInstanceGetComputeInstanceProfileInfo,
            gi,
            CI_PROFILE_BY_SLICES[slices],
            self._nvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
        )
        self._call(
            "nvmlGpuInstanceCreateComputeInstance",
            where,
            self._nvml.nvmlGpuInstanceCreateComputeInstance,
            gi,
            ci_info.id,
        )

    def destroy_instance(self, index: int, gi_id: int) -> None:
        """Destroy a GPU instance's compute instances, then the GPU instance."""
        handle = self._handle(index)
        where = f"GPU {index} GI {gi_id}"
        gi = self._gpu_instance(handle, gi_id, where)
        for _, ci in self._compute_instances(gi, where):
            self._call(
                "nvmlComputeInstanceDestroy", where, self._nvml.nvmlComputeInstanceDestroy, ci
            )
        self._call("nvmlGpuInstanceDestroy", where, self._nvml.nvmlGpuInstanceDestroy, gi)

    def _gpu_instance(self, handle: Any, gi_id: int, where: str) -> Any:
        for _, info in self._profile_infos(handle, where):
            for gi in self._gpu_instances(handle, int(info.id), int(info.instanceCount), where):
                got = self._call(
                    "nvmlGpuInstanceGetInfo", where, self._nvml.nvmlGpuInstanceGetInfo, gi
                )
                if int(got.id) == gi_id:
                    return gi
        raise errors.typed(errors.NOT_FOUND, "find GPU instance", where)

    def set_mig_mode(self, index: int, *, enabled: bool) -> MigModeChange:
        """Turn MIG mode on or off; says whether a reset is still needed."""
        handle = self._handle(index)
        where = f"GPU {index}"
        current, _ = self._call(
            "nvmlDeviceGetMigMode", where, self._nvml.nvmlDeviceGetMigMode, handle
        )
        wanted = (
            self._nvml.NVML_DEVICE_MIG_ENABLE if enabled else (self._nvml.NVML_DEVICE_MIG_DISABLE)
        )
        if current == wanted:
            return MigModeChange.UNCHANGED
        status = self._call(
            "nvmlDeviceSetMigMode", where, self._nvml.nvmlDeviceSetMigMode, handle, wanted
        )
        if status == self._nvml.NVML_ERROR_RESET_REQUIRED:
            return MigModeChange.RESET_REQUIRED
        if status != self._nvml.NVML_SUCCESS:
            raise errors.typed(int(status), "nvmlDeviceSetMigMode", where, "activation status")
        return MigModeChange.APPLIED


@contextmanager
def opened(nvml: Any = None) -> Iterator[NvmlAdapter]:
    """`with opened() as adapter:` — NVML initialised for the block."""
    with NvmlAdapter(nvml) as adapter:
        yield adapter


def _pci_device_id(combined: int) -> str:
    """nvmlPciInfo_t.pciDeviceId holds the device ID in its upper 16 bits, the vendor below."""
    device = combined >> 16
    return f"0x{device:04X}" if device else ""


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
