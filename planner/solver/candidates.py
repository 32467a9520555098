"""Candidate target layouts of a GPU class, with what each costs and supplies.

Candidates use only profiles that matter (demanded, or in use where evictions may need
rehosting) plus the instances the GPU already has; an instance of an unwanted profile would
only cost operations and free capacity. Candidates with the same signature are
interchangeable, so one of each is kept.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass
from functools import lru_cache

from migplan.planner.catalog import GpuModel
from migplan.planner.diff import added_instances, removed_instances
from migplan.planner.enumeration import enumerate_layouts
from migplan.planner.layout import Layout
from migplan.planner.solver.classes import GpuClass
from migplan.planner.spec import Disruption, PolicySpec


@dataclass(frozen=True)
class Candidate:
    """A target layout for GPUs of one class."""

    layout: Layout
    changed: bool
    evictions: int
    """Pods evicted per GPU taking this layout."""
    evicted: tuple[tuple[str, int], ...]
    """In-use instances removed, per profile."""
    counts: tuple[tuple[str, int], ...]
    """Instances per profile in the layout."""
    headroom: int
    """Compute slices of the largest profile that still fits in the free slices."""
    operations: int

    def count(self, profile: str) -> int:
        """Instances of `profile` in the layout."""
        return dict(self.counts).get(profile, 0)


@lru_cache(maxsize=65536)
def headroom(model: GpuModel, layout: Layout) -> int:
    """Compute slices of the largest profile whose placement fits in the unoccupied slices."""
    occupied = 0
    for instance in layout.instances:
        size = model.profile(instance.profile).size
        occupied |= ((1 << size) - 1) << instance.start
    best = 0
    for profile in model.profiles:
        if profile.compute_slices <= best:
            continue
        mask = (1 << profile.size) - 1
        if any(not (occupied & (mask << s)) for s in profile.starts):
            best = profile.compute_slices
    return best


def allowed_new_profiles(model: GpuModel, policy: PolicySpec) -> frozenset[str]:
    """Profiles new instances may use on `model` under `policy`."""
    allowed = policy.allowed_profiles.get(model.model)
    names = {p.name for p in model.profiles}
    return frozenset(names if allowed is None else names & set(allowed))


def candidates_for(
    cls: GpuClass, *, relevant: Collection[str], policy: PolicySpec
) -> list[Candidate]:
    """Target layouts GPUs of `cls` may take; the current layout is always the first."""
    model = cls.model
    rebuild = policy.whole_gpu_rebuild
    new = allowed_new_profiles(model, policy) & set(relevant)
    current = set(cls.current.instances)
    names = new | {i.profile for i in current}
    may_evict = policy.disruption is Disruption.EVICT
    found: dict[tuple[object, ...], Candidate] = {}
    ordered = [cls.current, *enumerate_layouts(model, profiles=names)] if names else [cls.current]
    for layout in ordered:
        if any(i not in current and i.profile not in new for i in layout.instances):
            continue
        changed = layout != cls.current or (not cls.mig_enabled and bool(layout))
        if changed and cls.whole_gpu_used and not may_evict:
            continue
        removed = set(removed_instances(cls.current, layout, rebuild=rebuild))
        lost = [i for i in cls.pins if i in removed]
        if lost and not may_evict:
            continue
        evicted = Counter(i.profile for i in lost)
        created = added_instances(cls.current, layout, rebuild=rebuild)
        candidate = Candidate(
            layout=layout,
            changed=changed,
            evictions=len(lost) + (1 if changed and cls.whole_gpu_used else 0),
            evicted=tuple(sorted(evicted.items())),
            counts=tuple(sorted(Counter(i.profile for i in layout.instances).items())),
            headroom=headroom(model, layout),
            operations=2 * (len(removed) + len(created)) + (0 if cls.mig_enabled else 1),
        )
        signature = (
            candidate.changed,
            candidate.evictions,
            candidate.evicted,
            tuple((p, n) for p, n in candidate.counts if p in relevant),
            candidate.headroom,
            candidate.operations,
        )
        found.setdefault(signature, candidate)
    return list(found.values())
