"""DRA steer mode end to end: DynamicMIG slots outside the plan are tainted, the real
scheduler's first fit lands on the plan, and a pending claim re-plans a slot free."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest
from dra_objects import (
    MIG_CLASS,
    allocated_device,
    claim_pod,
    claim_template,
    pod_phase,
    unschedulable,
)
from nodes import gpu_node
from operator_proc import running_operator
from pools import ALWAYS_OPEN, apply, plan_status
from waiting import wait_for

from migplan.operator.sim.dra_slices import PublishedGpu, mig_name, resource_slices
from migplan.planner.hardware.catalog import default_catalog

pytestmark = pytest.mark.cluster

H100 = default_catalog().model("H100-80GB")
NS = "steer"
SLOTS_PER_GPU = sum(len(p.starts) for p in H100.profiles)


def claim_pods(name: str, profile: str) -> list[dict]:
    """A pod whose ResourceClaimTemplate asks for one MIG device of `profile`."""
    return [
        claim_template(name, profile, namespace=NS),
        claim_pod(name, namespace=NS, template=name, node_selector={"migplan.io/pool": NS}),
    ]


def phase(cp, name: str) -> str | None:
    return pod_phase(cp, name, namespace=NS)


def steer_plan() -> dict:
    return {
        "apiVersion": "migplan.io/v1alpha1",
        "kind": "GPUPartitionPlan",
        "metadata": {"name": NS},
        "spec": {
            "nodeSelector": {"matchLabels": {"migplan.io/pool": NS}},
            "demand": {
                "profiles": [
                    {"resource": "nvidia.com/mig-4g.40gb", "count": 1, "priority": 5},
                    {"resource": "nvidia.com/mig-3g.40gb", "count": 1, "priority": 5},
                ],
                "fromPendingPods": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}},
                    "priority": 10,
                },
            },
            "window": ALWAYS_OPEN,
            "dra": {"mode": "steer"},
        },
    }


def allocated(cp, pod: str) -> str:
    return allocated_device(cp, pod, namespace=NS)


def rules(cp) -> list[dict]:
    return json.loads(
        cp.kubectl(
            "get",
            "devicetaintrules.v1beta2.resource.k8s.io",
            "-l",
            f"migplan.io/plan={NS}",
            "-o",
            "json",
        ).stdout
    )["items"]


def ready(cp) -> dict | None:
    status = plan_status(cp, NS)
    return status if status.get("phase") == "Ready" else None


def test_steer_mode_keeps_the_scheduler_on_the_plan(crds, operator_kubeconfig) -> None:
    cp = crds
    gpus = [PublishedGpu(minor=m, uuid=f"GPU-steer-{m}", model=H100) for m in (0, 1)]
    apply(
        cp,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        MIG_CLASS,
        gpu_node(
            "steer-1", product="NVIDIA-H100-80GB-HBM3", gpus=2, labels={"migplan.io/pool": NS}
        ),
        *resource_slices("steer-1", gpus, mode="dynamic"),
    )
    with running_operator(cp, kubeconfig=operator_kubeconfig):
        apply(cp, steer_plan())
        wait_for(lambda: ready(cp), "the steer plan to be Ready", timeout=90)
        # 4g + 3g fill one GPU: every other slot of both GPUs is tainted.
        assert len(rules(cp)) == 2 * SLOTS_PER_GPU - 2
        untainted = {
            mig_name(g.minor, p, s) for g in gpus for p in H100.profiles for s in p.starts
        } - {r["spec"]["deviceSelector"]["device"] for r in rules(cp)}
        assert len(untainted) == 2

        # First fit would give the 3g pod slot 0 and leave no place for a 4g; steered, both fit.
        apply(cp, *claim_pods("three", "3g.40gb"), *claim_pods("four", "4g.40gb"))
        wait_for(lambda: phase(cp, "three") == "Running", "the 3g pod to run")
        wait_for(lambda: phase(cp, "four") == "Running", "the 4g pod to run")
        held = {allocated(cp, "three"), allocated(cp, "four")}
        assert held == untainted

        # A claim no untainted slot serves waits; a re-plan frees a slot on the other GPU.
        apply(cp, *claim_pods("two", "2g.20gb"))
        wait_for(
            lambda: unschedulable(cp, "two", namespace=NS),
            "the 2g claim to find only tainted slots",
        )
        pending_since = time.monotonic()
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        cp.kubectl("annotate", "gpp", NS, f"migplan.io/rebalance={stamp}", "--overwrite")
        wait_for(lambda: phase(cp, "two") == "Running", "the 2g pod to run", timeout=90)
        waited = time.monotonic() - pending_since
        assert len(rules(cp)) == 2 * SLOTS_PER_GPU - 3
        # No running claim was disturbed.
        assert {allocated(cp, "three"), allocated(cp, "four")} == held
        assert phase(cp, "three") == phase(cp, "four") == "Running"
        print(f"pending -> Running after the re-plan was asked for: {waited:.1f} s")
        # Deleting the plan removes its taint rules: the driver's own order rules again.
        cp.kubectl("delete", "gpp", NS, "--timeout=60s")
        wait_for(lambda: not rules(cp), "the plan's taint rules to go", timeout=30)
