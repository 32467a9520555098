"""The geometry report: one self-contained HTML file (inline CSS and script, no network) with,
per node and GPU, the slice map before and after, in-use instances, evictions and new
instances marked, then the demand met and unmet and the solver's figures.

Rendered with Jinja2 (autoescaped: pod and node names are data, not markup).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jinja2

from migplan.planner.export import scale_out
from migplan.planner.export.render import marks_of, segments, steps_of
from migplan.planner.hardware.catalog import Catalog
from migplan.planner.hardware.layout import Layout
from migplan.planner.pipeline import PlanOutcome
from migplan.planner.plan import Plan


@dataclass(frozen=True)
class Cell:
    """One segment of a slice map."""

    width: str
    """CSS width, a share of the GPU's memory slices."""
    label: str
    css: str
    title: str


def _cells(catalog: Catalog, model_name: str, layout: str, marks: dict[Any, str]) -> list[Cell]:
    model = catalog.model(model_name)
    cells = []
    for seg in segments(model, Layout.parse(layout)):
        width = f"{100.0 * seg.size / model.memory_slices:.3f}%"
        if seg.instance is None:
            cells.append(Cell(width, "", "free", f"free slice {seg.start}"))
            continue
        compute = model.profile(seg.instance.profile).compute_slices
        mark = marks.get(seg.instance, "")
        state = {"*": "used", "!": "evicted", "+": "created"}.get(mark, "")
        title = f"{seg.instance}" + (f" ({state})" if state else "")
        cells.append(Cell(width, seg.instance.profile, f"c{min(compute, 7)} {state}", title))
    return cells


def render_report(outcome: PlanOutcome, *, name: str, catalog: Catalog) -> str:
    """The report for `outcome` (the plan named `name`) as one HTML document."""
    plan = outcome.plan
    nodes: dict[str, list[dict[str, Any]]] = {}
    for gp in plan.gpus:
        before_marks, after_marks = marks_of(gp)
        nodes.setdefault(gp.node, []).append(
            {
                "index": gp.gpu,
                "model": gp.model,
                "changed": gp.changed,
                "before": _cells(catalog, gp.model, gp.before, before_marks),
                "after": _cells(catalog, gp.model, gp.after, after_marks),
                "steps": steps_of(gp),
                "evict": gp.evict,
            }
        )
    return _TEMPLATE.render(
        name=name,
        plan=plan,
        nodes=nodes,
        new_nodes=_new_nodes(plan, catalog),
        scale_headline=scale_out.headline(plan.scale_out) if plan.scale_out else "",
    )


def _new_nodes(plan: Plan, catalog: Catalog) -> list[dict[str, Any]]:
    """The nodes to ask the autoscaler for, runs of equal GPUs as one picture each."""
    if plan.scale_out is None:
        return []
    return [
        {
            "name": node.name,
            "offer": node.offer,
            "model": node.model,
            "runs": [
                (run, layout, _cells(catalog, node.model, layout, {}))
                for run, layout in scale_out.gpu_runs(node.gpus)
            ],
            "hosts": scale_out.hosts_text(plan, node),
        }
        for node in plan.scale_out.nodes
    ]


