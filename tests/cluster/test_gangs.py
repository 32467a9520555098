"""Gangs on the real control plane: a Kubernetes PodGroup (scheduling.k8s.io/v1alpha2, gang
policy) whose pods the real kube-scheduler's GangScheduling plugin binds all together or not
at all; migplan reads the PodGroup, plans for the whole gang and the pods bind together.
Volcano's and the coscheduling PodGroups are read from their real CRDs (build.sh) and
planned all or nothing too."""

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


VOLCANO = "scheduling.volcano.sh/v1beta1"
COSCHEDULING = "scheduling.x-k8s.io/v1alpha1"


def _min_member_group(api_version: str, namespace: str, name: str, least: int) -> dict:
    """A PodGroup of Volcano's or the coscheduling plugin's (both say `minMember`)."""
    return {
        "apiVersion": api_version,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": least},
    }


def test_volcano_and_coscheduling_pod_groups_are_met_whole_or_not_at_all(
    crds, operator_kubeconfig
) -> None:
    """One empty H100. A Volcano gang of three 3g.40gb (two fit) and a coscheduling gang of
    two 2g.20gb. Pod by pod, two 3g.40gb would fill the GPU and neither gang could start; all
    or none, the Volcano gang is not met, no 3g.40gb is made, and the pair runs."""
    cp = crds
    pool = "gang-vc"
    cp.install_gang_crds()
    fleet = build_pool(cp, pool, {f"{pool}-a": "-"})
    big = [f"big-{i}" for i in range(3)]
    pair = [f"pair-{i}" for i in range(2)]
    try:
        apply(
            cp,
            _min_member_group(VOLCANO, pool, "big", 3),
            _min_member_group(COSCHEDULING, pool, "pair", 2),
        )
        members = []
        for name in big:
            body = mig_pod(name, profile="3g.40gb", namespace=pool, pool=pool)
            body["metadata"].setdefault("annotations", {})["scheduling.k8s.io/group-name"] = "big"
            members.append(body)
        for name in pair:
            body = mig_pod(name, profile="2g.20gb", namespace=pool, pool=pool)
            body["metadata"].setdefault("labels", {})["scheduling.x-k8s.io/pod-group"] = "pair"
            members.append(body)
        apply(cp, *members)
        with running_operator(cp, kubeconfig=operator_kubeconfig):
            apply(cp, make_plan(pool, pool, window=ALWAYS_OPEN))
            wait_for(lambda: running(cp, pool, *pair), "the coscheduled pair to run", timeout=120)
            status = plan_status(cp, pool)
        gangs = {g["name"]: g for g in status["plan"]["gangs"]}
        volcano = gangs[f"VolcanoPodGroup {pool}/big"]
        assert (volcano["minCount"], volcano["met"], volcano["admitted"]) == (3, 0, False)
        assert "all or none" in volcano["reason"]
        cosched = gangs[f"CoschedulingPodGroup {pool}/pair"]
        assert (cosched["minCount"], cosched["met"], cosched["admitted"]) == (2, 2, True)
        after = status["plan"]["nodes"][f"{pool}-a"][0]["after"]
        assert "3g.40gb" not in after
        assert not any((pod(cp, pool, n) or {}).get("spec", {}).get("nodeName") for n in big)
    finally:
        fleet.stop()
