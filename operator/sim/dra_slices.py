"""ResourceSlices as NVIDIA's DRA kubelet plugin (`gpu.nvidia.com`) publishes them, for the
simulated fleet and the tests.

The current format is the driver's since v25.12.0 (kubernetes-sigs/dra-driver-nvidia-gpu,
`cmd/gpu-kubelet-plugin`: `deviceinfo.go`, `mig.go`, `partitions.go`, `driver.go`, `nvlib.go`):

- MIG devices, static or DynamicMIG, are named `gpu-<minor>-mig-<profile>-<profile id>-<start>`,
  the profile without dots and made RFC 1123 (`1g.10gb+me` -> `1g10gb-me`). A static device
  (an instance that exists) has a `uuid` attribute; a DynamicMIG slot has none.
- Attributes: `type` (`gpu` or `mig`), `uuid`, `parentUUID`, `profile`, `productName`,
  `brand`, `architecture`, `cudaComputeCapability`, `driverVersion`, `cudaDriverVersion`, and
  the standard `resource.kubernetes.io/pciBusID`; no `index` or `minor` any more.
- Capacities of a MIG device: `multiprocessors`, `copyEngines`, `decoders`, `encoders`,
  `jpegEngines`, `ofaEngines` and `memory` (bytes) from NVML's profile info; a static device
  adds `memorySlice<i>` for the slices it covers. A full GPU has its `memory`.
- Static mode: one slice per node with every device: a full GPU for each GPU with MIG off, a
  MIG device for each instance of a GPU with MIG on.
- DynamicMIG (Kubernetes >= 1.35): a slice of shared counters, one counter set per GPU
  (`gpu-<minor>-counter-set`: each capacity as a counter, `copy-engines` style, at the largest
  profile's value, and `memory-slice-<i>`), then one slice of devices per GPU: the full GPU,
  consuming every counter, and a slot per profile and placement, consuming its capacities and
  the memory slices it covers. On Ampere, MIG mode cannot change without a reset: a GPU with
  MIG on publishes its slots only, one with MIG off its full GPU only (as in static mode).

The legacy format is the driver's before v25.12.0 (NVIDIA/k8s-dra-driver-gpu v25.8): static MIG
devices named `gpu-<minor>-mig-<profile id>-<start>-<size>`, `index` and `minor` attributes,
`memory` and `memorySlice<i>` capacities only, and everything in one slice per node (DynamicMIG
with its counters in a second one, slots with memory-slice capacities, full GPU and slots on
every architecture).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from migplan.operator.dra.devices import CAPACITIES, capacities, profile_memory, rfc1123
from migplan.planner.hardware.catalog import GpuModel, Profile
from migplan.planner.hardware.layout import Instance

DRIVER = "gpu.nvidia.com"
DRIVER_VERSION = "580.95.5"
CUDA_DRIVER_VERSION = "13.0.0"
COMPUTE_CAPABILITY = {"ampere": "8.0.0", "hopper": "9.0.0", "blackwell": "10.0.0"}
PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
MIB = 2**20


class Format(StrEnum):
    """Which release of NVIDIA's DRA driver the slices look like."""

    CURRENT = "current"
    LEGACY = "legacy"


@dataclass(frozen=True)
class PublishedGpu:
    """One GPU of a node, as the plugin sees it through NVML."""

    minor: int
    uuid: str
    model: GpuModel
    mig_enabled: bool = True
    instances: Sequence[tuple[Instance, str]] = field(default_factory=tuple)
    """Existing instances and their MIG device UUIDs (static mode)."""

    @property
    def pci_bus_id(self) -> str:
        return f"0000:{0x10 + self.minor:02x}:00.0"

    @property
    def resets_to_change_mig(self) -> bool:
        """Ampere: MIG mode changes only with a GPU reset (the driver will not toggle it)."""
        return self.model.mig_mode_change_needs_reset

    @property
    def whole_only(self) -> bool:
        """Ampere with MIG off: the current driver publishes the full GPU only, no slots."""
        return self.resets_to_change_mig and not self.mig_enabled