_ENV = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
_TEMPLATE = _ENV.from_string(
    """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>migplan plan {{ name }}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin: 1.2em 0 .4em; cursor: pointer; }
.summary span { display: inline-block; margin-right: 1.5em; }
.gpu { display: grid; grid-template-columns: 11em 4em 1fr; gap: 2px 8px; margin: 6px 0 12px; }
.gpu.unchanged { opacity: .55; }
.bar { display: flex; height: 26px; border: 1px solid #888; border-radius: 3px; }
.bar div { box-sizing: border-box; border-right: 1px solid #fff; overflow: hidden;
  font-size: 11px; line-height: 26px; text-align: center; white-space: nowrap; }
.free { background: repeating-linear-gradient(45deg, #eee, #eee 4px, #f8f8f8 4px, #f8f8f8 8px); }
.c1 { background: #7fd3e6; } .c2 { background: #8fd18a; } .c3 { background: #f2d16b; }
.c4 { background: #d59be0; } .c7 { background: #6f8fd8; color: #fff; }
.used { font-weight: bold; box-shadow: inset 0 0 0 2px #333; }
.evicted { background: #e5484d !important; color: #fff; font-weight: bold; }
.created { box-shadow: inset 0 0 0 3px #1a7f37; }
.ops { grid-column: 3; font-size: 12px; color: #555; }
.evict { grid-column: 3; font-size: 12px; color: #b42318; }
table { border-collapse: collapse; margin: .5em 0; }
td, th { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
.unmet { color: #b42318; }
.legend span { display: inline-block; padding: 0 6px; margin-right: 8px; border-radius: 3px; }
.hidden { display: none; }
</style>
</head>
<body data-gpus="0">
{% macro bar(cells) -%}
<div class="bar">{% for c in cells %}
<div class="{{ c.css }}" style="width: {{ c.width }}" title="{{ c.title }}">{{ c.label }}</div>
{%- endfor %}</div>
{%- endmacro %}
<h1>GPUPartitionPlan {{ name }}</h1>
<p class="summary">
  <span>{{ plan.summary.gpus }} GPUs on {{ nodes|length }} nodes</span>
  <span>{{ plan.summary.gpus_changed }} GPUs on {{ plan.summary.nodes_touched }} nodes change</span>
  <span>{{ plan.summary.evictions }} pods evicted</span>
  <span>demand {{ plan.summary.met }}/{{ plan.summary.requested }} met</span>
</p>
<p class="legend">
  <span class="used">in use</span><span class="evicted">in use, pod evicted</span>
  <span class="created">created</span><span class="free">free slice</span>
  <label><input type="checkbox" id="changed-only"> changed GPUs only</label>
</p>
{% for node, gpus in nodes.items() %}
<section class="node" data-node="{{ node }}">
<h2>{{ node }}</h2>
{% for g in gpus %}
<div class="gpu {{ 'changed' if g.changed else 'unchanged' }}" data-gpu="{{ g.index }}">
  <div>GPU {{ g.index }} {{ g.model }}</div><div>before</div>
  {{ bar(g.before) }}
  <div></div><div>after</div>
  {{ bar(g.after) }}
  {% if g.steps %}<div class="ops">{{ g.steps }}</div>{% endif %}
  {% if g.evict %}<div class="evict">evict {{ g.evict|join(', ') }}</div>{% endif %}
</div>
{% endfor %}
</section>
{% endfor %}
<h2>Demand</h2>
<table>
<tr><th>resource</th><th>kind</th><th>priority</th><th>requested</th><th>met</th><th>reason</th></tr>
{% for d in plan.demand %}
<tr class="{{ 'unmet' if d.met < d.requested else '' }}">
<td>{{ d.label }}</td><td>{{ d.kind }}</td><td>{{ d.priority }}</td>
<td>{{ d.requested }}</td><td>{{ d.met_text }}</td><td>{{ d.reason or '' }}</td></tr>
{% endfor %}
</table>
{% if plan.gangs %}
<h2>Gangs (all or none)</h2>
<table>
<tr><th>gang</th><th>needs</th><th>minCount</th><th>met</th><th>admitted</th><th>reason</th></tr>
{% for g in plan.gangs %}
<tr class="{{ '' if g.admitted else 'unmet' }}">
<td>{{ g.name }}</td><td>{{ g.shape }}</td><td>{{ g.min_count }}</td>
<td>{{ g.met }}/{{ g.requested }}</td><td>{{ 'yes' if g.admitted else 'no' }}</td>
<td>{{ g.reason or '' }}</td></tr>
{% endfor %}
</table>
{% endif %}
{% if plan.scale_out %}
<h2>Scale out</h2>
<p class="scale-out">{{ scale_headline }}</p>
{% for node in new_nodes %}
<section class="new-node" data-node="{{ node.name }}">
<h3>new node {{ node.name }} ({{ node.offer }}, {{ node.model }})</h3>
{% for run, layout, cells in node.runs %}
<div class="gpu"><div>GPU {{ run }}</div><div>{{ 'whole' if layout == '-' else '' }}</div>
{{ bar(cells) }}</div>
{% endfor %}
<p class="ops">hosts {{ node.hosts }}</p>
</section>
{% endfor %}
{% endif %}
<h2>Solver</h2>
{% if plan.solver.no_time_note() %}
<p class="unmet"><strong>Warning:</strong> {{ plan.solver.no_time_note() }}</p>
{% endif %}
<p>{{ plan.solver.method }} {{ plan.solver.status }}
in {{ '%.2f'|format(plan.solver.wall_seconds) }} s,
gap {{ '%.2f'|format(plan.solver.gap * 100) }} %, {{ plan.solver.classes }} GPU classes,
{{ plan.solver.variables }} variables; input {{ plan.input_hash }}</p>
<table>
<tr><th>stage</th><th>sense</th><th>status</th><th>value</th><th>bound</th><th>seconds</th></tr>
{% for st in plan.solver.stages %}
<tr><td>{{ st.name }}</td><td>{{ st.sense }}</td><td>{{ st.status }}</td><td>{{ st.value }}</td>
<td>{{ st.bound if st.bound is not none else '' }}</td><td>{{ '%.3f'|format(st.seconds) }}</td></tr>
{% endfor %}
</table>
<script>
"use strict";
const gpus = document.querySelectorAll(".gpu");
document.body.dataset.gpus = String(gpus.length);
document.getElementById("changed-only").addEventListener("change", (event) => {
  for (const gpu of document.querySelectorAll(".gpu.unchanged")) {
    gpu.classList.toggle("hidden", event.target.checked);
  }
});
for (const heading of document.querySelectorAll("section.node h2")) {
  heading.addEventListener("click", () => {
    for (const gpu of heading.parentElement.querySelectorAll(".gpu")) {
      gpu.classList.toggle("hidden");
    }
  });
}
</script>
</body>
</html>
"""
)
