"""MIG devices as NVIDIA's DRA driver publishes them in ResourceSlices (resource.k8s.io/v1).

The driver (`gpu.nvidia.com`) publishes per node one pool of devices (operator/sim/dra_slices.py
has both formats in full):
- a full GPU `gpu-<minor>` (attributes `type: gpu`, `uuid`, `productName`, versions, ...);
- a static MIG device, one per existing instance, with a `uuid` attribute: since v25.12.0
  `gpu-<minor>-mig-<profile, dots removed, RFC 1123>-<profile id>-<start>`, before that
  `gpu-<minor>-mig-<profile id>-<start>-<size>`;
- with DynamicMIG, one device per possible slot instead, named like a current static device
  but without `uuid`, consuming the GPU's shared counters; a slot exists as an instance only
  while a claim holds it.

A static device and a slot are told apart by the `uuid` attribute, never by the name, and a
device's placement is read from the memory slices it covers (`memorySlice<i>` capacities of a
static device, `memory-slice-<i>` counters of a slot) before the name. Attribute names without
a domain belong to the driver's domain, as in Kubernetes' CEL environment. Everything here
works on the API's plain dictionaries.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from migplan.operator.dra.cel import Device, Quantity, SemVer
from migplan.planner.hardware.catalog import Profile
from migplan.planner.hardware.layout import Instance

DRIVER = "gpu.nvidia.com"
MIG_NAME = re.compile(r"^gpu-(\d+)-mig-(.+)-(\d+)-(\d+)$")
"""minor, profile (dots removed, RFC 1123), profile id, start: since v25.12.0."""
LEGACY_MIG_NAME = re.compile(r"^gpu-(\d+)-mig-(\d+)-(\d+)-(\d+)$")
"""minor, profile id, start, size: static devices before v25.12.0."""
FULL_GPU = re.compile(r"^gpu-(\d+)$")
MEMORY_SLICE_CAPACITY = re.compile(r"^memorySlice(\d+)$")
MEMORY_SLICE_COUNTER = re.compile(r"^memory-slice-(\d+)$")


class DeviceKind(StrEnum):
    """What a published device is."""

    GPU = "gpu"
    MIG = "mig"
    """An existing MIG instance (static)."""
    SLOT = "slot"
    """A place where DynamicMIG may create an instance."""
    OTHER = "other"


@dataclass(frozen=True)
class SliceDevice:
    """One device of a ResourceSlice, with what migplan reads from it."""

    node: str
    pool: str
    name: str
    kind: DeviceKind
    device: Device
    minor: int | None = None
    uuid: str | None = None
    parent_uuid: str | None = None
    instance: Instance | None = None
    """profile@start of a MIG device or slot."""

    @property
    def key(self) -> tuple[str, str, str]:
        """(driver, pool, device): how an allocation names it."""
        return (self.device.driver, self.pool, self.name)

    def attribute(self, name: str) -> Any:
        """An attribute of the driver's domain, or None."""
        return self.device.attributes.get(self.device.driver, {}).get(name)


def _attribute_value(value: Mapping[str, Any]) -> Any:
    for kind in ("string", "int", "bool"):
        if kind in value:
            return value[kind]
    if "version" in value:
        try:
            return SemVer.parse(str(value["version"]))
        except ValueError:
            return str(value["version"])
    return None


def _qualified(name: str, driver: str) -> tuple[str, str]:
    domain, _, short = name.rpartition("/")
    return (domain or driver, short)


def cel_device(raw: Mapping[str, Any], *, driver: str) -> Device:
    """A published device as CEL selectors see it."""
    attributes: dict[str, dict[str, Any]] = {}
    for name, value in (raw.get("attributes") or {}).items():
        domain, short = _qualified(name, driver)
        attributes.setdefault(domain, {})[short] = _attribute_value(value or {})
    capacity: dict[str, dict[str, Quantity]] = {}
    for name, value in (raw.get("capacity") or {}).items():
        domain, short = _qualified(name, driver)
        try:
            capacity.setdefault(domain, {})[short] = Quantity.parse(str((value or {})["value"]))
        except (KeyError, ValueError):
            continue
    return Device(
        driver=driver,
        attributes=attributes,
        capacity=capacity,
        allow_multiple_allocations=bool(raw.get("allowMultipleAllocations")),
    )


Facts = tuple[DeviceKind, int | None, str | None, Instance | None]
"""kind, GPU minor, uuid, instance."""


CAPACITIES = (
    "multiprocessors",
    "copyEngines",
    "decoders",
    "encoders",
    "jpegEngines",
    "ofaEngines",
    "memory",
)
"""A MIG device's capacities in the current format (the driver's CommonCapacitiesMig)."""
MIB = 2**20