def counter_name(capacity: str) -> str:
    """The driver's `camelToDNSName`: `copyEngines` -> `copy-engines`."""
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1-\2", capacity)
    return rfc1123(re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1-\2", name))


def mig_name(minor: int, profile: Profile, start: int) -> str:
    """`gpu-0-mig-1g10gb-me-20-3`: a MIG device or slot in the current format."""
    return f"gpu-{minor}-mig-{rfc1123(profile.name.replace('.', ''))}-{profile.id}-{start}"


def legacy_mig_name(minor: int, profile: Profile, start: int) -> str:
    """`gpu-0-mig-20-3-1`: a static MIG device before v25.12.0."""
    return f"gpu-{minor}-mig-{profile.id}-{start}-{profile.size}"


def _common(gpu: PublishedGpu, legacy: bool) -> dict[str, Any]:
    found: dict[str, Any] = {
        "productName": {"string": gpu.model.products[0].nvml},
        "brand": {"string": "Nvidia"},
        "architecture": {"string": gpu.model.architecture.capitalize()},
        "cudaComputeCapability": {"version": COMPUTE_CAPABILITY[gpu.model.architecture]},
        "driverVersion": {"version": DRIVER_VERSION},
        "cudaDriverVersion": {"version": CUDA_DRIVER_VERSION},
    }
    if not legacy:
        found[PCI_BUS_ID] = {"string": gpu.pci_bus_id}
    return found


def _gpu_memory(gpu: PublishedGpu) -> int:
    if gpu.model.memory is not None:
        return gpu.model.memory.mib * MIB
    return max(profile_memory(p) for p in gpu.model.profiles)


def _largest(gpu: PublishedGpu) -> dict[str, int]:
    """Per capacity, the largest value of any profile (what the full GPU stands for)."""
    return {name: max(capacities(p)[name] for p in gpu.model.profiles) for name in CAPACITIES}


def _values(numbers: dict[str, int]) -> dict[str, Any]:
    return {k: {"value": str(v)} for k, v in numbers.items()}


def _counters(numbers: dict[str, int], start: int, size: int) -> dict[str, Any]:
    counters = {counter_name(k): {"value": str(v)} for k, v in numbers.items()}
    counters.update({f"memory-slice-{i}": {"value": "1"} for i in range(start, start + size)})
    return counters


def counter_set_name(gpu: PublishedGpu) -> str:
    return f"gpu-{gpu.minor}-counter-set"


def _full_gpu(gpu: PublishedGpu, *, form: Format, dynamic: bool) -> dict[str, Any]:
    legacy = form is Format.LEGACY
    attributes = {"type": {"string": "gpu"}, "uuid": {"string": gpu.uuid}, **_common(gpu, legacy)}
    if legacy:
        attributes |= {"index": {"int": gpu.minor}, "minor": {"int": gpu.minor}}
    device: dict[str, Any] = {"name": f"gpu-{gpu.minor}", "attributes": attributes}
    slices = gpu.model.memory_slices
    if dynamic and not legacy:
        device["capacity"] = _values(_largest(gpu))
        device["consumesCounters"] = [
            {"counterSet": counter_set_name(gpu), "counters": _counters(_largest(gpu), 0, slices)}
        ]
        return device
    device["capacity"] = {"memory": {"value": str(_gpu_memory(gpu))}}
    if dynamic:
        device["consumesCounters"] = [
            {"counterSet": counter_set_name(gpu), "counters": _counters({}, 0, slices)}
        ]
    return device


def _mig(gpu: PublishedGpu, profile: Profile, start: int, *, form: Format) -> dict[str, Any]:
    legacy = form is Format.LEGACY
    capacity = (
        {"memory": {"value": str(profile_memory(profile))}}
        if legacy
        else _values(capacities(profile))
    )
    return {
        "name": mig_name(gpu.minor, profile, start),
        "attributes": {
            "type": {"string": "mig"},
            "parentUUID": {"string": gpu.uuid},
            "profile": {"string": profile.name},
            **_common(gpu, legacy),
        },
        "capacity": capacity,
    }


def _memory_slices(start: int, size: int) -> dict[str, Any]:
    return {f"memorySlice{i}": {"value": "1"} for i in range(start, start + size)}


def static_devices(gpu: PublishedGpu, *, form: Format = Format.CURRENT) -> list[dict[str, Any]]:
    """A GPU's devices without DynamicMIG: the full GPU with MIG off, else one MIG device per
    existing instance (with its uuid and the memory slices it covers)."""
    if not gpu.mig_enabled:
        return [_full_gpu(gpu, form=form, dynamic=False)]
    found = []
    for instance, uuid in gpu.instances:
        profile = gpu.model.profiles_by_name[instance.profile]
        device = _mig(gpu, profile, instance.start, form=form)
        if form is Format.LEGACY:
            device["name"] = legacy_mig_name(gpu.minor, profile, instance.start)
        device["attributes"]["uuid"] = {"string": uuid}
        device["capacity"].update(_memory_slices(instance.start, profile.size))
        found.append(device)
    return found


def dynamic_devices(gpu: PublishedGpu, *, form: Format = Format.CURRENT) -> list[dict[str, Any]]:
    """A GPU's devices with DynamicMIG: the full GPU and a slot per profile and placement,
    each consuming from the GPU's counter set (current format: Ampere publishes one or the
    other by MIG mode)."""
    legacy = form is Format.LEGACY
    if not legacy and gpu.whole_only:
        return [_full_gpu(gpu, form=form, dynamic=False)]
    found = []
    if legacy or not (gpu.resets_to_change_mig and gpu.mig_enabled):
        found.append(_full_gpu(gpu, form=form, dynamic=True))
    for profile in gpu.model.profiles:
        for start in profile.starts:
            device = _mig(gpu, profile, start, form=form)
            numbers = {} if legacy else capacities(profile)
            if legacy:
                device["capacity"].update(_memory_slices(start, profile.size))
            device["consumesCounters"] = [
                {
                    "counterSet": counter_set_name(gpu),
                    "counters": _counters(numbers, start, profile.size),
                }
            ]
            found.append(device)
    return sorted(found, key=lambda d: d["name"]) if not legacy else found


def counter_sets(gpus: Sequence[PublishedGpu], *, form: Format = Format.CURRENT) -> list[Any]:
    """One counter set per GPU that has slots (DynamicMIG)."""
    found = []
    for gpu in gpus:
        if form is Format.CURRENT and gpu.whole_only:
            continue  # no slots: the GPU is published as in static mode
        numbers = {} if form is Format.LEGACY else _largest(gpu)
        counters = _counters(numbers, 0, gpu.model.memory_slices)
        found.append({"name": counter_set_name(gpu), "counters": counters})
    return found


def devices(
    gpus: Sequence[PublishedGpu], *, mode: str, form: Format = Format.CURRENT
) -> list[dict[str, Any]]:
    """Every device a node with `gpus` publishes in `mode` (static or dynamic)."""
    publish = dynamic_devices if mode == "dynamic" else static_devices
    return [d for gpu in gpus for d in publish(gpu, form=form)]


def _slice(node: str, suffix: str, pool: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}{suffix}"},
        "spec": {"driver": DRIVER, "nodeName": node, "pool": pool, **spec},
    }


def resource_slices(
    node: str,
    gpus: Sequence[PublishedGpu],
    *,
    mode: str,
    generation: int = 1,
    form: Format = Format.CURRENT,
) -> list[dict[str, Any]]:
    """The ResourceSlices of `node` in one pool: static mode puts every device in one slice;
    DynamicMIG puts the counter sets in a slice of their own and, in the current format, each
    GPU's devices in a slice per GPU (the legacy format: all devices in one slice)."""
    if mode != "dynamic":
        pool = {"name": node, "generation": generation, "resourceSliceCount": 1}
        return [_slice(node, "", pool, devices=devices(gpus, mode=mode, form=form))]
    per_gpu = (
        [(f"-gpu-{g.minor}", dynamic_devices(g, form=form)) for g in gpus]
        if form is Format.CURRENT
        else [("", devices(gpus, mode=mode, form=form))]
    )
    pool = {"name": node, "generation": generation, "resourceSliceCount": len(per_gpu) + 1}
    found = [_slice(node, "-counters", dict(pool), sharedCounters=counter_sets(gpus, form=form))]
    found += [_slice(node, suffix, dict(pool), devices=listed) for suffix, listed in per_gpu]
    return found
