"""Demand: how many instances of which profile the plan should provide, and how much it matters.

Two kinds, kept apart because they count differently:
- explicit counts from the plan (`demand.profiles`) are totals: the selected GPUs should hold
  that many instances of the profile, in use or free, so re-planning later is stable;
- pending pods want free instances, on top of whatever is in use.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import StrEnum

from migplan.planner.inventory import Inventory
from migplan.planner.resources import is_mig_resource, profile_of, resource_name
from migplan.planner.spec import DemandSpec


class DemandKind(StrEnum):
    """How a demand item counts supply."""

    TOTAL = "total"
    """Instances of the profile on the covered GPUs, in use or free."""
    FREE = "free"
    """Free instances of the profile (for pending pods)."""


@dataclass(frozen=True, slots=True)
class DemandItem:
    """`count` instances of `profile`, weighted by `priority`."""

    profile: str
    count: int
    priority: int
    kind: DemandKind
    pods: tuple[str, ...] = ()
    """Pending pods behind a FREE item (namespace/name)."""

    @property
    def resource(self) -> str:
        """The Kubernetes resource name of the profile."""
        return resource_name(self.profile)


def pending_demand(spec: DemandSpec, inventory: Inventory) -> list[DemandItem]:
    """FREE items from the inventory's pending pods that the spec's namespace selector admits.

    Each pod counts with its full request of every MIG resource.
    """
    wanted = spec.from_pending_pods
    if wanted is None:
        return []
    counts: Counter[str] = Counter()
    pods: dict[str, list[str]] = {}
    for pod in inventory.pending_pods:
        labels = inventory.namespaces.get(pod.namespace, {})
        labels = {"kubernetes.io/metadata.name": pod.namespace, **labels}
        if not wanted.namespace_selector.matches(labels):
            continue
        for resource, quantity in sorted(pod.requests.items()):
            if is_mig_resource(resource) and quantity > 0:
                profile = profile_of(resource)
                counts[profile] += quantity
                pods.setdefault(profile, []).append(f"{pod.namespace}/{pod.name}")
    return [
        DemandItem(profile, counts[profile], wanted.priority, DemandKind.FREE, tuple(pods[profile]))
        for profile in sorted(counts)
    ]


def build_demand(spec: DemandSpec, inventory: Inventory) -> list[DemandItem]:
    """All demand items of a plan: explicit totals first, then pending pods."""
    explicit = [
        DemandItem(profile_of(p.resource), p.count, p.priority, DemandKind.TOTAL)
        for p in spec.profiles
    ]
    return explicit + pending_demand(spec, inventory)
