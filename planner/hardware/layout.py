"""MIG layouts: the set of GPU instances (profile at a start slot) on one GPU.

The canonical text form is used wherever a person reads or writes a layout:
`3g.40gb@0+2g.20gb@4+1g.10gb@6` (instances sorted by start), and `-` for an empty GPU.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Self, cast

from migplan.planner.errors import LayoutSyntaxError
from migplan.planner.hardware.catalog import PROFILE_NAME, GpuModel, MediaClass

EMPTY = "-"
MAX_INSTANCES = 64
"""More instances than any GPU can hold (7 on 8-slice models): longer layouts are refused as
text, before any rule is checked."""
_INSTANCE = re.compile(r"^(?P<profile>[^@\s]+)@(?P<start>[0-9]+)$")
# `+` joins instances but also begins suffixes such as `+me`; a joining `+` always follows the
# digits of a start slot, a suffix `+` always follows `gb`.
_SEPARATOR = re.compile(r"(?<=[0-9])\s*\+\s*")


@dataclass(frozen=True, order=True, slots=True)
class Instance:
    """A GPU instance: a profile placed at a start slot of the memory-slice axis."""

    start: int
    profile: str

    def __str__(self) -> str:
        return f"{self.profile}@{self.start}"

    @classmethod
    def parse(cls, text: str) -> Instance:
        """Parse one `profile@start`."""
        layout = Layout.parse(text)
        if len(layout) != 1:
            raise LayoutSyntaxError(f"{text!r} is not one instance of the form PROFILE@START")
        return layout.instances[0]


@dataclass(frozen=True, slots=True)
class Layout:
    """The instances on one GPU, kept sorted by start so equal layouts compare equal."""

    instances: tuple[Instance, ...] = ()
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Layouts key the planner's caches and tables and are hashed about a million times a
        # 2,000-GPU pass; the generated hash recomputed every instance's each time.
        object.__setattr__(self, "_hash", hash(self.instances))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[type[Layout], tuple[tuple[Instance, ...]]]:
        # A string's hash differs between processes: an unpickled layout hashes afresh.
        return (Layout, (self.instances,))

    @classmethod
    def of(cls, instances: tuple[Instance, ...] | list[Instance]) -> Self:
        """A layout holding `instances` in canonical (start) order."""
        return cls(tuple(sorted(instances)))

    @classmethod
    def parse(cls, text: str) -> Self:
        """Parse the canonical form (any instance order is accepted); `-` or `` is empty.

        Layouts are immutable and a fleet repeats a few hundred of them over thousands of
        GPUs, so parses are remembered (the 8,000-GPU benchmark parses 79,000 times)."""
        if cls is Layout:
            return cast(Self, _parse_remembered(text))
        return cls._parse(text)

    @classmethod
    def _parse(cls, text: str) -> Self:
        stripped = text.strip()
        if stripped in (EMPTY, ""):
            return cls()
        tokens = _SEPARATOR.split(stripped, maxsplit=MAX_INSTANCES)
        if len(tokens) > MAX_INSTANCES:
            raise LayoutSyntaxError(
                f"bad layout {text[:60]!r}...: more than {MAX_INSTANCES} instances "
                "(a GPU holds at most a few dozen)"
            )
        instances = []
        for token in tokens:
            match = _INSTANCE.match(token.strip())
            if match is None:
                raise LayoutSyntaxError(
                    f"bad layout {text!r}: {token!r} is not of the form PROFILE@START "
                    "(for example 3g.40gb@0+2g.20gb@4, or - for an empty GPU)"
                )
            if not PROFILE_NAME.match(match["profile"]):
                raise LayoutSyntaxError(
                    f"bad layout {text!r}: {match['profile']!r} is not a MIG profile name "
                    "(such as 1g.10gb, 3g.40gb or 1g.10gb+me)"
                )
            instances.append(Instance(start=int(match["start"]), profile=match["profile"]))
        return cls.of(instances)

    def __str__(self) -> str:
        return "+".join(map(str, self.instances)) if self.instances else EMPTY

    def __len__(self) -> int:
        return len(self.instances)

    def __bool__(self) -> bool:
        return bool(self.instances)

    def with_instance(self, instance: Instance) -> Layout:
        """This layout with one more instance."""
        return Layout.of([*self.instances, instance])

    def profile_counts(self) -> Counter[str]:
        """How many instances of each profile the layout holds."""
        return Counter(i.profile for i in self.instances)


class Rule(StrEnum):
    """The rules a valid layout obeys; each violation names one."""

    UNKNOWN_PROFILE = "unknown-profile"
    START = "start"
    OVERLAP = "overlap"
    MAX_COUNT = "max-count"
    MEDIA = "media-engines"
    COMPUTE = "compute-slices"
    INSTANCES = "max-instances"


@dataclass(frozen=True, slots=True)
class Violation:
    """One reason a layout is not valid on a GPU model."""

    rule: Rule
    message: str

    def __str__(self) -> str:
        return self.message


@functools.lru_cache(maxsize=1 << 15)
def _parse_remembered(text: str) -> Layout:
    return Layout._parse(text)


def _span(model: GpuModel, instance: Instance) -> str:
    size = model.profiles_by_name[instance.profile].size
    last = instance.start + size - 1
    slices = f"slice {instance.start}" if size == 1 else f"slices {instance.start}-{last}"
    return f"{instance} ({slices})"


def check_layout(model: GpuModel, layout: Layout) -> list[Violation]:
    """Every reason `layout` cannot exist on a GPU of `model`; empty when it is valid.

    Rules (shared/reference/mig-hardware-facts.md, sections 1 and 5): each profile exists and
    starts at an allowed slot; no two instances share a memory slice; per-profile max counts;
    at most one instance claims the GPU's shared media engines (`+me`, `+me.all`), and next to a
    `+me.all` instance only `-me` instances may exist; compute slices and the instance total fit.
    """
    known = [i for i in layout.instances if i.profile in model.profiles_by_name]
    violations = [
        Violation(
            Rule.UNKNOWN_PROFILE,
            f"{i}: {model.model} has no profile {i.profile!r} "
            f"(known: {', '.join(model.profiles_by_name)})",
        )
        for i in layout.instances
        if i.profile not in model.profiles_by_name
    ]
    for i in known:
        profile = model.profiles_by_name[i.profile]
        if i.start not in profile.starts:
            violations.append(
                Violation(
                    Rule.START,
                    f"{i}: {i.profile} cannot start at slice {i.start} "
                    f"(allowed starts: {', '.join(map(str, profile.starts))})",
                )
            )
    violations += _overlaps(model, known)
    violations += _counts(model, known)
    violations += _media(model, known)
    return violations


def _overlaps(model: GpuModel, instances: list[Instance]) -> list[Violation]:
    """Each instance against the first one holding any of its slices: one pass over a slice
    map, so a long hostile layout costs time in proportion to its length, not its square."""
    found = []
    holder: dict[int, Instance] = {}
    for i in sorted(instances):
        size = model.profiles_by_name[i.profile].size
        clashes = dict.fromkeys(holder[s] for s in range(i.start, i.start + size) if s in holder)
        for other in clashes:
            found.append(
                Violation(Rule.OVERLAP, f"{_span(model, other)} overlaps {_span(model, i)}")
            )
        for s in range(i.start, i.start + size):
            holder.setdefault(s, i)
    return found


def _counts(model: GpuModel, instances: list[Instance]) -> list[Violation]:
    found = []
    for name, count in Counter(i.profile for i in instances).items():
        limit = model.profiles_by_name[name].max_count
        if count > limit:
            found.append(
                Violation(
                    Rule.MAX_COUNT,
                    f"{count} x {name} exceeds the maximum of {limit} per {model.model} GPU",
                )
            )
    compute = sum(model.profiles_by_name[i.profile].compute_slices for i in instances)
    if compute > model.compute_slices:
        found.append(
            Violation(
                Rule.COMPUTE,
                f"the instances need {compute} compute slices; {model.model} has "
                f"{model.compute_slices}",
            )
        )
    if len(instances) > model.max_instances:
        found.append(
            Violation(
                Rule.INSTANCES,
                f"{len(instances)} instances exceed the maximum of {model.max_instances} per "
                f"{model.model} GPU",
            )
        )
    return found


def _media(model: GpuModel, instances: list[Instance]) -> list[Violation]:
    media = {i: model.profiles_by_name[i.profile].media for i in instances}
    claiming = [i for i, m in media.items() if m in (MediaClass.ME, MediaClass.ME_ALL)]
    found = []
    if len(claiming) > 1:
        found.append(
            Violation(
                Rule.MEDIA,
                f"{' and '.join(map(str, claiming))} each claim the GPU's one set of shared "
                "media engines (+me / +me.all): at most one such instance per GPU",
            )
        )
    for owner in (i for i, m in media.items() if m is MediaClass.ME_ALL):
        others = [i for i, m in media.items() if i != owner and m is not MediaClass.NO_ME]
        if others:
            found.append(
                Violation(
                    Rule.MEDIA,
                    f"{owner} takes all media engines: only -me instances may share its GPU, "
                    f"not {', '.join(map(str, others))}",
                )
            )
    return found


@functools.lru_cache(maxsize=1 << 15)
def is_valid(model: GpuModel, layout: Layout) -> bool:
    """Whether `layout` can exist on a GPU of `model` (remembered: both are immutable, and a
    warm start asks it of every GPU's previous layout, 40,000 times at the largest size)."""
    return not check_layout(model, layout)
