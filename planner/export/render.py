"""Pictures of layouts: which profile sits on which memory slices of a GPU.

Pure data and plain text; the CLI adds colour. A GPU of 8 memory slices with
`3g.40gb@0+2g.20gb@4+1g.10gb@6` draws as `|3g.40gb        |2g.20gb|1g.10|·  |`.
"""

from __future__ import annotations

from dataclasses import dataclass

from migplan.planner.hardware.catalog import GpuModel
from migplan.planner.hardware.layout import Instance, Layout
from migplan.planner.plan import GpuPlan, OperationKind

FREE = "·"


@dataclass(frozen=True, slots=True)
class Segment:
    """A run of memory slices: one instance, or one free slice (`instance` is None)."""

    start: int
    size: int
    instance: Instance | None

    @property
    def label(self) -> str:
        """The profile name, or the free-slice mark."""
        return self.instance.profile if self.instance else FREE


def segments(model: GpuModel, layout: Layout) -> list[Segment]:
    """The memory-slice axis of `model` cut into instance and free-slice segments, in order.

    The layout must be valid (overlapping instances cannot be drawn).
    """
    by_start = {i.start: i for i in layout.instances}
    found = []
    slot = 0
    while slot < model.memory_slices:
        instance = by_start.get(slot)
        if instance is None:
            found.append(Segment(slot, 1, None))
            slot += 1
        else:
            size = model.profile(instance.profile).size
            found.append(Segment(slot, size, instance))
            slot += size
    return found


def cell_width(model: GpuModel) -> int:
    """Characters per memory slice so that most labels fit (narrower on long axes)."""
    return 4 if model.memory_slices <= 8 else 3


def _short_forms(label: str) -> list[str]:
    """`1g.10gb+me` -> [`1g.10gb+me`, `1g+me`, `1g+`, `1g`]: ever shorter, still telling."""
    compute, _, rest = label.partition(".")
    suffix = next((s for s in ("+me.all", "+me", "+gfx", "-me") if rest.endswith(s)), "")
    forms = [label]
    if suffix:
        forms += [compute + suffix, compute + suffix[0]]
    forms.append(compute)
    return forms


def fit_label(label: str, width: int) -> str:
    """`label`, or its shortest telling form, padded or cut to exactly `width` characters."""
    for form in _short_forms(label):
        if len(form) <= width:
            return form.ljust(width)
    return label[:width]


def slice_bar(model: GpuModel, layout: Layout) -> str:
    """One line of text picturing `layout` on the slices of `model` (see module doc)."""
    width = cell_width(model)
    cells = [fit_label(s.label, s.size * width - 1) for s in segments(model, layout)]
    return "|" + "|".join(cells) + "|"


def marks_of(gp: GpuPlan) -> tuple[dict[Instance, str], dict[Instance, str]]:
    """Marks for the before and after pictures of one GPU."""
    destroyed = {o.instance for o in gp.operations if o.kind is OperationKind.DESTROY_GI}
    created = {o.instance for o in gp.operations if o.kind is OperationKind.CREATE_GI}
    before = {Instance.parse(text): ("!" if text in destroyed else "*") for text in gp.in_use}
    after = {Instance.parse(t): "+" for t in created if t}
    after.update({i: m for i, m in before.items() if m == "*"})
    return before, after


def steps_of(gp: GpuPlan) -> str:
    """`destroy 1g.5gb@2 1g.5gb@3 · create 3g.40gb@0` (each with its compute instance)."""
    parts = []
    if any(o.kind is OperationKind.ENABLE_MIG for o in gp.operations):
        parts.append("enable MIG")
    for kind, word in ((OperationKind.DESTROY_GI, "destroy"), (OperationKind.CREATE_GI, "create")):
        names = [o.instance for o in gp.operations if o.kind is kind and o.instance]
        if names:
            parts.append(f"{word} {' '.join(names)}")
    return " · ".join(parts)
