"""`migplan preview`: the dry run a person reads before anything is touched."""

from __future__ import annotations

import gc
import json
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
import yaml
from rich.console import Console
from rich.text import Text

from migplan.operator.cli import began
from migplan.operator.cli import gpu_operator_options as gpu
from migplan.operator.cli.context import (
    ClusterOpt,
    ContextOpt,
    KubeconfigOpt,
    PlanFileArg,
    console,
    new_table,
    state,
)
from migplan.operator.cli.files import (
    load_inventory,
    load_plan_manifest,
    load_previous_plan,
    shown,
    write_atomically,
)
from migplan.operator.cli.pictures import LEGEND, slice_bar_text
from migplan.operator.cli.progress import StderrProgress
from migplan.operator.gpu_operator import GpuOperatorSettings
from migplan.operator.preflight.screen import inventory_facts, screen
from migplan.planner.api.inventory import GpuState, Inventory, resolve_inventory
from migplan.planner.api.spec import GPUPartitionPlan
from migplan.planner.export import scale_out
from migplan.planner.export.render import marks_of, steps_of
from migplan.planner.gc_pause import gc_paused
from migplan.planner.hardware.catalog import Catalog
from migplan.planner.hardware.layout import Layout
from migplan.planner.pipeline import PlanOutcome, plan_fleet
from migplan.planner.plan import Plan

if TYPE_CHECKING:  # the Kubernetes client only where a live cluster is read
    from migplan.operator.cluster_inventory import ClusterSnapshot
    from migplan.operator.kube.seam import Kube


class PreviewFormat(StrEnum):
    """Output formats of the preview."""

    TEXT = "text"
    YAML = "yaml"
    JSON = "json"


CHANGED_ONLY_ABOVE = 32
"""GPUs covered past which the text preview shows only the GPUs that change (unless
--all-gpus): a fleet's unchanged GPUs would bury what matters."""


def _print_gpus(out: Console, plan: Plan, catalog: Catalog, *, changed_only: bool) -> None:
    node = None
    hidden = 0
    for gp in plan.gpus:
        if changed_only and not gp.changed:
            hidden += 1
            continue
        if gp.node != node:
            node = gp.node
            out.print(Text(f"node {node}", style="bold"))
        model = catalog.model(gp.model)
        before_marks, after_marks = marks_of(gp)
        before = slice_bar_text(model, Layout.parse(gp.before), before_marks)
        head = Text(f"  gpu {gp.gpu}  {gp.model:<12} ")
        if not gp.changed:
            out.print(head + Text("unchanged ", style="dim") + before)
            continue
        after = slice_bar_text(model, Layout.parse(gp.after), after_marks)
        out.print(head + Text("before    ") + before)
        out.print(Text(" " * len(head.plain)) + Text("after     ") + after)
        out.print(Text(f"{' ' * len(head.plain)}ops       {steps_of(gp)}", style="dim"))
        if gp.evict:
            out.print(
                Text(f"{' ' * len(head.plain)}evict     {', '.join(gp.evict)}", style="bold red")
            )
    if hidden:
        out.print(Text(f"({hidden} unchanged GPUs not shown; --all-gpus shows them)", style="dim"))
    out.print(Text(LEGEND, style="dim"))


def _print_demand(out: Console, plan: Plan) -> None:
    """The demand table (names kept whole), then why each unmet row is unmet, as prose that
    wraps at any width."""
    table = new_table(title="Demand", title_justify="left")
    for column in ("resource", "kind", "prio", "wanted", "met", "for"):
        table.add_column(
            column,
            justify="right" if column in ("prio", "wanted", "met") else "left",
            no_wrap=True,  # a name split at `/` or `-` reads as two
            overflow="fold",
        )
    for r in plan.demand:
        style = "" if r.met == r.requested else "yellow"
        table.add_row(
            r.label,
            r.kind,
            str(r.priority),
            str(r.requested),
            r.met_text,
            "\n".join(_who(r.pods)),  # a name a line: none is split
            style=style,
        )
    out.print(table)
    _print_gangs(out, plan)
    unmet = [r for r in plan.demand if r.reason]
    if unmet:
        out.print(Text("Why not met", style="bold"))
        for r in unmet:
            out.print(Text(f"  {r.label}: {r.reason}", style="yellow"))


