"""The C side of NVML that the emulator implements: structs, struct versions and entry-point
prototypes as nvml.h declares them (NVML 12.x/13.x).

These are the emulator's own definitions, written from nvml.h, not borrowed from pynvml: the
binding fills and reads its structs, the emulator reads and fills these at the same addresses,
so a binding struct that disagrees with nvml.h shows up as a wrong value or a version
mismatch in a test. tests/operator/nvml/test_conformance.py holds pynvml's structs and version
constants to these field by field.
"""

from __future__ import annotations

import ctypes
from ctypes import c_char, c_int, c_uint, c_ulonglong, c_void_p
from typing import Any

NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96
NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96
GPU_INSTANCE_PROFILE_COUNT = 0x12  # NVML_GPU_INSTANCE_PROFILE_COUNT


def struct_version(struct: type[ctypes.Structure], version: int) -> int:
    """nvml.h's NVML_STRUCT_VERSION(data, ver): the struct's size with the version in the top
    byte (what a versioned struct's first field must hold)."""
    return ctypes.sizeof(struct) | (version << 24)


class PciInfo(ctypes.Structure):
    """nvmlPciInfo_t (what nvmlDeviceGetPciInfo_v3 fills)."""

    _fields_ = [
        ("busIdLegacy", c_char * 16),
        ("domain", c_uint),
        ("bus", c_uint),
        ("device", c_uint),
        ("pciDeviceId", c_uint),
        ("pciSubSystemId", c_uint),
        ("busId", c_char * 32),
    ]


class Memory(ctypes.Structure):
    """nvmlMemory_t (v1)."""

    _fields_ = [("total", c_ulonglong), ("free", c_ulonglong), ("used", c_ulonglong)]


class MemoryV2(ctypes.Structure):
    """nvmlMemory_v2_t."""

    _fields_ = [
        ("version", c_uint),
        ("total", c_ulonglong),
        ("reserved", c_ulonglong),
        ("free", c_ulonglong),
        ("used", c_ulonglong),
    ]


class GpuInstancePlacement(ctypes.Structure):
    """nvmlGpuInstancePlacement_t (also nvmlComputeInstancePlacement_t's layout)."""

    _fields_ = [("start", c_uint), ("size", c_uint)]


_GI_PROFILE_FIELDS: list[tuple[str, Any]] = [
    ("id", c_uint),
    ("isP2pSupported", c_uint),
    ("sliceCount", c_uint),
    ("instanceCount", c_uint),
    ("multiprocessorCount", c_uint),
    ("copyEngineCount", c_uint),
    ("decoderCount", c_uint),
    ("encoderCount", c_uint),
    ("jpegCount", c_uint),
    ("ofaCount", c_uint),
    ("memorySizeMB", c_ulonglong),
]


class GpuInstanceProfileInfo(ctypes.Structure):
    """nvmlGpuInstanceProfileInfo_t (v1, unversioned)."""

    _fields_ = _GI_PROFILE_FIELDS


class GpuInstanceProfileInfoV2(ctypes.Structure):
    """nvmlGpuInstanceProfileInfo_v2_t: v1 behind a version word, plus the profile's name."""

    _fields_ = [
        ("version", c_uint),
        *_GI_PROFILE_FIELDS,
        ("name", c_char * NVML_DEVICE_NAME_V2_BUFFER_SIZE),
    ]


class GpuInstanceInfo(ctypes.Structure):
    """nvmlGpuInstanceInfo_t."""

    _fields_ = [
        ("device", c_void_p),
        ("id", c_uint),
        ("profileId", c_uint),
        ("placement", GpuInstancePlacement),
    ]


_CI_PROFILE_FIELDS: list[tuple[str, Any]] = [
    ("id", c_uint),
    ("sliceCount", c_uint),
    ("instanceCount", c_uint),
    ("multiprocessorCount", c_uint),
    ("sharedCopyEngineCount", c_uint),
    ("sharedDecoderCount", c_uint),
    ("sharedEncoderCount", c_uint),
    ("sharedJpegCount", c_uint),
    ("sharedOfaCount", c_uint),
]


class ComputeInstanceProfileInfo(ctypes.Structure):
    """nvmlComputeInstanceProfileInfo_t (v1, unversioned)."""

    _fields_ = _CI_PROFILE_FIELDS


