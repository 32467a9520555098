"""Coloured slice maps of layouts for the terminal (rich), built on planner.render."""

from __future__ import annotations

from collections.abc import Mapping

from rich.text import Text

from migplan.planner.export.render import cell_width, fit_label, segments
from migplan.planner.hardware.catalog import GpuModel
from migplan.planner.hardware.layout import Instance, Layout

# One colour per compute size, so equal-size instances look alike on every model.
_STYLES = {
    1: "black on cyan",
    2: "black on green",
    3: "black on yellow",
    4: "black on magenta",
    7: "white on blue",
}
_FREE_STYLE = "dim"
MARK_STYLES = {"*": "bold", "!": "bold white on red", "+": "bold underline"}
_REPLACES_COLOUR = {"!"}
"""Instance marks: * in use, ! its pod is evicted, + created by the plan."""
LEGEND = "* in use   ! in use, pod evicted   + created   \u00b7 free slice"


def slice_bar_text(
    model: GpuModel, layout: Layout, marks: Mapping[Instance, str] | None = None
) -> Text:
    """`layout` as a coloured bar over the memory slices of `model` (plain text when piped).

    `marks` puts a one-character mark before an instance's label (see MARK_STYLES).
    """
    marks = marks or {}
    width = cell_width(model)
    bar = Text("|")
    for seg in segments(model, layout):
        if seg.instance is None:
            bar.append(fit_label(seg.label, seg.size * width - 1), style=_FREE_STYLE)
        else:
            mark = marks.get(seg.instance, "")
            cell = fit_label(mark + seg.label, seg.size * width - 1)
            compute = model.profile(seg.instance.profile).compute_slices
            colour = _STYLES.get(compute, "reverse")
            extra = MARK_STYLES.get(mark, "")
            style = extra if mark in _REPLACES_COLOUR else f"{colour} {extra}".strip()
            bar.append(cell, style=style)
        bar.append("|")
    return bar
