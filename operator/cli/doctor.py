"""`migplan doctor`: read-only preflight of a GPU Operator cluster (or an inventory file)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer

from migplan.operator.cli import gpu_operator_options as gpu
from migplan.operator.cli.context import (
    ClusterOpt,
    ContextOpt,
    KubeconfigOpt,
    OutputFormat,
    console,
    new_table,
    print_document,
)
from migplan.operator.cli.files import load_inventory, load_plan_manifest
from migplan.operator.cli.progress import StderrProgress
from migplan.operator.gpu_operator import GpuOperatorSettings
from migplan.operator.preflight.checks import Finding, Severity, preflight, summary
from migplan.operator.preflight.screen import inventory_facts
from migplan.planner.api.spec import Actuator

STYLE = {
    Severity.OK: "green",
    Severity.INFO: "cyan",
    Severity.WARNING: "yellow",
    Severity.BLOCKING: "bold red",
}


@gpu.with_gpu_operator
def doctor(
    cluster: ClusterOpt = None,
    plan: Annotated[
        Path | None,
        typer.Option(
            "--plan",
            metavar="PLAN.yaml",
            help="Check only the nodes this GPUPartitionPlan selects, for its actuator.",
        ),
    ] = None,
    actuator: Annotated[
        Actuator | None,
        typer.Option(
            help="Check for this actuator (default: the plan's, else agent): mig-manager must "
            "run on the nodes it changes; the agent needs mig-manager kept off them."
        ),
    ] = None,
    show_all: Annotated[
        bool, typer.Option("--all", help="Also list the checks that passed.")
    ] = False,
    output: Annotated[
        OutputFormat, typer.Option("--output", "-o", help="text, json or yaml.")
    ] = OutputFormat.TEXT,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    gpu_operator: GpuOperatorSettings = gpu.DEFAULT_SETTINGS,
) -> None:
    """Check that migplan's changes will take effect, without changing anything.

    Per GPU node: the device plugin's MIG strategy (GFD's nvidia.com/mig.strategy label; only
    `mixed` advertises nvidia.com/mig-<profile>), whether mig-manager runs there and who owns
    nvidia.com/mig.config, whether the device plugin and GPU feature discovery run there,
    whether migplan's agent reports the node, can load NVML, and sees the profiles migplan
    expects; for the cluster, the ClusterPolicy's CDI mode. Each finding comes with a fix.

    Live by default (the kubeconfig's cluster, read-only); with --cluster, offline on an
    inventory file, where only the node labels can be checked. Exits 1 when a finding
    blocks (the operator would refuse to change that node), 0 otherwise.
    """
    settings = gpu_operator
    manifest = load_plan_manifest(plan) if plan is not None else None
    chosen = actuator or (manifest.spec.actuator if manifest else None) or Actuator.AGENT
    with StderrProgress() as progress:
        if cluster is not None:
            progress(f"reading {cluster}")
            facts = inventory_facts(load_inventory(cluster))
        else:
            progress("reading the live cluster's nodes and GPU Operator pods")
            # Lazy (PLC0415): the Kubernetes client (and kopf) add ~0.5 s to every command.
            from migplan.operator.kube.connect import connect  # noqa: PLC0415
            from migplan.operator.preflight.facts import live_facts  # noqa: PLC0415

            api = connect(kubeconfig=kubeconfig, context=context)
            facts = live_facts(api, settings=settings)
    if manifest is not None:
        selector = manifest.spec.node_selector
        facts = dataclasses.replace(
            facts, nodes=tuple(n for n in facts.nodes if selector.matches(dict(n.labels)))
        )
    findings = preflight(facts, actuator=chosen, settings=settings)
    blocked = any(f.severity is Severity.BLOCKING for f in findings)
    if output.structured:
        print_document(_document(findings, chosen, facts.live), output)
    else:
        _print(findings, chosen, live=facts.live, show_all=show_all, nodes=len(facts.nodes))
    if blocked:
        raise typer.Exit(1)


def _document(findings: list[Finding], actuator: Actuator, live: bool) -> dict[str, object]:
    passed, reason, message = summary(findings)
    return {
        "actuator": actuator.value,
        "live": live,
        "passed": passed,
        "reason": reason,
        "message": message,
        "findings": [
            {
                "node": f.node or None,
                "check": f.check,
                "severity": f.severity.value,
                "message": f.message,
                "fix": f.fix or None,
            }
            for f in findings
        ],
    }


def _print(
    findings: list[Finding], actuator: Actuator, *, live: bool, show_all: bool, nodes: int
) -> None:
    out = console()
    where = "live cluster" if live else "inventory file (labels only: run live for the rest)"
    out.print(f"[bold]migplan doctor[/]: {nodes} GPU nodes, actuator {actuator.value}, {where}")
    shown = [f for f in findings if show_all or f.severity is not Severity.OK]
    if shown:
        table = new_table("node", "check", "result", "finding", box=None, show_lines=False)
        for f in shown:
            style = STYLE[f.severity]
            table.add_row(
                f.node or "(cluster)", f.check, f"[{style}]{f.severity.value}[/]", f.message
            )
        out.print(table)
        fixes = [f for f in shown if f.fix]
        if fixes:
            out.print("[bold]fix[/]")
            for f in fixes:
                # One line each, never wrapped: a command must copy whole.
                out.print(f"  {f.node or '(cluster)'} {f.check}: {f.fix}", soft_wrap=True)
    counts = {s: sum(1 for f in findings if f.severity is s) for s in Severity}
    passed, _, _ = summary(findings)
    verdict = "[green]ready[/]" if passed else "[bold red]some nodes would be refused[/]"
    out.print(
        f"{verdict}: {counts[Severity.BLOCKING]} blocking, {counts[Severity.WARNING]} warnings, "
        f"{counts[Severity.INFO]} notes, {counts[Severity.OK]} checks passed"
        + ("" if show_all else " (--all lists them)")
    )
