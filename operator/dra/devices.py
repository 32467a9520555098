"""MIG devices as NVIDIA's DRA driver publishes them in ResourceSlices (resource.k8s.io/v1).

The driver (`gpu.nvidia.com`) publishes per node one pool of devices:
- a full GPU `gpu-<minor>` (attributes `type: gpu`, `uuid`, `productName`, versions, ...);
- a static MIG device, one per existing instance: `gpu-<minor>-mig-<profile id>-<start>-<size>`
  (`type: mig`, `uuid`, `parentUUID`, `profile`; capacity `memory`, `memorySlice<i>` ...);
- with DynamicMIG, one device per possible slot instead: `gpu-<minor>-mig-<profile without
  dots>-<profile id>-<start>`, consuming the GPU's shared counters; a slot exists as an
  instance only while a claim holds it.

Attribute names without a domain belong to the driver's domain, as in Kubernetes' CEL
environment. Everything here works on the API's plain dictionaries.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from migplan.operator.dra.cel import Device, Quantity, SemVer
from migplan.planner.layout import Instance

DRIVER = "gpu.nvidia.com"
STATIC_MIG = re.compile(r"^gpu-(\d+)-mig-(\d+)-(\d+)-(\d+)$")
"""minor, profile id, start, size."""
SLOT_MIG = re.compile(r"^gpu-(\d+)-mig-([a-z0-9-]+)-(\d+)-(\d+)$")
"""minor, profile name without dots, profile id, start."""
FULL_GPU = re.compile(r"^gpu-(\d+)$")


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


def _classify(raw: Mapping[str, Any], device: Device) -> Facts:
    """What an NVIDIA device is, from its name and attributes."""
    name = str(raw.get("name", ""))
    attrs = device.attributes.get(device.driver, {})
    kind, uuid, profile = attrs.get("type"), attrs.get("uuid"), attrs.get("profile")
    if (match := STATIC_MIG.match(name)) and kind == "mig" and profile:
        minor, _, start, _ = map(int, match.groups())
        return (DeviceKind.MIG, minor, uuid, Instance.parse(f"{profile}@{start}"))
    if (match := SLOT_MIG.match(name)) and kind == "mig" and profile:
        instance = Instance.parse(f"{profile}@{int(match.group(4))}")
        return (DeviceKind.SLOT, int(match.group(1)), None, instance)
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
