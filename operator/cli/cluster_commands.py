"""`migplan status` and `migplan rebalance`: a plan's rollout, and a re-plan on demand."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from migplan.operator.cli.context import (
    ContextOpt,
    KubeconfigOpt,
    OutputFormat,
    console,
    new_table,
    print_document,
)
from migplan.operator.cli.progress import StderrProgress
from migplan.operator.controller.selection import PlanSelector
from migplan.planner.errors import MigplanInputError
from migplan.planner.rollout.records import NodeStep

if TYPE_CHECKING:  # the Kubernetes client only where a cluster is read
    from migplan.operator.kube.connect import KubeClient

PlanArg = Annotated[str, typer.Argument(metavar="PLAN", help="GPUPartitionPlan name.")]
STEP_STYLE = {
    NodeStep.DONE: "green",
    NodeStep.ROLLED_BACK: "yellow",
    NodeStep.FAILED: "red",
    NodeStep.PENDING: "dim",
}


def _connect(kubeconfig: str | None, context: str | None) -> KubeClient:
    """The cluster of the kubeconfig, connected once per command."""
    # Lazy (PLC0415): the Kubernetes client (and kopf) add ~0.5 s to every command.
    from migplan.operator.kube.connect import connect  # noqa: PLC0415

    return connect(kubeconfig=kubeconfig, context=context)


def _plans(api: KubeClient, name: str | None) -> list[dict[str, Any]]:
    if name is None:
        plans = [dict(p) for p in api.plans.list_plans()]
        return sorted(plans, key=lambda p: str(p["metadata"]["name"]))
    found = api.plans.get_plan(name=name)
    if found is None:
        raise MigplanInputError(f"no GPUPartitionPlan named {name!r} (see `kubectl get gpp`)")
    return [dict(found)]


PART_OF = "app.kubernetes.io/part-of=migplan"
"""The label deploy/ and the chart put on every object, the operator's Deployment too."""


@dataclass(frozen=True)
class _Operator:
    """A migplan operator Deployment and the plans it acts on."""

    name: str
    ready: int
    replicas: int
    selector: PlanSelector

    def line(self, namespace: str) -> str:
        return (
            f"operator {namespace}/{self.name}: {self.ready}/{self.replicas} ready, acts on "
            f"{self.selector}"
        )


def _operators(api: KubeClient, namespace: str) -> list[_Operator]:
    """The migplan operators (Deployments running `migplan operator`) in `namespace`."""
    found = []
    for deployment in api.core.list_deployments(namespace=namespace, label_selector=PART_OF):
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            args = [*container.get("command", [])[1:], *container.get("args", [])]
            if not args or args[0] != "operator":
                continue
            env = {e["name"]: e.get("value", "") for e in container.get("env", [])}
            found.append(
                _Operator(
                    name=deployment["metadata"]["name"],
                    ready=int((deployment.get("status") or {}).get("readyReplicas") or 0),
                    replicas=int(deployment["spec"].get("replicas", 1)),
                    selector=PlanSelector.parse(
                        _flag(args, "--plan-selector") or env.get("MIGPLAN_PLAN_SELECTOR", "")
                    ),
                )
            )
    if not found:
        raise MigplanInputError(
            f"no migplan operator in namespace {namespace!r} (a Deployment labelled {PART_OF} "
            "running `migplan operator`): -n names the namespace a release is installed in"
        )
    return found


def _flag(args: list[str], name: str) -> str | None:
    """The value of `--name=VALUE` or `--name VALUE` in `args`, if given."""
    for n, arg in enumerate(args):
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
        if arg == name and n + 1 < len(args):
            return args[n + 1]
    return None


def _summary_line(plan: dict[str, Any]) -> str:
    status = plan.get("status") or {}
    parts = [
        f"[bold]{plan['metadata']['name']}[/]",
        status.get("phase") or "not planned yet",
        f"demand {status.get('demandMet', '?')}",
        f"nodes done {status.get('progress', '-')}",
    ]
    if status.get("nextWindow"):
        opened = "open" if status.get("windowOpen") else "closed"
        parts.append(f"window {opened}, next {status['nextWindow']}")
    if status.get("nextRebalance"):
        parts.append(f"next rebalance {status['nextRebalance']}")
    return "  ".join(parts)


