"""Gangs on the real control plane: a Kubernetes PodGroup (scheduling.k8s.io/v1alpha2, gang
policy) whose pods the real kube-scheduler's GangScheduling plugin binds all together or not
at all; migplan reads the PodGroup, plans for the whole gang and the pods bind together."""

from __future__ import annotations

import pytest
from nodes import mig_pod
from operator_proc import running_operator
from pools import ALWAYS_OPEN, apply, build_pool, make_plan, plan_status, pod, running
from waiting import wait_for

pytestmark = pytest.mark.cluster


def _pod_group(namespace: str, name: str, least: int) -> dict:
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"schedulingPolicy": {"gang": {"minCount": least}}},
    }


def _member(name: str, *, pool: str, group: str) -> dict:
    body = mig_pod(name, profile="2g.20gb", namespace=pool, pool=pool)
    body["spec"]["schedulingGroup"] = {"podGroupName": group}
    return body


def _waiting(cp, namespace: str, *names: str) -> bool:
    """Every pod still unbound, and the scheduler has looked at each (PodScheduled False)."""
    found = [pod(cp, namespace, n) or {} for n in names]
    return all(
        not p.get("spec", {}).get("nodeName")
        and any(
            c.get("type") == "PodScheduled" and c.get("status") == "False"
            for c in p.get("status", {}).get("conditions", [])
        )
        for p in found
    )


def test_a_pod_group_of_three_is_reshaped_for_and_binds_together(crds, operator_kubeconfig) -> None:
    cp = crds
    pool = "gang-pg"
    # Two empty H100s: three 2g.20gb fit on one, but no GPU offers any yet.
    fleet = build_pool(cp, pool, {f"{pool}-a": "-", f"{pool}-b": "-"})
    names = [f"train-{i}" for i in range(3)]
    try:
        apply(cp, _pod_group(pool, "train", 3))
        apply(cp, *(_member(n, pool=pool, group="train") for n in names))
        wait_for(lambda: _waiting(cp, pool, *names), "the gang's pods to wait", timeout=60)
        with running_operator(cp, kubeconfig=operator_kubeconfig):
            apply(cp, make_plan(pool, pool, window=ALWAYS_OPEN))
            wait_for(lambda: running(cp, pool, *names), "the gang to run", timeout=120)
            status = plan_status(cp, pool)
        (gang,) = status["plan"]["gangs"]
        assert gang["name"] == f"PodGroup {pool}/train"
        assert (gang["minCount"], gang["met"], gang["admitted"]) == (3, 3, True)
        bound = {pod(cp, pool, n)["spec"]["nodeName"] for n in names}
        assert bound <= {f"{pool}-a", f"{pool}-b"}
    finally:
        fleet.stop()
