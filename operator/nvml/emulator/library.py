"""The emulated libnvidia-ml: C entry points over the emulated GPUs, for the real pynvml.

pynvml resolves every NVML function with `getattr(nvmlLib, name)` on the CDLL it loaded and
calls it with ctypes arguments (`byref(c_uint())`, struct buffers, arrays, opaque handles).
`EmulatedLibrary` stands where that CDLL would: each attribute is a ctypes function built from
a C prototype in nvml_h.py, so the binding's arguments are converted exactly as for the real
library; the implementation reads and writes the caller's memory through nvml.h's structs and
answers with NVML return codes. A function the emulator does not implement is missing, as in
an older driver (pynvml raises NVML_ERROR_FUNCTION_NOT_FOUND).

Two checks go beyond what C can do, because a mistake there would corrupt memory on a real
GPU node rather than fail: a write past the end of a caller's buffer, and an exception inside
the emulator, are raised in the caller after the call (`BindingMisuse`, or the exception).
"""

from __future__ import annotations

import ctypes
import itertools
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

from migplan.operator.nvml import errors
from migplan.operator.nvml.emulator import nvml_h
from migplan.operator.nvml.emulator.gpus import Gpu, NvmlReturn, Process

ARGUMENT_VERSION_MISMATCH = 25  # NVML_ERROR_ARGUMENT_VERSION_MISMATCH
INSUFFICIENT_SIZE = 7  # NVML_ERROR_INSUFFICIENT_SIZE
DRIVER_VERSION = "emulated"
# Profile indexes the emulated driver knows: 580.159.04 answers INVALID_ARGUMENT from 0x11
# (NVML_GPU_INSTANCE_PROFILE_3_SLICE_GFX, newer than that driver) on, though the binding counts
# 0x12 (profiles/evidence/h200-141gb-580.159.04-2026-11-26.trace.json).
KNOWN_PROFILE_INDEXES = 0x11
NO_INSTANCE = 0xFFFFFFFF  # gpuInstanceId/computeInstanceId of a process on a whole GPU
_UNCHECKED = ("nvmlInitWithFlags", "nvmlShutdown", "nvmlErrorString")
# Handles are addresses nobody dereferences (the handle structs are opaque); one sequence for
# every emulator in the process, so a handle of one emulated node is never valid on another.
_ADDRESSES = itertools.count(0x7E5A_0000_0000, 0x40)
S = TypeVar("S", bound="ctypes.Structure | ctypes._SimpleCData[Any] | ctypes.Array[Any]")


class BindingMisuse(AssertionError):
    """The caller passed something real NVML would misread or overrun (a test failure)."""


class _Call(threading.local):
    """What the entry point being called on this thread knows about its arguments."""

    bounds: dict[int, int]
    error: BaseException | None = None

    def __init__(self) -> None:
        self.bounds = {}


class EntryPoint:
    """One resolved NVML function: what `getattr(CDLL, name)` returns, with the test hooks.

    `restype` and `argtypes` are the ctypes function's (pynvml sets `restype` on
    nvmlErrorString); calling runs the emulator's fault hooks, then the C call.
    """

    def __init__(self, library: EmulatedLibrary, name: str, function: Any) -> None:
        self._library = library
        self._name = name
        self._function = function

    @property
    def restype(self) -> Any:
        return self._function.restype

    @restype.setter
    def restype(self, value: Any) -> None:
        self._function.restype = value

    @property
    def argtypes(self) -> Any:
        return self._function.argtypes

    def __call__(self, *args: Any) -> Any:
        code = self._library.hooks(self._name)
        if code is not None:
            return code
        call = self._library.call
        call.bounds = dict(_bounds(arg) for arg in args if _bounds(arg)[0])
        call.error = None
        try:
            result = self._function(*args)
        finally:
            call.bounds = {}
        if call.error is not None:
            error, call.error = call.error, None
            raise error
        return result