def _rollout_nodes(api: KubeClient, plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The records of the plan's current rollout (from its nodes' NodePartitions; an older
    migplan kept them in the plan's status), node -> record as written."""
    # Lazy (PLC0415): the Kubernetes client (and kopf) add ~0.5 s to every command.
    from migplan.operator.controller.rollout_book import read_records  # noqa: PLC0415

    rollout = (plan.get("status") or {}).get("rollout") or {}
    input_hash = rollout.get("id") or rollout.get("inputHash")
    found = (
        read_records(api, plan=plan["metadata"]["name"], input_hash=input_hash)
        if input_hash
        else {}
    )
    if found:
        return {n: r.model_dump(mode="json", by_alias=True) for n, r in found.items()}
    legacy = rollout.get("nodes")
    return {n: r for n, r in legacy.items() if r} if isinstance(legacy, dict) else {}


def _nodes_table(nodes: dict[str, dict[str, Any]]) -> Table | None:
    if not nodes:
        return None
    table = new_table("#", "node", "step", "since", "evict", "target", "message", box=None)
    for record in sorted((r for r in nodes.values() if r), key=lambda r: r.get("order", 0)):
        step = record.get("step", "?")
        style = STEP_STYLE.get(step, "cyan")
        table.add_row(
            str(record.get("order", "")),
            record.get("node", ""),
            f"[{style}]{step}[/]",
            record.get("since") or "",
            ", ".join(record.get("evict") or []) or "-",
            " ".join(f"{t['index']}:{t['layout']}" for t in record.get("gpus") or []),
            record.get("message") or "",
        )
    return table


def status(
    plan: Annotated[
        str | None, typer.Argument(metavar="[PLAN]", help="A plan name; all plans if omitted.")
    ] = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace",
            "-n",
            help="A namespace a migplan operator runs in (a chart release's): show that "
            "operator (replicas ready, the plans its --plan-selector takes) and only its plans. "
            "Default: every plan.",
        ),
    ] = None,
    output: Annotated[OutputFormat, typer.Option("--output", "-o", help="text, json or yaml.")] = (
        OutputFormat.TEXT
    ),
) -> None:
    """Show plans and the progress of their rollouts, node by node.

    For each plan: phase, demand met, nodes done, the maintenance window (open or closed and
    when the next one starts) and the next rebalance; then per node in rollout order its
    step (Pending, Cordoning, Evicting, Partitioning, Verifying, Uncordoning, Done,
    RolledBack, Failed), since when, the pods it evicts, its target and the latest message.
    """
    operators: list[_Operator] = []
    with StderrProgress() as progress:
        api = _connect(kubeconfig, context)
        if namespace is not None:
            progress(f"reading the operators in {namespace}")
            operators = _operators(api, namespace)
        progress("reading the plans")
        plans = _plans(api, plan)
        if operators:
            plans = [p for p in plans if any(o.selector.selects(_labels(p)) for o in operators)]
        progress("reading the rollouts' node records")
        records = {p["metadata"]["name"]: _rollout_nodes(api, p) for p in plans}
    if output.structured:
        print_document(
            output=output,
            document=[
                {
                    "name": p["metadata"]["name"],
                    "status": p.get("status") or {},
                    "rolloutNodes": records[p["metadata"]["name"]],
                }
                for p in plans
            ],
        )
        return
    out = console()
    for found in operators:
        out.print(found.line(str(namespace)), markup=False)
    if not plans:
        out.print("no GPUPartitionPlans")
    for item in plans:
        out.print(_summary_line(item))
        conditions = (item.get("status") or {}).get("conditions") or []
        for condition in conditions:
            if condition.get("status") == "True" and condition["type"] != "Planned":
                out.print(f"  {condition['type']}: {condition.get('message', '')}")
        scale_out = ((item.get("status") or {}).get("scaleOut") or {}).get("message")
        if scale_out:
            out.print(f"  Scale-out: {scale_out}")
        table = _nodes_table(records[item["metadata"]["name"]])
        if table is not None:
            out.print(table)


def _labels(plan: dict[str, Any]) -> dict[str, str]:
    return dict(plan["metadata"].get("labels") or {})


def rebalance(plan: PlanArg, kubeconfig: KubeconfigOpt = None, context: ContextOpt = None) -> None:
    """Ask the operator to re-plan PLAN now (as its rebalanceSchedule would).

    Sets the migplan.io/rebalance annotation to the current time; the operator plans again on
    its next tick (after any node in hand is finished) and rolls the result out in the
    window. For a schedule kept outside the plan, run this from a Kubernetes CronJob
    (deploy/examples/rebalance-cronjob.yaml).
    """
    # Lazy (PLC0415): the Kubernetes client (and kopf) add ~0.5 s to every command.
    from migplan.operator.controller.reconciler import REBALANCE  # noqa: PLC0415

    api = _connect(kubeconfig, context)
    _plans(api, plan)  # a clear error if it does not exist
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    api.plans.annotate_plan(name=plan, annotations={REBALANCE: stamp})
    typer.echo(f"rebalance of {plan} requested at {stamp}")
