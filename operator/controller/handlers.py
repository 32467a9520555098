"""kopf handlers for GPUPartitionPlan (cluster-scoped, migplan.io/v1alpha1)."""

from __future__ import annotations

from typing import Any

import kopf

from migplan.operator.controller.planning import plan_status
from migplan.operator.kube import client as kube
from migplan.planner.catalog import default_catalog
from migplan.planner.errors import MigplanInputError

GROUP, VERSION, PLURAL = "migplan.io", "v1alpha1", "gpupartitionplans"
_api: dict[str, Any] = {}


def configure(*, kubeconfig: str | None) -> None:
    """Where the handlers' own API calls go (kopf has its own connection)."""
    _api["client"] = kube.connect(kubeconfig=kubeconfig)


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """The pod's service account in a cluster, else the kubeconfig (KUBECONFIG)."""
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
def plan(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
    """Plan the GPUs the plan covers and record the result in status."""
    try:
        result = plan_status(body=dict(body), api=_api["client"], catalog=default_catalog())
    except MigplanInputError as exc:
        patch.status["phase"] = "Invalid"
        kopf.warn(body, reason="Invalid", message=str(exc))
        raise kopf.PermanentError(str(exc)) from None
    patch.status.update(result.status)
    kopf.info(body, reason="Planned", message=result.summary)