def _bounds(arg: Any) -> tuple[int, int]:
    """(address, size in bytes) of the memory behind a ctypes argument, (0, 0) if unknown."""
    target = getattr(arg, "_obj", None) if type(arg).__name__ == "CArgObject" else arg
    if isinstance(target, ctypes.Array | ctypes.Structure | ctypes._SimpleCData):
        return ctypes.addressof(target), ctypes.sizeof(target)
    return 0, 0


class EmulatedLibrary:
    """libnvidia-ml over `gpus`. `hooks(name)` runs before each call: it may raise, sleep, or
    return an NVML code that the call then returns without running."""

    def __init__(self, gpus: list[Gpu], *, lock: Any, hooks: Callable[[str], int | None]) -> None:
        self._gpus = gpus
        self._lock = lock
        self.hooks = hooks
        self.call = _Call()
        self.initialized = 0
        self._handles: dict[int, tuple[Any, ...]] = {}
        self._address_of: dict[tuple[Any, ...], int] = {}
        self._strings: dict[int, ctypes.Array[ctypes.c_char]] = {}
        for name, (restype, *argtypes) in nvml_h.PROTOTYPES.items():
            implementation = getattr(self, name)
            prototype = ctypes.CFUNCTYPE(restype, *argtypes)
            function = prototype(self._c_function(name, implementation, restype))
            self.__dict__[name] = EntryPoint(self, name, function)

    def _c_function(self, name: str, implementation: Callable[..., Any], restype: Any) -> Any:
        failed = None if restype is ctypes.c_void_p else errors.UNKNOWN

        def c_function(*args: Any) -> Any:
            try:
                with self._lock:
                    if name not in _UNCHECKED and not self.initialized:
                        return errors.UNINITIALIZED
                    result = implementation(*args)
                return errors.SUCCESS if result is None else result
            except NvmlReturn as returned:
                return returned.code
            except BaseException as exc:  # an exception cannot cross C; re-raised by the caller
                self.call.error = exc
                return failed

        return c_function

    # ---- memory and handles ----------------------------------------------------------------

    def _out(self, address: int | None, ctype: type[S], index: int = 0) -> S:
        """The caller's `ctype` at `address` (element `index` of an array), to fill."""
        if not address:
            raise NvmlReturn(errors.INVALID_ARGUMENT)
        size = self.call.bounds.get(address)
        if size is not None and (index + 1) * ctypes.sizeof(ctype) > size:
            raise BindingMisuse(
                f"NVML would write {(index + 1) * ctypes.sizeof(ctype)} bytes into a "
                f"{size}-byte buffer ({ctype.__name__}[{index}])"
            )
        return cast(S, ctype.from_address(address + index * ctypes.sizeof(ctype)))

    def _put(self, address: int | None, ctype: Any, value: Any, index: int = 0) -> None:
        self._out(address, ctype, index).value = value

    def _versioned(self, address: int | None, ctype: type[S], version: int) -> S:
        if not address:
            raise NvmlReturn(errors.INVALID_ARGUMENT)
        if ctypes.c_uint.from_address(address).value != version:
            raise NvmlReturn(ARGUMENT_VERSION_MISMATCH)
        return self._out(address, ctype)

    def handle(self, *key: Any) -> int:
        """The opaque handle of a device, MIG device, GPU or compute instance."""
        if key not in self._address_of:
            address = next(_ADDRESSES)
            self._address_of[key] = address
            self._handles[address] = key
        return self._address_of[key]

    def _key(self, address: int | None, *kinds: str) -> tuple[Any, ...]:
        key = self._handles.get(address or 0)
        if key is None or key[0] not in kinds:
            raise NvmlReturn(errors.INVALID_ARGUMENT)
        return key

    def _gpu(self, address: int | None) -> Gpu:
        index: int = self._key(address, "gpu")[1]
        return self._gpus[index]

    def _gi(self, address: int | None) -> tuple[Gpu, int]:
        _, index, gi_id = self._key(address, "gi")
        gpu = self._gpus[index]
        gpu.instance(gi_id)
        return gpu, gi_id

    def _mig(self, address: int | None) -> tuple[Gpu, int, int]:
        _, index, gi_id, ci_id = self._key(address, "mig")
        gpu = self._gpus[index]
        gpu.compute_instance(gi_id, ci_id)
        return gpu, gi_id, ci_id

    def _text(self, address: int | None, length: int, text: str) -> None:
        data = text.encode()
        if len(data) + 1 > length:
            raise NvmlReturn(INSUFFICIENT_SIZE)
        if not address:
            raise NvmlReturn(errors.INVALID_ARGUMENT)
        self._out(address, ctypes.c_char * (len(data) + 1)).value = data

    # ---- the entry points (names and arguments as in nvml.h) -------------------------------

    def nvmlInitWithFlags(self, flags: int) -> None:
        self.initialized += 1

    def nvmlShutdown(self) -> int | None:
        if not self.initialized:
            return errors.UNINITIALIZED
        self.initialized -= 1
        return None

    def nvmlErrorString(self, code: int) -> int:
        if code not in self._strings:
            text = f"NVML_ERROR_{errors.NAMES.get(code, 'UNKNOWN')}".encode()
            self._strings[code] = ctypes.create_string_buffer(text)
        return ctypes.addressof(self._strings[code])

    def nvmlSystemGetDriverVersion(self, version: int | None, length: int) -> None:
        self._text(version, length, DRIVER_VERSION)

    def nvmlDeviceGetCount_v2(self, count: int | None) -> None:
        self._put(count, ctypes.c_uint, len(self._gpus))

    def nvmlDeviceGetHandleByIndex_v2(self, index: int, device: int | None) -> None:
        if not 0 <= index < len(self._gpus):
            raise NvmlReturn(errors.INVALID_ARGUMENT)
        self._put(device, ctypes.c_void_p, self.handle("gpu", index))

    def _device_or_mig(self, address: int | None) -> tuple[Gpu, tuple[int, int] | None]:
        key = self._key(address, "gpu", "mig")
        if key[0] == "gpu":
            return self._gpus[key[1]], None
        gpu, gi_id, ci_id = self._mig(address)
        return gpu, (gi_id, ci_id)

    def nvmlDeviceGetName(self, device: int | None, name: int | None, length: int) -> None:
        gpu, mig = self._device_or_mig(device)
        text = gpu.model.products[0].nvml
        if mig is not None:
            text += f" MIG {gpu.profile(gpu.instances[mig[0]].profile_id).name}"
        self._text(name, length, text)

    def _mig_uuid(self, gpu: Gpu, gi_id: int, ci_id: int) -> str:
        return f"MIG-{gpu.uuid[4:]}-{gi_id}-{ci_id}"

    def nvmlDeviceGetUUID(self, device: int | None, uuid: int | None, length: int) -> None:
        gpu, mig = self._device_or_mig(device)
        self._text(uuid, length, gpu.uuid if mig is None else self._mig_uuid(gpu, *mig))

    def nvmlDeviceGetPciInfo_v3(self, device: int | None, pci: int | None) -> None:
        gpu = self._gpu(device)
        out = self._out(pci, nvml_h.PciInfo)
        out.domain, out.bus, out.device = 0, 0x10 + gpu.index, 0
        out.busId = f"00000000:{0x10 + gpu.index:02X}:00.0".encode()
        out.busIdLegacy = f"0000:{0x10 + gpu.index:02X}:00.0".encode()
        product = gpu.model.products[0].pci_device_id
        out.pciDeviceId = (int(product, 16) << 16 | 0x10DE) if product else 0x10DE
        out.pciSubSystemId = 0

    def _memory(self, device: int | None) -> tuple[int, int]:
        """(total, used) bytes of a device or MIG device."""
        gpu, mig = self._device_or_mig(device)
        if mig is None:
            return gpu.memory_total_mib() << 20, 0
        profile = gpu.profile(gpu.instances[mig[0]].profile_id)
        return (profile.memory_mib or 0) << 20, 0

    def nvmlDeviceGetMemoryInfo(self, device: int | None, memory: int | None) -> None:
        total, used = self._memory(device)
        out = self._out(memory, nvml_h.Memory)
        out.total, out.used, out.free = total, used, total - used

    def nvmlDeviceGetMemoryInfo_v2(self, device: int | None, memory: int | None) -> None:
        total, used = self._memory(device)
        out = self._versioned(memory, nvml_h.MemoryV2, nvml_h.MEMORY_V2)
        out.total, out.reserved, out.used, out.free = total, 0, used, total - used

    def nvmlDeviceGetMigMode(
        self, device: int | None, current: int | None, pending: int | None
    ) -> None:
        gpu = self._gpu(device)
        self._put(current, ctypes.c_uint, gpu.mig_current)
        self._put(pending, ctypes.c_uint, gpu.mig_pending)

    def nvmlDeviceSetMigMode(self, device: int | None, mode: int, status: int | None) -> None:
        gpu = self._gpu(device)
        self._out(status, ctypes.c_uint)  # checked before anything changes
        self._put(status, ctypes.c_uint, gpu.set_mig_mode(mode))

    def _profile_by_index(self, gpu: Gpu, index: int) -> Any:
        if index >= KNOWN_PROFILE_INDEXES:
            raise NvmlReturn(errors.INVALID_ARGUMENT)
        found = next((p for p in gpu.model.profiles if p.nvml_index == index), None)
        if found is None:
            raise NvmlReturn(errors.NOT_SUPPORTED)
        return found

    def _fill_gi_profile(self, out: Any, gpu: Gpu, profile: Any) -> None:
        out.id = profile.id
        out.isP2pSupported = int(bool(profile.p2p))
        out.sliceCount = profile.compute_slices
        out.instanceCount = profile.max_count
        out.multiprocessorCount = profile.multiprocessors or 0
        engines = profile.engines
        if engines is not None:
            out.copyEngineCount = engines.copy_engines
            out.decoderCount = engines.decoder
            out.encoderCount = engines.encoder
            out.jpegCount = engines.jpeg
            out.ofaCount = engines.ofa
        out.memorySizeMB = profile.memory_mib or 0

    def nvmlDeviceGetGpuInstanceProfileInfo(
        self, device: int | None, index: int, info: int | None
    ) -> None:
        gpu = self._gpu(device)
        profile = self._profile_by_index(gpu, index)
        self._fill_gi_profile(self._out(info, nvml_h.GpuInstanceProfileInfo), gpu, profile)

    def nvmlDeviceGetGpuInstanceProfileInfoV(
        self, device: int | None, index: int, info: int | None
    ) -> None:
        gpu = self._gpu(device)
        out = self._versioned(
            info, nvml_h.GpuInstanceProfileInfoV2, nvml_h.GPU_INSTANCE_PROFILE_INFO_V2
        )
        profile = self._profile_by_index(gpu, index)
        self._fill_gi_profile(out, gpu, profile)
        out.name = f"MIG {profile.name}".encode()

    def nvmlDeviceGetGpuInstancePossiblePlacements_v2(
        self, device: int | None, profile_id: int, placements: int | None, count: int | None
    ) -> None:
        gpu = self._gpu(device)  # nvml.h: all placements, whether MIG is on or not
        profile = gpu.profile(profile_id)
        if not count:
            raise NvmlReturn(errors.INVALID_ARGUMENT)
        if placements:
            for n, start in enumerate(profile.starts):
                out = self._out(placements, nvml_h.GpuInstancePlacement, n)
                out.start, out.size = start, profile.size
        self._put(count, ctypes.c_uint, len(profile.starts))

    def nvmlDeviceCreateGpuInstanceWithPlacement(
        self, device: int | None, profile_id: int, placement: int | None, instance: int | None
    ) -> None:
        gpu = self._gpu(device)
        if not placement or not instance:
            raise NvmlReturn(errors.INVALID_ARGUMENT)
        wanted = nvml_h.GpuInstancePlacement.from_address(placement)
        self._out(instance, ctypes.c_void_p)  # checked before anything changes
        created = gpu.create_instance(profile_id, wanted.start, wanted.size)
        self._put(instance, ctypes.c_void_p, self.handle("gi", gpu.index, created.id))

    def nvmlDeviceGetGpuInstances(
        self, device: int | None, profile_id: int, instances: int | None, count: int | None
    ) -> None:
        gpu = self._gpu(device)  # MIG off: no instances, not an error (profiles/evidence/)
        gpu.profile(profile_id)
        if not instances or not count:
            raise NvmlReturn(errors.INVALID_ARGUMENT)
        found = sorted(
            (gi for gi in gpu.instances.values() if gi.profile_id == profile_id),
            key=lambda gi: gi.id,
        )
        for n, gi in enumerate(found):
            self._put(instances, ctypes.c_void_p, self.handle("gi", gpu.index, gi.id), n)
        self._put(count, ctypes.c_uint, len(found))

    def nvmlGpuInstanceGetInfo(self, instance: int | None, info: int | None) -> None:
        gpu, gi_id = self._gi(instance)
        gi = gpu.instances[gi_id]
        out = self._out(info, nvml_h.GpuInstanceInfo)
        out.device = self.handle("gpu", gpu.index)
        out.id, out.profileId = gi.id, gi.profile_id
        out.placement.start, out.placement.size = gi.start, gi.size

    def _fill_ci_profile(
        self, out: Any, gpu: Gpu, gi_id: int, ci_profile: int, engine: int
    ) -> None:
        slices, count = gpu.compute_profile(gi_id, ci_profile, engine)
        gi_profile = gpu.profile(gpu.instances[gi_id].profile_id)
        out.id, out.sliceCount, out.instanceCount = ci_profile, slices, count
        sms = gi_profile.multiprocessors or 0
        out.multiprocessorCount = sms * slices // gi_profile.compute_slices
        if gi_profile.engines is not None:
            out.sharedCopyEngineCount = gi_profile.engines.copy_engines
            out.sharedDecoderCount = gi_profile.engines.decoder
            out.sharedEncoderCount = gi_profile.engines.encoder
            out.sharedJpegCount = gi_profile.engines.jpeg
            out.sharedOfaCount = gi_profile.engines.ofa

    def nvmlGpuInstanceGetComputeInstanceProfileInfo(
        self, instance: int | None, profile: int, engine: int, info: int | None
    ) -> None:
        gpu, gi_id = self._gi(instance)
        out = self._out(info, nvml_h.ComputeInstanceProfileInfo)
        self._fill_ci_profile(out, gpu, gi_id, profile, engine)

    def nvmlGpuInstanceGetComputeInstanceProfileInfoV(
        self, instance: int | None, profile: int, engine: int, info: int | None
    ) -> None:
        gpu, gi_id = self._gi(instance)
        out = self._versioned(
            info, nvml_h.ComputeInstanceProfileInfoV2, nvml_h.COMPUTE_INSTANCE_PROFILE_INFO_V2
        )
        self._fill_ci_profile(out, gpu, gi_id, profile, engine)
        out.name = f"MIG {out.sliceCount}c".encode()

    def nvmlGpuInstanceCreateComputeInstance(
        self, instance: int | None, profile_id: int, compute: int | None
    ) -> None:
        gpu, gi_id = self._gi(instance)
        self._out(compute, ctypes.c_void_p)  # checked before anything changes
        created = gpu.create_compute_instance(gi_id, profile_id)
        self._put(compute, ctypes.c_void_p, self.handle("ci", gpu.index, gi_id, created.id))

    def nvmlGpuInstanceGetComputeInstances(
        self, instance: int | None, profile_id: int, computes: int | None, count: int | None
    ) -> None:
        gpu, gi_id = self._gi(instance)
        if not computes or not count:
            raise NvmlReturn(errors.INVALID_ARGUMENT)
        found = [ci for ci in gpu.instances[gi_id].compute.values() if ci.profile_id == profile_id]
        for n, ci in enumerate(found):
            self._put(computes, ctypes.c_void_p, self.handle("ci", gpu.index, gi_id, ci.id), n)
        self._put(count, ctypes.c_uint, len(found))

    def _ci(self, address: int | None) -> tuple[Gpu, int, int]:
        _, index, gi_id, ci_id = self._key(address, "ci")
        gpu = self._gpus[index]
        gpu.compute_instance(gi_id, ci_id)
        return gpu, gi_id, ci_id

    def nvmlComputeInstanceGetInfo_v2(self, compute: int | None, info: int | None) -> None:
        gpu, gi_id, ci_id = self._ci(compute)
        ci = gpu.instances[gi_id].compute[ci_id]
        out = self._out(info, nvml_h.ComputeInstanceInfo)
        out.device = self.handle("gpu", gpu.index)
        out.gpuInstance = self.handle("gi", gpu.index, gi_id)
        out.id, out.profileId = ci.id, ci.profile_id
        slices = gpu.profile(gpu.instances[gi_id].profile_id).compute_slices
        out.placement.start, out.placement.size = 0, slices

    def nvmlComputeInstanceDestroy(self, compute: int | None) -> None:
        gpu, gi_id, ci_id = self._ci(compute)
        gpu.destroy_compute_instance(gi_id, ci_id)

    def nvmlGpuInstanceDestroy(self, instance: int | None) -> None:
        gpu, gi_id = self._gi(instance)
        gpu.destroy_instance(gi_id)

    def nvmlDeviceGetMaxMigDeviceCount(self, device: int | None, count: int | None) -> None:
        self._put(count, ctypes.c_uint, self._gpu(device).max_mig_devices())

    def nvmlDeviceGetMigDeviceHandleByIndex(
        self, device: int | None, index: int, mig: int | None
    ) -> None:
        gpu = self._gpu(device)
        gpu.require_mig()
        if index >= gpu.max_mig_devices():
            raise NvmlReturn(errors.INVALID_ARGUMENT)
        devices = gpu.mig_devices()
        if index >= len(devices):
            raise NvmlReturn(errors.NOT_FOUND)
        self._put(mig, ctypes.c_void_p, self.handle("mig", gpu.index, *devices[index]))

    def nvmlDeviceGetGpuInstanceId(self, device: int | None, gi_id: int | None) -> None:
        if self._key(device, "gpu", "mig")[0] == "gpu":
            raise NvmlReturn(errors.NOT_SUPPORTED)
        self._put(gi_id, ctypes.c_uint, self._mig(device)[1])

    def nvmlDeviceGetComputeInstanceId(self, device: int | None, ci_id: int | None) -> None:
        if self._key(device, "gpu", "mig")[0] == "gpu":
            raise NvmlReturn(errors.NOT_SUPPORTED)
        self._put(ci_id, ctypes.c_uint, self._mig(device)[2])

    def nvmlDeviceGetComputeRunningProcesses_v3(
        self, device: int | None, count: int | None, infos: int | None
    ) -> int | None:
        gpu, mig = self._device_or_mig(device)
        processes: list[Process] = gpu.processes if mig is None else gpu.processes_on(*mig)
        if not count:
            raise NvmlReturn(errors.INVALID_ARGUMENT)
        room = ctypes.c_uint.from_address(count).value
        self._put(count, ctypes.c_uint, len(processes))
        if not processes:
            return None
        if not infos or room < len(processes):
            return INSUFFICIENT_SIZE
        gi_id, ci_id = mig if mig is not None else (NO_INSTANCE, NO_INSTANCE)
        for n, process in enumerate(processes):
            out = self._out(infos, nvml_h.ProcessInfo, n)
            out.pid, out.usedGpuMemory = process.pid, process.used_memory
            out.gpuInstanceId, out.computeInstanceId = gi_id, ci_id
        return None
