"""Map class-level solver counts back to concrete GPUs.

Per node group, the touched nodes are the first ones by name; each class's changed GPUs are
dealt round-robin over them with one pointer carried across classes, so every touched node
gets at least one change and no node more GPUs of a class than it has. Within a node the
lowest GPU indices change first; target layouts go to changed GPUs in candidate order.
"""

from __future__ import annotations

from collections.abc import Sequence

from migplan.planner.assemble import GpuKey, gpu_key
from migplan.planner.inventory import GpuState
from migplan.planner.layout import Layout
from migplan.planner.solver.candidates import Candidate
from migplan.planner.solver.classes import GpuClass
from migplan.planner.solver.model import NodeGroup


def _changed_gpus(
    classes: Sequence[GpuClass],
    groups: Sequence[NodeGroup],
    moved: Sequence[dict[int, int]],
    touched: Sequence[int],
) -> dict[int, list[GpuState]]:
    """Which GPUs of each class change."""
    by_node_class: dict[tuple[str, int], list[GpuState]] = {}
    for c, cls in enumerate(classes):
        for gpu in cls.gpus:
            by_node_class.setdefault((gpu.node, c), []).append(gpu)
    chosen: dict[int, list[GpuState]] = {c: [] for c in range(len(classes))}
    for group, group_moved, count in zip(groups, moved, touched, strict=True):
        nodes = group.nodes[:count]
        if not nodes:
            continue
        taken: dict[tuple[str, int], int] = {}
        pointer = 0
        for c, _ in group.per_node:
            for _ in range(group_moved.get(c, 0)):
                node = nodes[pointer % len(nodes)]
                pointer += 1
                n = taken.get((node, c), 0)
                chosen[c].append(by_node_class[(node, c)][n])
                taken[(node, c)] = n + 1
    return chosen


def map_to_gpus(
    *,
    classes: Sequence[GpuClass],
    candidates: Sequence[Sequence[Candidate]],
    x: Sequence[Sequence[int]],
    groups: Sequence[NodeGroup],
    moved: Sequence[dict[int, int]],
    touched: Sequence[int],
) -> dict[GpuKey, Layout]:
    """Target layout per GPU from the solver's counts."""
    targets: dict[GpuKey, Layout] = {}
    changed = _changed_gpus(classes, groups, moved, touched)
    for c, cls in enumerate(classes):
        new_layouts = [
            cand.layout
            for cand, count in zip(candidates[c][1:], x[c][1:], strict=True)
            for _ in range(count)
        ]
        moving = sorted(changed[c], key=lambda g: (g.node, g.index))
        if len(moving) != len(new_layouts):
            raise RuntimeError(
                f"planner bug: class {cls.key} moves {len(moving)} GPUs for "
                f"{len(new_layouts)} new layouts"
            )
        for gpu in cls.gpus:
            targets[gpu_key(gpu)] = cls.current
        for gpu, layout in zip(moving, new_layouts, strict=True):
            targets[gpu_key(gpu)] = layout
    return targets
