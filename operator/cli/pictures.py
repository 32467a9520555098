"""Coloured slice maps of layouts for the terminal (rich), built on planner.render."""

from __future__ import annotations

from rich.text import Text

from migplan.planner.catalog import GpuModel
from migplan.planner.layout import Layout
from migplan.planner.render import cell_width, fit_label, segments

# One colour per compute size, so equal-size instances look alike on every model.
_STYLES = {
    1: "black on cyan",
    2: "black on green",
    3: "black on yellow",
    4: "black on magenta",
    7: "white on blue",
}
_FREE_STYLE = "dim"


def slice_bar_text(model: GpuModel, layout: Layout) -> Text:
    """`layout` as a coloured bar over the memory slices of `model` (plain text when piped)."""
    width = cell_width(model)
    bar = Text("|")
    for seg in segments(model, layout):
        cell = fit_label(seg.label, seg.size * width - 1)
        if seg.instance is None:
            bar.append(cell, style=_FREE_STYLE)
        else:
            compute = model.profile(seg.instance.profile).compute_slices
            bar.append(cell, style=_STYLES.get(compute, "reverse"))
        bar.append("|")
    return bar