class ComputeInstanceProfileInfoV2(ctypes.Structure):
    """nvmlComputeInstanceProfileInfo_v2_t."""

    _fields_ = [
        ("version", c_uint),
        *_CI_PROFILE_FIELDS,
        ("name", c_char * NVML_DEVICE_NAME_V2_BUFFER_SIZE),
    ]


class ComputeInstanceInfo(ctypes.Structure):
    """nvmlComputeInstanceInfo_t."""

    _fields_ = [
        ("device", c_void_p),
        ("gpuInstance", c_void_p),
        ("id", c_uint),
        ("profileId", c_uint),
        ("placement", GpuInstancePlacement),
    ]


class ProcessInfo(ctypes.Structure):
    """nvmlProcessInfo_t (v2 layout; the _v3 entry point fills it)."""

    _fields_ = [
        ("pid", c_uint),
        ("usedGpuMemory", c_ulonglong),
        ("gpuInstanceId", c_uint),
        ("computeInstanceId", c_uint),
    ]


MEMORY_V2 = struct_version(MemoryV2, 2)
GPU_INSTANCE_PROFILE_INFO_V2 = struct_version(GpuInstanceProfileInfoV2, 2)
COMPUTE_INSTANCE_PROFILE_INFO_V2 = struct_version(ComputeInstanceProfileInfoV2, 2)

# Pointers, handles and buffers are passed as addresses (c_void_p): the emulator cannot know a
# caller's types, exactly like the C library; the struct versions and the buffer guard in
# library.py catch a binding that passes the wrong thing.
P = c_void_p
U = c_uint

PROTOTYPES: dict[str, tuple[Any, ...]] = {
    # name: (restype, *argtypes), in nvml.h's order of arguments
    "nvmlInitWithFlags": (c_int, U),
    "nvmlShutdown": (c_int,),
    "nvmlErrorString": (c_void_p, c_int),
    "nvmlSystemGetDriverVersion": (c_int, P, U),
    "nvmlDeviceGetCount_v2": (c_int, P),
    "nvmlDeviceGetHandleByIndex_v2": (c_int, U, P),
    "nvmlDeviceGetName": (c_int, P, P, U),
    "nvmlDeviceGetUUID": (c_int, P, P, U),
    "nvmlDeviceGetPciInfo_v3": (c_int, P, P),
    "nvmlDeviceGetMemoryInfo": (c_int, P, P),
    "nvmlDeviceGetMemoryInfo_v2": (c_int, P, P),
    "nvmlDeviceGetMigMode": (c_int, P, P, P),
    "nvmlDeviceSetMigMode": (c_int, P, U, P),
    "nvmlDeviceGetGpuInstanceProfileInfo": (c_int, P, U, P),
    "nvmlDeviceGetGpuInstanceProfileInfoV": (c_int, P, U, P),
    "nvmlDeviceGetGpuInstancePossiblePlacements_v2": (c_int, P, U, P, P),
    "nvmlDeviceCreateGpuInstanceWithPlacement": (c_int, P, U, P, P),
    "nvmlDeviceGetGpuInstances": (c_int, P, U, P, P),
    "nvmlGpuInstanceGetInfo": (c_int, P, P),
    "nvmlGpuInstanceGetComputeInstanceProfileInfo": (c_int, P, U, U, P),
    "nvmlGpuInstanceGetComputeInstanceProfileInfoV": (c_int, P, U, U, P),
    "nvmlGpuInstanceCreateComputeInstance": (c_int, P, U, P),
    "nvmlGpuInstanceGetComputeInstances": (c_int, P, U, P, P),
    "nvmlComputeInstanceGetInfo_v2": (c_int, P, P),
    "nvmlComputeInstanceDestroy": (c_int, P),
    "nvmlGpuInstanceDestroy": (c_int, P),
    "nvmlDeviceGetMaxMigDeviceCount": (c_int, P, P),
    "nvmlDeviceGetMigDeviceHandleByIndex": (c_int, P, U, P),
    "nvmlDeviceGetGpuInstanceId": (c_int, P, P),
    "nvmlDeviceGetComputeInstanceId": (c_int, P, P),
    "nvmlDeviceGetComputeRunningProcesses_v3": (c_int, P, P, P),
}
