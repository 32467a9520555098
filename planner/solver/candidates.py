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

import numpy as np

from migplan.planner.catalog import GpuModel
from migplan.planner.enumeration import enumerate_layouts
from migplan.planner.layout import Instance, Layout
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


@dataclass(frozen=True)
class _Entry:
    """A layout with what candidates_for needs, computed once per model and profile set."""

    layout: Layout
    instances: frozenset[Instance]
    counts: tuple[tuple[str, int], ...]
    headroom: int


@lru_cache(maxsize=1024)
def _table(model: GpuModel, names: frozenset[str]) -> tuple[_Entry, ...]:
    return tuple(
        _Entry(
            layout=layout,
            instances=frozenset(layout.instances),
            counts=tuple(sorted(Counter(i.profile for i in layout.instances).items())),
            headroom=headroom(model, layout),
        )
        for layout in enumerate_layouts(model, profiles=names)
    )


def candidates_for(
    cls: GpuClass, *, relevant: Collection[str], policy: PolicySpec
) -> list[Candidate]:
    """Target layouts GPUs of `cls` may take; the current layout is always the first."""
    model = cls.model
    rebuild = policy.whole_gpu_rebuild
    may_evict = policy.disruption is Disruption.EVICT
    new = allowed_new_profiles(model, policy) & set(relevant)
    current = frozenset(cls.current.instances)
    required = frozenset() if may_evict else cls.pins
    current_entry = _Entry(
        layout=cls.current,
        instances=current,
        counts=tuple(sorted(cls.current.profile_counts().items())),
        headroom=headroom(model, cls.current),
    )
    names = frozenset(new | {i.profile for i in current})
    entries = (current_entry, *_table(model, names)) if names else (current_entry,)
    found: dict[tuple[object, ...], Candidate] = {}
    for entry in entries:
        if not required <= entry.instances:
            continue
        extra = entry.instances - current
        if any(i.profile not in new for i in extra):
            continue
        changed = entry.instances != current or (not cls.mig_enabled and bool(extra))
        if changed and cls.whole_gpu_used and not may_evict:
            continue
        # diff.removed_instances / added_instances on frozensets (this loop is hot)
        removed = current if rebuild and changed else current - entry.instances
        created = entry.instances if rebuild and changed else extra
        lost = cls.pins & removed
        evicted = Counter(i.profile for i in lost)
        candidate = Candidate(
            layout=entry.layout,
            changed=changed,
            evictions=len(lost) + (1 if changed and cls.whole_gpu_used else 0),
            evicted=tuple(sorted(evicted.items())),
            counts=entry.counts,
            headroom=entry.headroom,
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
    return pareto(list(found.values()), sorted(relevant))


def pareto(candidates: list[Candidate], relevant: list[str]) -> list[Candidate]:
    """Drop candidates another one beats or matches on every criterion.

    Among candidates with the same change and eviction cost, one that supplies at least as
    many instances of every relevant profile, at least as much headroom and at most as many
    operations (and is better in one of them) can replace the other in any plan, so the
    optimum is unchanged. The current layout (first) is always kept.
    """
    groups: dict[tuple[bool, int], list[int]] = {}
    for n, cand in enumerate(candidates):
        groups.setdefault((cand.changed, cand.evictions), []).append(n)
    keep = {0}
    for members in groups.values():
        vectors = np.array(
            [
                [candidates[n].count(p) for p in relevant]
                + [candidates[n].headroom, -candidates[n].operations]
                for n in members
            ],
            dtype=np.int64,
        ).reshape(len(members), len(relevant) + 2)
        at_least = (vectors[:, None, :] >= vectors[None, :, :]).all(axis=-1)
        better = (vectors[:, None, :] > vectors[None, :, :]).any(axis=-1)
        dominated: np.ndarray = np.asarray((at_least & better).any(axis=0))
        keep.update(n for k, n in enumerate(members) if not dominated[k])
    return [c for n, c in enumerate(candidates) if n in keep]
