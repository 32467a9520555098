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
    alternatives: tuple[str, ...] = ()
    """Other profiles that serve this item as well (either/or demand, such as a DRA claim
    whose selectors several profiles satisfy); empty for a plain profile count."""

    @property
    def resource(self) -> str:
        """The Kubernetes resource name of the (first) profile."""
        return resource_name(self.profile)

    @property
    def profiles(self) -> tuple[str, ...]:
        """Every profile that serves this item, the first one first."""
        return (self.profile, *self.alternatives)


def compute_slices(profile: str) -> int:
    """`3g.40gb` -> 3."""
    return int(profile.split("g.", 1)[0])


def profile_order(profile: str) -> tuple[int, int, str]:
    """Smallest first: compute slices, then memory, then name (`1g.10gb` before `1g.20gb`)."""
    compute, _, rest = profile.partition("g.")
    memory = rest.partition("gb")[0]
    return (int(compute), int(memory) if memory.isdigit() else 0, profile)


def demand_weight(item: DemandItem) -> int:
    """Priority times compute slices: capacity delivered, weighted by how much it matters.

    An either/or item is worth the same whichever profile serves it, counted at its smallest
    profile, so the solver never prefers a larger instance for the weight alone.
    """
    return item.priority * min(compute_slices(p) for p in item.profiles)


def pending_demand(spec: DemandSpec, inventory: Inventory) -> list[DemandItem]:
    """FREE items from the inventory's pending pods that the spec's namespace selector admits.

    Each pod counts with its full request of every MIG resource, and every device its
    ResourceClaims ask for: one item per set of profiles that could serve (either/or).
    """
    wanted = spec.from_pending_pods
    if wanted is None:
        return []
    counts: Counter[tuple[str, ...]] = Counter()
    pods: dict[tuple[str, ...], list[str]] = {}
    for pod in inventory.pending_pods:
        labels = inventory.namespaces.get(pod.namespace, {})
        labels = {"kubernetes.io/metadata.name": pod.namespace, **labels}
        if not wanted.namespace_selector.matches(labels):
            continue
        name = f"{pod.namespace}/{pod.name}"
        key: tuple[str, ...]
        for resource, quantity in sorted(pod.requests.items()):
            if is_mig_resource(resource) and quantity > 0:
                key = (profile_of(resource),)
                counts[key] += quantity
                pods.setdefault(key, []).append(name)
        for claim in pod.claims:
            if claim.profiles and claim.count > 0:
                key = tuple(sorted(set(claim.profiles), key=profile_order))
                counts[key] += claim.count
                pods.setdefault(key, []).append(name)
    return [
        DemandItem(
            key[0],
            counts[key],
            wanted.priority,
            DemandKind.FREE,
            tuple(dict.fromkeys(pods[key])),
            alternatives=key[1:],
        )
        for key in sorted(counts)
    ]


def build_demand(spec: DemandSpec, inventory: Inventory) -> list[DemandItem]:
    """All demand items of a plan: explicit totals first, then pending pods."""
    explicit = [
        DemandItem(
            profile_of(p.resource),
            p.count,
            p.priority,
            DemandKind.TOTAL,
            alternatives=tuple(profile_of(r) for r in p.alternatives),
        )
        for p in spec.profiles
    ]
    return explicit + pending_demand(spec, inventory)
