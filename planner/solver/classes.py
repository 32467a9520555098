"""Group GPUs into classes that are interchangeable for the objective.

GPUs of one model with the same current layout, the same in-use instances (by position) and
the same MIG state differ only in where they sit; node-level costs are handled separately
(node groups in `model.py`). A fleet of thousands of GPUs is usually a few dozen classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from migplan.planner.api.inventory import GpuState
from migplan.planner.fleet import Situation, fleet_of


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


@dataclass(frozen=True, kw_only=True)
class GpuClass(Situation):
    """GPUs that the planner may treat as one pool: a situation (`fleet.py`) and its GPUs."""

    key: ClassKey
    gpus: tuple[GpuState, ...]

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
    first: dict[ClassKey, Situation] = {}
    for gpu, number in zip(fleet, fleet.numbers, strict=True):
        seen = (gpu.node if by_node else "", number)
        key = keys.get(seen)
        if key is None:
            key = keys[seen] = class_key(gpu, by_node=by_node)
            first.setdefault(key, fleet.situations[number])
        members.setdefault(key, []).append(gpu)
    return [
        GpuClass(
            **vars(first[key]),
            key=key,
            gpus=tuple(sorted(members[key], key=lambda g: (g.node, g.index))),
        )
        for key in sorted(members)
    ]
