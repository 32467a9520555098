"""Group GPUs into classes that are interchangeable for the objective.

GPUs of one model with the same current layout, the same in-use instances (by position) and
the same MIG state differ only in where they sit; node-level costs are handled separately
(node groups in `model.py`). A fleet of thousands of GPUs is usually a few dozen classes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from migplan.planner.api.inventory import GpuState
from migplan.planner.fleet import fleet_of
from migplan.planner.hardware.catalog import GpuModel
from migplan.planner.hardware.layout import Instance, Layout


@dataclass(frozen=True, order=True)
class ClassKey:
    """What makes GPUs interchangeable."""

    model: str
    layout: str
    pins: tuple[str, ...]
    mig_enabled: bool
    whole_gpu_used: bool
    shared: tuple[tuple[str, int], ...] = ()
    """In-use instances several pods share, with how many pods besides the first."""
    node: str = ""
    """The node, where classes are per node (the model counts supply per node); else empty."""


@dataclass(frozen=True)
class GpuClass:
    """GPUs that the planner may treat as one pool."""

    key: ClassKey
    model: GpuModel
    current: Layout
    pins: frozenset[Instance]
    mig_enabled: bool
    whole_gpu_used: bool
    gpus: tuple[GpuState, ...]
    sharers: Mapping[Instance, int] = field(default_factory=dict)
    """Pods besides the first on an in-use instance (a shared ResourceClaim)."""

    def pods_on(self, instances: Iterable[Instance]) -> int:
        """Pods using `instances` on one GPU of the class: what dropping them evicts."""
        return sum(1 + self.sharers.get(i, 0) for i in instances if i in self.pins)

    @property
    def size(self) -> int:
        """Number of GPUs in the class."""
        return len(self.gpus)


def class_key(gpu: GpuState, *, by_node: bool = False) -> ClassKey:
    """The class a GPU belongs to (with `by_node`, GPUs of one node only)."""
    return ClassKey(
        node=gpu.node if by_node else "",
        model=gpu.model.model,
        layout=str(gpu.layout),
        pins=tuple(sorted(str(i) for i in gpu.pins)),
        mig_enabled=gpu.mig_enabled,
        whole_gpu_used=gpu.whole_gpu_pod is not None,
        shared=tuple(sorted((str(i), len(pods)) for i, pods in gpu.sharers.items())),
    )


def group_gpus(gpus: Sequence[GpuState], *, by_node: bool = False) -> list[GpuClass]:
    """The classes of `gpus`, sorted by key; GPUs inside sorted by node and index. With
    `by_node`, a class holds GPUs of one node only. Each situation (`fleet.py`) is keyed
    once, not each GPU (40,000 GPUs are a few thousand situations)."""
    fleet = fleet_of(gpus)
    keys: dict[tuple[str, int], ClassKey] = {}
    members: dict[ClassKey, list[GpuState]] = {}
    for gpu, number in zip(fleet, fleet.numbers, strict=True):
        seen = (gpu.node if by_node else "", number)
        key = keys.get(seen)
        if key is None:
            key = keys[seen] = class_key(gpu, by_node=by_node)
        members.setdefault(key, []).append(gpu)
    classes = []
    for key in sorted(members):
        first = members[key][0]
        classes.append(
            GpuClass(
                key=key,
                model=first.model,
                current=first.layout,
                pins=frozenset(first.pins),
                mig_enabled=first.mig_enabled,
                whole_gpu_used=first.whole_gpu_pod is not None,
                gpus=tuple(sorted(members[key], key=lambda g: (g.node, g.index))),
                sharers={i: len(pods) for i, pods in first.sharers.items()},
            )
        )
    return classes
