"""`migplan operator --default-actuator`: plans that name no actuator follow the operator's
default, in planning (mig-manager rebuilds whole GPUs) as in rollout; a plan that names one
keeps it."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from nodes import GPU_OPERATOR_NAMESPACE, component_pod, gpu_node, report_partition

from migplan.operator.controller.reconciler import PlanController
from migplan.operator.kube.connect import connect
from migplan.planner.api.spec import Actuator
from migplan.planner.hardware.catalog import default_catalog

pytestmark = pytest.mark.cluster


def plan(name: str, actuator: str | None) -> dict:
    spec: dict = {
        "nodeSelector": {"matchLabels": {"migplan.io/pool": "default-actuator"}},
        "demand": {"profiles": [{"resource": "nvidia.com/mig-1g.10gb", "count": 2}]},
        "dryRun": True,
    }
    if actuator:
        spec["actuator"] = actuator
    return {
        "apiVersion": "migplan.io/v1alpha1",
        "kind": "GPUPartitionPlan",
        "metadata": {"name": name},
        "spec": spec,
    }


def demand_met(cp, name: str) -> str:
    return json.loads(cp.kubectl("get", "gpp", name, "-o", "json").stdout)["status"]["demandMet"]


# The GPU holds one 1g.10gb a pod uses; the plan wants two 1g.10gb in all, evicting nobody.
# The agent keeps the pod's instance and adds one: 2/2. mig-manager rebuilds whole GPUs, which
# would evict the pod, so under policy `none` the GPU stays as it is: 1/2.
@pytest.mark.parametrize(
    ("named", "default", "met"),
    [
        (None, Actuator.AGENT, "2/2"),
        (None, Actuator.MIG_MANAGER, "1/2"),
        ("agent", Actuator.MIG_MANAGER, "2/2"),  # the plan's own choice wins
    ],
)
def test_plans_without_an_actuator_follow_the_operators_default(
    crds, named: str | None, default: Actuator, met: str
) -> None:
    cp = crds
    node = gpu_node(
        "da-1", product="NVIDIA-H100-80GB-HBM3", labels={"migplan.io/pool": "default-actuator"}
    )
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(node))
    report_partition(cp, "da-1", layout="1g.10gb@0", in_use={"1g.10gb@0": "team/train-0"})
    # mig-manager runs on the node (preflight refuses mig-manager plans on nodes without it).
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(GPU_OPERATOR_NAMESPACE))
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(component_pod("da-1", "nvidia-mig-manager")))
    name = f"da-{default.value}-{named or 'unset'}"
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(plan(name, named)))
    controller = PlanController(
        api=connect(kubeconfig=str(cp.kubeconfig)),
        catalog=default_catalog(),
        events=lambda *_: None,
        default_actuator=default,
        clock=lambda: datetime.now(UTC),
    )
    try:
        controller.spec_changed(name)
        assert demand_met(cp, name) == met
    finally:
        cp.kubectl("delete", "gpp", name, "--wait=false", check=False)
        # Leave no schedulable MIG node behind for other tests' pods.
        cp.kubectl("delete", "node", "da-1", "--wait=false", check=False)
        cp.kubectl("delete", "nodepartition", "da-1", "--wait=false", check=False)
        cp.kubectl(
            "delete",
            "pod",
            "-n",
            "gpu-operator",
            "nvidia-mig-manager-da-1",
            "--wait=false",
            check=False,
        )
