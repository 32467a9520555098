"""`migplan export mig-parted`: a plan as configuration for NVIDIA's mig-parted."""

from __future__ import annotations

import typer
import yaml

from migplan.operator.cli import began
from migplan.operator.cli import gpu_operator_options as gpu
from migplan.operator.cli.context import ClusterOpt, ContextOpt, KubeconfigOpt, PlanFileArg, state
from migplan.operator.cli.files import load_plan_manifest, shown
from migplan.operator.cli.preview import Source, plan_input
from migplan.operator.cli.progress import StderrProgress
from migplan.operator.gpu_operator import GpuOperatorSettings
from migplan.planner.export.migparted import mig_parted_config

app = typer.Typer(
    help="Write a plan in another tool's format.", no_args_is_help=True, add_completion=False
)


@app.command("mig-parted")
@gpu.with_gpu_operator
def mig_parted(
    ctx: typer.Context,
    plan_file: PlanFileArg,
    cluster: ClusterOpt = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    gpu_operator: GpuOperatorSettings = gpu.DEFAULT_SETTINGS,
) -> None:
    """Print the plan as a mig-parted config (version v1): one mig-configs entry per node,
    named migplan-<node>, that `nvidia-mig-parted apply -f FILE -c migplan-<node>` accepts.

    mig-parted rebuilds every instance of a GPU it changes and picks placements itself, so
    the plan is made as for the mig-manager actuator: every changed GPU fully drained.
    """
    cli = state(ctx)
    started = began()
    with StderrProgress() as progress:
        progress(f"reading {shown(plan_file)}")
        manifest = load_plan_manifest(plan_file)
        spec = manifest.spec.model_copy(
            update={"policy": manifest.spec.policy.model_copy(update={"whole_gpu_rebuild": True})}
        )
        manifest = manifest.model_copy(update={"spec": spec})
        source = Source(
            cluster=cluster, kubeconfig=kubeconfig, context=context, gpu_operator=gpu_operator
        )
        plan = plan_input(
            manifest, source, catalog=cli.catalog, progress=progress, started=started
        ).plan
    evicted = sorted({pod for gpu in plan.gpus for pod in gpu.evict})
    if not plan.gpus:
        typer.echo(
            f"migplan: warning: the nodeSelector of {manifest.metadata.name} selects no GPU "
            "node: the config has no entries",
            err=True,
        )
    else:
        typer.echo(
            "migplan: note: mig-parted rebuilds every GPU it changes, so this plan is made "
            "with policy.wholeGpuRebuild: its targets and input hash differ from `migplan "
            "preview`'s; "
            + (f"pods evicted: {', '.join(evicted)}" if evicted else "no pod is evicted"),
            err=True,
        )
    typer.echo(
        f"# mig-parted config for GPUPartitionPlan {manifest.metadata.name} "
        f"(input {plan.input_hash})"
    )
    typer.echo(yaml.safe_dump(mig_parted_config(plan), sort_keys=False), nl=False)
