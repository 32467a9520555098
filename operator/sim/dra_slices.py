"""ResourceSlices as NVIDIA's DRA kubelet plugin (`gpu.nvidia.com`) publishes them, for the
simulated fleet and the tests (NVIDIA/k8s-dra-driver-gpu `cmd/gpu-kubelet-plugin`:
`deviceinfo.go` for static MIG devices, `mig.go` and `partitions.go` for DynamicMIG).

- `static`: one device per existing MIG instance, `gpu-<minor>-mig-<profile id>-<start>-<size>`,
  and a full-GPU device for each GPU with MIG off.
- `dynamic` (DynamicMIG): every GPU as `gpu-<minor>` with a counter set (its memory slices),
  and one device per profile and placement, `gpu-<minor>-mig-<profile, dots removed>-<profile
  id>-<start>`, consuming the slices it covers, so the scheduler never allocates two slots
  that overlap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from migplan.planner.catalog import GpuModel, Profile
from migplan.planner.layout import Instance

DRIVER = "gpu.nvidia.com"
DRIVER_VERSION = "570.86.15"
CUDA_DRIVER_VERSION = "12.8.0"
COMPUTE_CAPABILITY = {"ampere": "8.0.0", "hopper": "9.0.0", "blackwell": "10.0.0"}
MIB = 2**20


@dataclass(frozen=True)
class PublishedGpu:
    """One GPU of a node, as the plugin sees it through NVML."""

    minor: int
    uuid: str
    model: GpuModel
    mig_enabled: bool = True
    instances: Sequence[tuple[Instance, str]] = field(default_factory=tuple)
    """Existing instances and their MIG device UUIDs (static mode)."""


def _common(gpu: PublishedGpu) -> dict[str, Any]:
    product = gpu.model.products[0].nvml
    return {
        "productName": {"string": product},
        "brand": {"string": "Nvidia"},
        "architecture": {"string": gpu.model.architecture.capitalize()},
        "cudaComputeCapability": {"version": COMPUTE_CAPABILITY[gpu.model.architecture]},
        "driverVersion": {"version": DRIVER_VERSION},
        "cudaDriverVersion": {"version": CUDA_DRIVER_VERSION},
    }


def _memory(gpu: PublishedGpu, profile: Profile) -> str:
    if profile.memory_mib:
        return str(profile.memory_mib * MIB)
    return f"{int(profile.name.split('g.')[1].split('gb')[0])}Gi"


def _full_gpu(gpu: PublishedGpu, *, counters: bool) -> dict[str, Any]:
    full = max(gpu.model.profiles, key=lambda p: (p.compute_slices, p.size))
    device: dict[str, Any] = {
        "name": f"gpu-{gpu.minor}",
        "attributes": {
            "type": {"string": "gpu"},
            "uuid": {"string": gpu.uuid},
            "index": {"int": gpu.minor},
            "minor": {"int": gpu.minor},
            **_common(gpu),
        },
        "capacity": {"memory": {"value": _memory(gpu, full)}},
    }
    if counters:
        device["consumesCounters"] = [
            {"counterSet": _counter_set(gpu), "counters": _slices(0, gpu.model.memory_slices)}
        ]
    return device


def _counter_set(gpu: PublishedGpu) -> str:
    return f"gpu-{gpu.minor}-counter-set"


def _slices(start: int, size: int) -> dict[str, Any]:
    return {f"memory-slice-{i}": {"value": "1"} for i in range(start, start + size)}


def _mig(gpu: PublishedGpu, profile: Profile, start: int, *, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "attributes": {
            "type": {"string": "mig"},
            "parentUUID": {"string": gpu.uuid},
            "profile": {"string": profile.name},
            **_common(gpu),
        },
        "capacity": {
            "memory": {"value": _memory(gpu, profile)},
            **{f"memorySlice{i}": {"value": "1"} for i in range(start, start + profile.size)},
        },
    }


def slot_name(minor: int, profile: Profile, start: int) -> str:
    """`gpu-0-mig-1g10gb-19-3` (DynamicMIG's canonical name)."""
    compact = profile.name.replace(".", "").replace("+", "-")
    return f"gpu-{minor}-mig-{compact}-{profile.id}-{start}"


def devices(gpus: Sequence[PublishedGpu], *, mode: str) -> list[dict[str, Any]]:
    """The devices a node with `gpus` publishes in `mode` (static or dynamic)."""
    found = []
    for gpu in gpus:
        if mode == "dynamic":
            found.append(_full_gpu(gpu, counters=True))
            for profile in gpu.model.profiles:
                for start in profile.starts:
                    device = _mig(gpu, profile, start, name=slot_name(gpu.minor, profile, start))
                    device["consumesCounters"] = [
                        {"counterSet": _counter_set(gpu), "counters": _slices(start, profile.size)}
                    ]
                    found.append(device)
        elif not gpu.mig_enabled:
            found.append(_full_gpu(gpu, counters=False))
        else:
            for instance, uuid in gpu.instances:
                profile = gpu.model.profiles_by_name[instance.profile]
                name = f"gpu-{gpu.minor}-mig-{profile.id}-{instance.start}-{profile.size}"
                device = _mig(gpu, profile, instance.start, name=name)
                device["attributes"]["uuid"] = {"string": uuid}
                found.append(device)
    return found


def counter_sets(gpus: Sequence[PublishedGpu]) -> list[dict[str, Any]]:
    """One counter set per GPU: a counter per memory slice (DynamicMIG)."""
    return [
        {"name": _counter_set(gpu), "counters": _slices(0, gpu.model.memory_slices)} for gpu in gpus
    ]


def resource_slices(
    node: str, gpus: Sequence[PublishedGpu], *, mode: str, generation: int = 1
) -> list[dict[str, Any]]:
    """The ResourceSlices of `node`: its devices, and for DynamicMIG its counter sets in a
    slice of their own (the API keeps shared counters apart from the devices using them)."""
    pool = {"name": node, "generation": generation, "resourceSliceCount": 1}
    device_slice: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": pool,
            "devices": devices(gpus, mode=mode),
        },
    }
    if mode != "dynamic":
        return [device_slice]
    pool["resourceSliceCount"] = 2
    counters = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}-counters"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": dict(pool),
            "sharedCounters": counter_sets(gpus),
        },
    }
    return [device_slice, counters]
