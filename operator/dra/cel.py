"""DRA device selectors: CEL expressions evaluated as the Kubernetes scheduler evaluates them.

DeviceClasses and ResourceClaim requests select devices with CEL over `device.driver`,
`device.attributes[domain][name]`, `device.capacity[domain][name]` and
`device.allowMultipleAllocations`. The evaluation is Kubernetes' own: `migplan-cel`, a small
Go helper built from `k8s.io/dynamic-resource-allocation/cel` (the package kube-scheduler
allocates with; source in `celeval/`), so optional types, quantities, semantic versions, the
estimated and runtime cost limits and the parser's recursion limit are the scheduler's.

It runs as one long-lived child process spoken to in JSON lines (`helper.py`). This module
holds what selectors see: devices, their quantities and versions, and the outcome of a match.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property, total_ordering
from typing import Any

from kubernetes.utils import parse_quantity

SEMVER = re.compile(
    r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$"
)


@total_ordering
@dataclass(frozen=True)
class Quantity:
    """A Kubernetes resource quantity (`10Gi`, `1500m`), compared by value."""

    value: Decimal

    @classmethod
    def parse(cls, text: str) -> Quantity:
        """`10Gi` -> Quantity(10737418240); raises ValueError otherwise."""
        try:
            return cls(Decimal(parse_quantity(text)))
        except ValueError as exc:
            raise ValueError(f"{text!r} is not a quantity such as 10Gi: {exc}") from None

    def text(self) -> str:
        """The quantity as the API writes a plain number (`10737418240`, `0.5`)."""
        return format(self.value.normalize(), "f")

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.value < other.value


@dataclass(frozen=True)
class SemVer:
    """A semantic version (`550.54.15`, `1.0.0-rc.10`) as published: parsed and printed only.
    Selectors compare versions in the CEL helper, with Kubernetes' own semver library; an
    ordering here would be a second, unchecked one."""

    major: int
    minor: int
    patch: int
    pre: str = ""

    @classmethod
    def parse(cls, text: str) -> SemVer:
        """`550.54.15` -> SemVer(550, 54, 15); raises ValueError otherwise."""
        match = SEMVER.match(text)
        if match is None:
            raise ValueError(f"{text!r} is not a semantic version such as 1.2.3")
        major, minor, patch, pre = match.groups()
        return cls(int(major), int(minor), int(patch), pre or "")

    def text(self) -> str:
        """`550.54.15`, or `1.2.3-rc.1` for a pre-release."""
        return f"{self.major}.{self.minor}.{self.patch}" + (f"-{self.pre}" if self.pre else "")


@dataclass(frozen=True)
class Device:
    """A device as selectors see it: qualified attribute and capacity names per domain."""

    driver: str
    attributes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """domain -> name -> str, int, bool or SemVer."""
    capacity: Mapping[str, Mapping[str, Quantity]] = field(default_factory=dict)
    allow_multiple_allocations: bool = False

    @cached_property
    def digest(self) -> bytes:
        """sha256 of `published()`: the device's identity in a results cache."""
        return hashlib.sha256(json.dumps(self.published(), sort_keys=True).encode()).digest()

    def published(self) -> dict[str, Any]:
        """The device as a ResourceSlice publishes it (qualified names, typed values)."""
        return {
            "driver": self.driver,
            "allowMultipleAllocations": self.allow_multiple_allocations,
            "attributes": {
                f"{domain}/{name}": _attribute(value)
                for domain, names in sorted(self.attributes.items())
                for name, value in sorted(names.items())
                if value is not None
            },
            "capacity": {
                f"{domain}/{name}": {"value": value.text()}
                for domain, names in sorted(self.capacity.items())
                for name, value in sorted(names.items())
            },
        }


def _attribute(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, SemVer):
        return {"version": value.text()}
    return {"string": str(value)}


@dataclass(frozen=True)
class Outcome:
    """Whether a request's selectors select a device, and the run-time error if one failed."""

    selected: bool
    error: str | None = None
