"""Kubernetes quantities as device counts, parsed by the Kubernetes client's own rules."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from kubernetes.utils import parse_quantity

from migplan.planner.hardware.resources import is_mig_resource


def device_count(value: object) -> int | None:
    """A count of devices from a quantity as Kubernetes writes it (`2`, `2e0`, `1k`); None
    for what is not a quantity or not a whole number (devices do not come in fractions)."""
    try:
        quantity = parse_quantity(value)
    except (ValueError, TypeError):
        return None
    if quantity < 0 or quantity != quantity.to_integral_value():
        return None
    return int(quantity)


def mig_counts(resources: Mapping[str, object]) -> Counter[str]:
    """The MIG resources of a node's allocatable (or capacity) with a count above zero."""
    return Counter(
        {k: n for k, v in resources.items() if is_mig_resource(k) and (n := device_count(v))}
    )


def extended_requests(pod: Any) -> dict[str, int]:
    """Extended resources (names with a domain) the pod's containers ask for, summed."""
    wanted: dict[str, int] = {}
    for container in pod.spec.containers or []:
        resources = container.resources
        limits = {
            **((resources and resources.requests) or {}),
            **((resources and resources.limits) or {}),
        }
        for key, value in limits.items():
            count = device_count(value)
            if "/" in key and count is not None:
                wanted[key] = wanted.get(key, 0) + count
    return wanted