def _print_gangs(out: Console, plan: Plan) -> None:
    """Each gang (met all together or not at all): what its pods need, how many must be met
    together, how many are, and whether it is admitted."""
    if not plan.gangs:
        return
    table = new_table(title="Gangs (all or none)", title_justify="left")
    for column in ("gang", "needs", "min", "met", "admitted"):
        table.add_column(
            column,
            justify="right" if column in ("min", "met") else "left",
            no_wrap=column == "gang",
            overflow="fold",
        )
    for g in plan.gangs:
        table.add_row(
            g.name,
            g.shape,
            str(g.min_count),
            f"{g.met}/{g.requested}",
            "yes" if g.admitted else "no",
            style="" if g.admitted else "yellow",
        )
    out.print(table)


def _print_scale_out(out: Console, plan: Plan, catalog: Catalog) -> None:
    """The nodes to ask the autoscaler for (spec.scaleOut): per node its GPUs' layouts as
    pictures, runs of equal GPUs together, and the pods it is laid out for."""
    scale = plan.scale_out
    if scale is None:
        return
    out.print(Text(f"Scale out: {scale_out.headline(scale)}", style="bold"))
    for node in scale.nodes:
        model = catalog.model(node.model)
        out.print(Text(f"new node {node.name}  ({node.offer}, {len(node.gpus)} x {node.model})"))
        for run, layout in scale_out.gpu_runs(node.gpus):
            head = Text(f"  gpu {run:<5} ")
            if layout == "-":
                out.print(head + Text("whole (not partitioned)", style="dim"))
            else:
                out.print(head + slice_bar_text(model, Layout.parse(layout)))
        out.print(Text(f"  hosts     {scale_out.hosts_text(plan, node)}", style="dim"))
    unmet = [i for i in scale.items if i.met < i.left]
    for item in unmet:
        result = plan.demand[item.demand]
        who = f" of {item.gang}" if item.gang else ""
        out.print(
            Text(
                f"  still unmet: {item.left - item.met} of {item.left} pods ({result.label}){who}",
                style="yellow",
            )
        )


def _who(pods: tuple[str, ...], shown: int = 2) -> list[str]:
    """The pods (or Kueue Workloads) behind a demand row, the first few named."""
    if len(pods) <= shown:
        return list(pods)
    return [*pods[:shown], f"+{len(pods) - shown} more"]


def _print_solver(out: Console, plan: Plan) -> None:
    s = plan.solver
    note = s.no_time_note()
    if note is not None:
        out.print(Text(f"warning: {note}", style="bold yellow"))
    returned = s.chosen if (s.chosen or "").endswith("plan") else f"{s.chosen}'s plan"
    out.print(
        Text(
            f"Solver: {s.method} {s.status} in {s.wall_seconds:.2f} s (model "
            f"{s.build_seconds:.2f} s); {s.classes} GPU classes, {s.pools} pools, "
            f"{s.variables} variables, {s.workers} worker(s), seed {s.seed}; started from "
            f"{s.started_from}, returned {returned}; demand met (weighted) "
            f"{s.objective:g}, bound {s.bound:g}, gap {s.gap:.2%}"
        )
    )
    table = new_table(show_edge=False)
    for column in ("stage", "sense", "status", "value", "bound", "seconds"):
        table.add_column(
            column, justify="left" if column in ("stage", "sense", "status") else "right"
        )
    for st in s.stages:
        table.add_row(
            st.name,
            st.sense,
            st.status,
            f"{st.value:g}",
            "?" if st.bound is None else f"{st.bound:g}",
            f"{st.seconds:.3f}",
        )
    out.print(table)


def print_preview(
    outcome: PlanOutcome, *, name: str, catalog: Catalog, all_gpus: bool | None = None
) -> None:
    """The human-readable preview of a plan: every GPU with `all_gpus`, only the changed
    ones without, and by default every GPU of a small fleet (CHANGED_ONLY_ABOVE)."""
    plan = outcome.plan
    out = console()
    s = plan.summary
    nodes = len({g.node for g in plan.gpus})
    out.print(
        Text(
            f"Plan {name}: {nodes} nodes, {s.gpus} GPUs covered; demand {s.met}/{s.requested} "
            f"met; {s.gpus_changed} GPUs on {s.nodes_touched} nodes change; "
            f"{s.evictions} pods evicted",
            style="bold",
        )
    )
    out.print(Text(f"input {plan.input_hash}", style="dim"))
    show_all = all_gpus if all_gpus is not None else len(plan.gpus) <= CHANGED_ONLY_ABOVE
    _print_gpus(out, plan, catalog, changed_only=not show_all)
    _print_demand(out, plan)
    _print_scale_out(out, plan, catalog)
    _print_solver(out, plan)


