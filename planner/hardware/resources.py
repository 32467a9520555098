"""Kubernetes extended-resource names of MIG profiles (device plugin, mixed strategy).

The NVIDIA device plugin advertises profile `1g.10gb` as `nvidia.com/mig-1g.10gb` and turns
`+` into `.`: `1g.10gb+me` is `nvidia.com/mig-1g.10gb.me`.
"""

from __future__ import annotations

import re

from migplan.planner.errors import MigplanInputError
from migplan.planner.hardware.catalog import PROFILE_NAME

PREFIX = "nvidia.com/mig-"
RESOURCE_NAME = re.compile(r"^nvidia\.com/mig-[1-9][0-9]*g\.[0-9]+gb(\.me\.all|\.me|\.gfx|-me)?$")
"""A MIG extended-resource name such as `nvidia.com/mig-1g.10gb` or `nvidia.com/mig-1g.5gb.me`."""


def resource_name(profile: str) -> str:
    """`1g.10gb+me` -> `nvidia.com/mig-1g.10gb.me`."""
    return PREFIX + profile.replace("+", ".")


def profile_of(resource: str) -> str:
    """`nvidia.com/mig-1g.10gb.me` -> `1g.10gb+me`; raises for anything else."""
    if not RESOURCE_NAME.match(resource):
        raise MigplanInputError(
            f"{resource!r} is not a MIG resource name (such as nvidia.com/mig-1g.10gb or "
            "nvidia.com/mig-1g.5gb.me)"
        )
    name = resource.removeprefix(PREFIX)
    compute_mem, _, rest = name.partition("gb")
    profile = compute_mem + "gb" + ("+" + rest[1:] if rest.startswith(".") else rest)
    assert PROFILE_NAME.match(profile), profile
    return profile


def is_mig_resource(resource: str) -> bool:
    """Whether `resource` names a MIG profile."""
    return bool(RESOURCE_NAME.match(resource))


def part_text(profiles: tuple[str, ...], count: int) -> str:
    """`2 x 1g.10gb`, `1 x (1g.10gb or 2g.20gb)`: instances of any of `profiles`."""
    names = profiles[0] if len(profiles) == 1 else f"({' or '.join(profiles)})"
    return f"{count} x {names}"
