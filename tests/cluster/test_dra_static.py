"""DRA static mode end to end: the agent lays out the GPU, NVIDIA's DRA kubelet plugin
(simulated) republishes its MIG devices, and the real scheduler allocates a pending claim;
the instance a running claim holds is kept."""

from __future__ import annotations

import json
import time

import pytest
from dra_objects import MIG_CLASS, claim_and_pod, pod_phase, unschedulable
from operator_proc import running_operator
from pools import ALWAYS_OPEN, apply, build_pool, make_plan, plan_status
from rollout_records import rollout_nodes
from waiting import wait_for

pytestmark = pytest.mark.cluster

NS = "drs"
POOL = {"key": "migplan.io/pool", "operator": "Equal", "value": NS, "effect": "NoSchedule"}


def claimed_pod(name: str, profile: str, *, count: int = 1, ns: str = NS) -> list[dict]:
    """A claim for `count` devices of `profile` and its pod, in pool (and namespace) `ns`."""
    return claim_and_pod(
        name,
        profile,
        namespace=ns,
        node_selector={"migplan.io/pool": ns},
        tolerations=({**POOL, "value": ns},),
        count=count,
    )


def static_plan(ns: str = NS) -> dict:
    """A static-mode plan for pool `ns`, its demand the pending pods of namespace `ns`."""
    return make_plan(
        ns, ns, window=ALWAYS_OPEN, policy={"disruption": "none"}, dra={"mode": "static"}
    )


def phase(cp, name: str) -> str | None:
    return pod_phase(cp, name, namespace=NS)


def published(cp) -> dict[str, str]:
    """Device name -> MIG device UUID, as the node's ResourceSlice publishes them."""
    slices = json.loads(cp.kubectl("get", "resourceslices", "-o", "json").stdout)["items"]
    return {
        d["name"]: d["attributes"]["uuid"]["string"]
        for s in slices
        if s["spec"].get("nodeName") == f"{NS}-a"
        for d in s["spec"].get("devices", [])
    }


def test_static_mode_lays_out_and_the_dra_plugin_republishes(crds, operator_kubeconfig) -> None:
    cp = crds
    apply(cp, MIG_CLASS)
    fleet = build_pool(cp, NS, {f"{NS}-a": "1g.10gb@0+3g.40gb@4"}, dra=True)
    try:
        apply(cp, *claimed_pod("busy", "3g.40gb"))
        wait_for(lambda: phase(cp, "busy") == "Running", "the 3g claim's pod to run")
        before = published(cp)
        assert set(before) == {"gpu-0-mig-1g10gb-19-0", "gpu-0-mig-3g40gb-9-4"}
        apply(cp, *claimed_pod("waiting", "2g.20gb"))
        wait_for(
            lambda: unschedulable(cp, "waiting", namespace=NS), "the 2g claim to find no device"
        )
        pending_since = time.monotonic()
        with running_operator(cp, kubeconfig=operator_kubeconfig):
            apply(cp, static_plan())
            wait_for(lambda: phase(cp, "waiting") == "Running", "the 2g claim's pod", timeout=90)
            waited = time.monotonic() - pending_since
            status = wait_for(
                lambda: (s := plan_status(cp, NS)).get("phase") == "Ready" and s, "Ready"
            )
        record = rollout_nodes(cp, NS, status)[f"{NS}-a"]
        assert record["step"] == "Done", record
        after = published(cp)
        # The held 3g instance is the same MIG device; the 2g is new.
        assert after["gpu-0-mig-3g40gb-9-4"] == before["gpu-0-mig-3g40gb-9-4"]
        assert any(name.startswith("gpu-0-mig-2g20gb-14-") for name in after)
        assert phase(cp, "busy") == "Running"
        assert fleet.dra.publications.count(f"{NS}-a") >= 2  # published again after the change
        print(f"static: pending -> Running {waited:.1f} s (operator start and planning included)")
    finally:
        fleet.stop()


def test_a_claim_for_two_devices_gets_a_node_that_holds_both(crds, operator_kubeconfig) -> None:
    # One free 1g.10gb on each node: two fleet-wide, but the scheduler gives a claim devices
    # of one node only. Counted fleet-wide, the demand looked met and nothing changed.
    cp, ns = crds, "drp"
    apply(cp, MIG_CLASS)
    fleet = build_pool(cp, ns, {f"{ns}-a": "1g.10gb@0", f"{ns}-b": "1g.10gb@0"}, dra=True)
    try:
        apply(cp, *claimed_pod("pair", "1g.10gb", count=2, ns=ns))
        wait_for(lambda: unschedulable(cp, "pair", namespace=ns), "no node to hold both")
        with running_operator(cp, kubeconfig=operator_kubeconfig):
            apply(cp, static_plan(ns))
            wait_for(
                lambda: pod_phase(cp, "pair", namespace=ns) == "Running",
                "the pair's pod",
                timeout=90,
            )
            status = wait_for(
                lambda: (s := plan_status(cp, ns)).get("phase") == "Ready" and s, "Ready"
            )
        (pair,) = status["plan"]["demand"]
        assert pair["perPod"] == [{"profiles": ["1g.10gb"], "count": 2}]
        assert pair["met"] == 1
        claimed = json.loads(
            cp.kubectl("get", "resourceclaim", "-n", ns, "pair", "-o", "json").stdout
        )
        results = claimed["status"]["allocation"]["devices"]["results"]
        assert len(results) == 2
        assert len({r["pool"] for r in results}) == 1  # both devices from one node's pool
        changed = [n for n, r in rollout_nodes(cp, ns, status).items() if r["step"] == "Done"]
        assert len(changed) == 1
    finally:
        fleet.stop()