def _live(
    kubeconfig: str | None, catalog: Catalog, *, context: str | None
) -> tuple[Kube, ClusterSnapshot]:
    """The live cluster and its snapshot; GPU nodes left out are named on stderr."""
    # Lazy (PLC0415): the Kubernetes client (and kopf) add ~0.5 s to every command.
    from migplan.operator.cluster_inventory import read_inventory  # noqa: PLC0415
    from migplan.operator.kube.connect import connect  # noqa: PLC0415

    api = connect(kubeconfig=kubeconfig, context=context)
    snapshot = read_inventory(api, catalog=catalog)
    for node, why in sorted(snapshot.left_out.items()):
        typer.echo(f"migplan: warning: node {node} left out: {why}", err=True)
    for note in snapshot.notes:
        typer.echo(f"migplan: warning: {note}", err=True)
    return api, snapshot


def live_inventory(
    kubeconfig: str | None, catalog: Catalog, *, context: str | None = None
) -> Inventory:
    """The live cluster's inventory; GPU nodes left out are named on stderr."""
    return _live(kubeconfig, catalog, context=context)[1].inventory


@dataclass(frozen=True)
class Input:
    """The inventory a command plans on and, read from a file, its GPUs already checked
    (`plan_fleet(resolved=...)` takes them rather than checking them again)."""

    inventory: Inventory
    gpus: list[GpuState] | None = None


def input_inventory(
    cluster: Path | None,
    kubeconfig: str | None,
    catalog: Catalog,
    *,
    manifest: GPUPartitionPlan,
    context: str | None = None,
    gpu_operator: GpuOperatorSettings = gpu.DEFAULT_SETTINGS,
) -> Input:
    """What `manifest` may change, as the operator would see it: the inventory from
    `cluster` (a file, checked whole: a broken GPU on a node the plan does not select is
    still a broken file) or the live cluster (the GPU Operator's pods found as
    `gpu_operator` says, as the operator is told), less the nodes preflight refuses (named
    on stderr)."""
    settings = gpu_operator
    gpus = None
    if cluster is None:
        # Lazy (PLC0415): the Kubernetes client (and kopf) add ~0.5 s to every command.
        from migplan.operator.preflight.facts import live_facts  # noqa: PLC0415

        api, snapshot = _live(kubeconfig, catalog, context=context)
        inventory = snapshot.inventory
        selector = manifest.spec.node_selector
        nodes = [n.name for n in inventory.nodes if selector.matches(n.labels)]
        facts = live_facts(api, settings=settings, nodes=nodes)
    else:
        inventory = load_inventory(cluster)
        gpus = resolve_inventory(inventory, catalog)
        facts = inventory_facts(inventory)
    screened = screen(inventory, facts, manifest=manifest, settings=settings)
    for node, why in sorted(screened.refused.items()):
        typer.echo(f"migplan: warning: node {node} left out: preflight: {why}", err=True)
    return Input(screened.inventory, gpus)


@dataclass(frozen=True)
class Source:
    """Where a command reads the cluster: an inventory file, else the live cluster of the
    kubeconfig (its context), with the GPU Operator found as the options say."""

    cluster: Path | None
    kubeconfig: str | None
    context: str | None
    gpu_operator: GpuOperatorSettings


def plan_input(
    manifest: GPUPartitionPlan,
    source: Source,
    *,
    catalog: Catalog,
    progress: Callable[[str], None],
    started: float,
    previous: Path | None = None,
) -> PlanOutcome:
    """Plan `manifest` on the inventory `source` gives, screened as the operator screens it
    (what preview and export do alike); with `previous`, an earlier plan's file, starting
    from that plan where it ranks best (`planner/solver/previous.py`)."""
    with gc_paused():
        outcome = _plan_input(
            manifest, source, catalog=catalog, progress=progress, started=started, previous=previous
        )
        # The inputs and the plan live until the command exits: moved out of the collector's
        # sight before it is back on, they are not scanned again (once the pass's objects
        # were young, the first collection after it scanned them all: 0.15 s on 400 GPUs).
        gc.freeze()
    return outcome


def _plan_input(
    manifest: GPUPartitionPlan,
    source: Source,
    *,
    catalog: Catalog,
    progress: Callable[[str], None],
    started: float,
    previous: Path | None,
) -> PlanOutcome:
    cluster = source.cluster
    progress(f"reading {shown(cluster)}" if cluster else "reading the live cluster")
    found = input_inventory(
        cluster,
        source.kubeconfig,
        catalog,
        manifest=manifest,
        context=source.context,
        gpu_operator=source.gpu_operator,
    )
    layouts = None
    if previous is not None:
        progress(f"reading {shown(previous)}")
        layouts = load_previous_plan(previous, name=manifest.metadata.name)
    progress("checking the inventory")
    return plan_fleet(
        manifest,
        found.inventory,
        catalog,
        progress=progress,
        started=started,
        resolved=found.gpus,
        previous=layouts,
    )


