"""Whether the cluster can do what a plan's `dra.mode` asks of it."""

from __future__ import annotations

from migplan.operator.kube.seam import Kube
from migplan.planner.api.spec import DraMode, GPUPartitionPlan
from migplan.planner.errors import MigplanInputError


def check_mode(manifest: GPUPartitionPlan, *, api: Kube) -> None:
    """Raise MigplanInputError, saying what is missing, when the cluster cannot do the plan's
    `dra.mode`."""
    dra = manifest.spec.dra
    if dra is None or manifest.spec.dry_run:
        return
    if not api.dra.served():
        raise MigplanInputError(
            f"dra.mode {dra.mode.value}: the API server does not serve resource.k8s.io/v1 "
            "(Dynamic Resource Allocation, GA in Kubernetes 1.34)"
        )
    if dra.mode is DraMode.STEER and not api.dra.taint_rules_served():
        raise MigplanInputError(
            "dra.mode steer: the API server does not serve DeviceTaintRules "
            "(resource.k8s.io/v1beta2 devicetaintrules; in Kubernetes 1.36 enable the "
            "DRADeviceTaintRules feature gate on kube-apiserver, kube-scheduler and "
            "kube-controller-manager, and --runtime-config=resource.k8s.io/v1beta2=true)"
        )
