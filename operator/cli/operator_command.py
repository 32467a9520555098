"""`migplan operator`: the GPUPartitionPlan controller (kopf)."""

from __future__ import annotations

from typing import Annotated

import typer

from migplan.operator.cli.context import KubeconfigOpt


def operator(
    kubeconfig: KubeconfigOpt = None,
    liveness: Annotated[
        str | None, typer.Option(help="kopf's liveness endpoint, e.g. http://0.0.0.0:8080/healthz.")
    ] = None,
    standalone: Annotated[
        bool, typer.Option(help="Run without peering (a single replica).")
    ] = False,
) -> None:
    """Run the operator: plan every GPUPartitionPlan and report it in status.

    Today it plans (and stops there, as for dryRun plans); rollout in maintenance windows is
    being built (issue #6).
    """
    import os

    import kopf

    from migplan.operator.controller import handlers

    if kubeconfig:
        os.environ["KUBECONFIG"] = kubeconfig  # kopf's login handler reads it
    handlers.configure(kubeconfig=kubeconfig)
    verbose = bool(os.environ.get("MIGPLAN_KOPF_VERBOSE"))
    kopf.configure(log_format=kopf.LogFormat.JSON, log_refkey="object", verbose=verbose)
    # A peering name makes peering mandatory in kopf, so only name it when peering is wanted.
    kopf.run(
        clusterwide=True,
        standalone=standalone,
        liveness_endpoint=liveness,
        peering_name=None if standalone else "migplan",
    )