def inventory(
    ctx: typer.Context,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    output: Annotated[
        PreviewFormat, typer.Option("--output", "-o", help="yaml or json.")
    ] = PreviewFormat.YAML,
) -> None:
    """Print the live cluster as an Inventory file, for `migplan preview --cluster` offline.

    GPU nodes (GPU feature discovery's nvidia.com/mig.capable=true) with the layouts and
    in-use instances their agents report, namespaces' labels, and the pods pending on
    nvidia.com/mig-* resources. Where the cluster serves DRA (resource.k8s.io/v1): instances
    claims hold, DynamicMIG nodes read from their ResourceSlices, and pending pods' claims
    with the profiles their selectors accept.
    """
    with StderrProgress() as progress:
        progress("reading the live cluster")
        found = live_inventory(kubeconfig, state(ctx).catalog, context=context)
    document = found.model_dump(mode="json", by_alias=True, exclude_defaults=False)
    if output is PreviewFormat.JSON:
        typer.echo(json.dumps(document, indent=2))
    else:
        typer.echo(yaml.safe_dump(document, sort_keys=False), nl=False)


@gpu.with_gpu_operator
def preview(
    ctx: typer.Context,
    plan_file: PlanFileArg,
    cluster: ClusterOpt = None,
    output: Annotated[
        PreviewFormat, typer.Option("--output", "-o", help="text, yaml or json.")
    ] = PreviewFormat.TEXT,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html",
            metavar="REPORT.html",
            help="Also write the geometry report: one self-contained HTML file.",
        ),
    ] = None,
    all_gpus: Annotated[
        bool | None,
        typer.Option(
            "--all-gpus/--changed-only",
            help="Text output: every GPU, or only those that change (default: every GPU up "
            f"to {CHANGED_ONLY_ABOVE} GPUs, only the changed ones above).",
            show_default=False,
        ),
    ] = None,
    previous: Annotated[
        Path | None,
        typer.Option(
            "--previous",
            metavar="PLAN.json",
            help="An earlier plan of this GPUPartitionPlan (this command's -o json or -o yaml "
            "output) to start from: the solver starts from its layouts where they rank best, "
            "and the new plan is never worse than it on the objective, so re-planning a fleet "
            "keeps a plan that is still as good. Layouts that no longer apply (GPUs gone or "
            "replaced, instances pods now use under policy none) are left as they are.",
        ),
    ] = None,
    gpu_operator: GpuOperatorSettings = gpu.DEFAULT_SETTINGS,
) -> None:
    """Preview what a GPUPartitionPlan would do, without touching anything.

    Shows per node and GPU the layout before and after as a picture of the memory slices, the
    NVML operations, the pods that would be evicted, the demand met and unmet (with reasons)
    and the solver's figures. -o json / -o yaml print the whole plan as one document.
    """
    cli = state(ctx)
    started = began()
    with StderrProgress() as progress:
        progress(f"reading {shown(plan_file)}")
        manifest = load_plan_manifest(plan_file)
        outcome = plan_input(
            manifest,
            Source(
                cluster=cluster, kubeconfig=kubeconfig, context=context, gpu_operator=gpu_operator
            ),
            catalog=cli.catalog,
            progress=progress,
            started=started,
            previous=previous,
        )
        progress("writing the plan")
    if html is not None:
        # Lazy (PLC0415): the report's templates cost 0.03 s, a percent of a 2,000-GPU preview.
        from migplan.operator.cli.html_report import render_report  # noqa: PLC0415

        write_atomically(
            html,
            render_report(outcome, name=manifest.metadata.name, catalog=cli.catalog),
            inputs=[plan_file, *([cluster] if cluster else []), *([previous] if previous else [])],
        )
        typer.echo(f"migplan: wrote the geometry report to {html}", err=True)
    if output is PreviewFormat.JSON:
        # pydantic's own serialiser: the same text as json.dumps(indent=2) of the dumped
        # dict, in 0.03 s instead of 0.2 s for a 7.5 MB plan of 8,000 GPUs.
        typer.echo(outcome.plan.model_dump_json(indent=2, by_alias=True))
    elif output is PreviewFormat.YAML:
        document = outcome.plan.model_dump(mode="json", by_alias=True)
        typer.echo(yaml.safe_dump(document, sort_keys=False), nl=False)
    else:
        print_preview(outcome, name=manifest.metadata.name, catalog=cli.catalog, all_gpus=all_gpus)