def profile_memory(profile: Profile) -> int:
    """A profile's memory in bytes (from its name where profiles/ has no MiB figure)."""
    if profile.memory_mib:
        return profile.memory_mib * MIB
    return int(profile.name.split("g.")[1].split("gb")[0]) * 1024 * MIB


def capacities(profile: Profile) -> dict[str, int]:
    """What NVML's profile info says of a MIG device, as the driver publishes it."""
    engines = profile.engines
    return {
        "multiprocessors": profile.multiprocessors or 0,
        "copyEngines": engines.copy_engines if engines else 0,
        "decoders": engines.decoder if engines else 0,
        "encoders": engines.encoder if engines else 0,
        "jpegEngines": engines.jpeg if engines else 0,
        "ofaEngines": engines.ofa if engines else 0,
        "memory": profile_memory(profile),
    }


def rfc1123(name: str) -> str:
    """The driver's `toRFC1123Compliant`: lower case, other characters as dashes."""
    name = re.sub(r"[^a-z0-9-.]", "-", name.lower()).strip("-")
    return name.removesuffix(".")


def _covered_slices(raw: Mapping[str, Any]) -> list[int]:
    """The memory slices a device covers, from its capacities or the counters it consumes."""
    found = [
        int(m.group(1))
        for name in raw.get("capacity") or {}
        if (m := MEMORY_SLICE_CAPACITY.match(name))
    ]
    for consumption in raw.get("consumesCounters") or []:
        found += [
            int(m.group(1))
            for name in consumption.get("counters") or {}
            if (m := MEMORY_SLICE_COUNTER.match(name))
        ]
    return sorted(set(found))


def _start(raw: Mapping[str, Any], name: str, profile: str) -> int | None:
    """Where a MIG device starts: the first memory slice it covers, else what its name says."""
    covered = _covered_slices(raw)
    if covered:
        return covered[0]
    if (match := MIG_NAME.match(name)) and match.group(2) == rfc1123(profile.replace(".", "")):
        return int(match.group(4))
    if match := LEGACY_MIG_NAME.match(name):
        return int(match.group(3))
    return None


def _classify(raw: Mapping[str, Any], device: Device) -> Facts:
    """What an NVIDIA device is, from its attributes, the memory slices it covers and name."""
    name = str(raw.get("name", ""))
    attrs = device.attributes.get(device.driver, {})
    kind, uuid, profile = attrs.get("type"), attrs.get("uuid"), attrs.get("profile")
    minor = re.match(r"^gpu-(\d+)(?:-|$)", name)
    if kind == "mig" and isinstance(profile, str) and minor:
        start = _start(raw, name, profile)
        if start is None:
            return (DeviceKind.OTHER, None, None, None)
        instance = Instance.parse(f"{profile}@{start}")
        if uuid:
            return (DeviceKind.MIG, int(minor.group(1)), str(uuid), instance)
        return (DeviceKind.SLOT, int(minor.group(1)), None, instance)
    if (match := FULL_GPU.match(name)) and kind == "gpu":
        return (DeviceKind.GPU, int(match.group(1)), uuid, None)
    return (DeviceKind.OTHER, None, None, None)


def slice_devices(
    slices: Iterable[Mapping[str, Any]], *, driver: str = DRIVER
) -> list[SliceDevice]:
    """Every device `driver` publishes on a node, newest pool generation only."""
    newest: dict[str, int] = {}
    for s in slices:
        spec = s.get("spec") or {}
        if spec.get("driver") == driver and spec.get("nodeName"):
            pool = spec.get("pool") or {}
            name = str(pool.get("name", ""))
            newest[name] = max(newest.get(name, 0), int(pool.get("generation", 0)))
    found = []
    for s in slices:
        spec = s.get("spec") or {}
        pool = spec.get("pool") or {}
        if spec.get("driver") != driver or not spec.get("nodeName"):
            continue
        if int(pool.get("generation", 0)) != newest.get(str(pool.get("name", ""))):
            continue  # an older generation the driver is replacing
        for raw in spec.get("devices") or []:
            device = cel_device(raw, driver=driver)
            kind, minor, uuid, instance = _classify(raw, device)
            parent = device.attributes.get(driver, {}).get("parentUUID")
            found.append(
                SliceDevice(
                    node=str(spec["nodeName"]),
                    pool=str(pool.get("name", "")),
                    name=str(raw.get("name", "")),
                    kind=kind,
                    device=device,
                    minor=minor,
                    uuid=uuid,
                    parent_uuid=parent,
                    instance=instance,
                )
            )
    return found
