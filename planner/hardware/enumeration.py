"""Enumerate every valid layout of a GPU model, derived from its catalog placement facts.

A depth-first walk over the memory-slice axis: at each free slot either one instance starts
there or the slot stays empty, so each layout is produced exactly once. The rules of
`layout.check_layout` are applied incrementally; tests hold the two to the same answer.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from functools import lru_cache

from migplan.planner.hardware.catalog import GpuModel, MediaClass
from migplan.planner.hardware.layout import Instance, Layout


@dataclass(frozen=True, slots=True)
class _Candidate:
    profile_index: int
    instance: Instance
    mask: int
    compute: int
    claims_media: bool
    takes_all_media: bool
    no_media: bool


@dataclass(slots=True)
class _State:
    occupied: int
    counts: list[int]
    compute: int
    instances: int
    media_claims: int
    has_me_all: bool
    with_media: int  # instances that are not `-me`


def _candidates(model: GpuModel, profiles: tuple[str, ...]) -> list[_Candidate]:
    found = []
    for index, name in enumerate(profiles):
        p = model.profile(name)
        for start in p.starts:
            found.append(
                _Candidate(
                    profile_index=index,
                    instance=Instance(start=start, profile=name),
                    mask=((1 << p.size) - 1) << start,
                    compute=p.compute_slices,
                    claims_media=p.media in (MediaClass.ME, MediaClass.ME_ALL),
                    takes_all_media=p.media is MediaClass.ME_ALL,
                    no_media=p.media is MediaClass.NO_ME,
                )
            )
    return found


def _fits(model: GpuModel, limits: list[int], state: _State, c: _Candidate) -> bool:
    return not (
        state.occupied & c.mask
        or state.counts[c.profile_index] >= limits[c.profile_index]
        or state.compute + c.compute > model.compute_slices
        or state.instances >= model.max_instances
        or (c.claims_media and state.media_claims)
        or (state.has_me_all and not c.no_media)
        or (c.takes_all_media and state.with_media)
    )


def _push(state: _State, c: _Candidate) -> None:
    state.occupied |= c.mask
    state.counts[c.profile_index] += 1
    state.compute += c.compute
    state.instances += 1
    state.media_claims += c.claims_media
    state.has_me_all = state.has_me_all or c.takes_all_media
    state.with_media += not c.no_media


def _pop(state: _State, c: _Candidate, had_me_all: bool) -> None:
    state.occupied &= ~c.mask
    state.counts[c.profile_index] -= 1
    state.compute -= c.compute
    state.instances -= 1
    state.media_claims -= c.claims_media
    state.has_me_all = had_me_all
    state.with_media -= not c.no_media


@lru_cache(maxsize=256)
def _enumerate(model: GpuModel, profiles: tuple[str, ...], maximal: bool) -> tuple[Layout, ...]:
    candidates = _candidates(model, profiles)
    by_start: dict[int, list[_Candidate]] = {}
    for c in candidates:
        by_start.setdefault(c.instance.start, []).append(c)
    limits = [model.profile(name).max_count for name in profiles]
    state = _State(0, [0] * len(profiles), 0, 0, 0, False, 0)
    chosen: list[Instance] = []
    found: list[Layout] = []

    def walk(slot: int) -> None:
        while slot < model.memory_slices and state.occupied >> slot & 1:
            slot += 1
        if slot >= model.memory_slices:
            if not maximal or not any(_fits(model, limits, state, c) for c in candidates):
                found.append(Layout(tuple(chosen)))
            return
        for c in by_start.get(slot, ()):
            if _fits(model, limits, state, c):
                had_me_all = state.has_me_all
                _push(state, c)
                chosen.append(c.instance)
                walk(slot + 1)
                chosen.pop()
                _pop(state, c, had_me_all)
        walk(slot + 1)

    walk(0)
    return tuple(found)


def enumerate_layouts(
    model: GpuModel,
    *,
    profiles: Collection[str] | None = None,
    maximal: bool = False,
) -> tuple[Layout, ...]:
    """All valid layouts of `model`, each once, the empty layout included (unless maximal).

    `profiles` restricts the instances to those profiles (unknown names raise
    UnknownProfileError). With `maximal`, only layouts to which no instance of the allowed
    profiles can be added are returned. Results are cached per model and arguments.
    """
    if profiles is None:
        names = tuple(p.name for p in model.profiles)
    else:
        for name in profiles:
            model.profile(name)  # raises for an unknown name
        names = tuple(p.name for p in model.profiles if p.name in set(profiles))
    return _enumerate(model, names, maximal)


def clear_cache() -> None:
    """Forget cached enumerations (benchmarks measure cold runs)."""
    _enumerate.cache_clear()
