"""Test pools of simulated GPU nodes on the real control plane, and the plan and pod helpers
the rollout tests share."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from nodes import gpu_node, mig_deployment, mig_pod, reported
from waiting import wait_for

from migplan.operator.controller.partitions import PartitionBootstrap
from migplan.operator.kube.connect import connect
from migplan.operator.sim.fleet import SimulatedFleet, emulated_node
from migplan.planner.hardware.catalog import default_catalog

ALWAYS_OPEN = {"start": "* * * * *", "duration": "1h"}


def closed_window() -> dict:
    """A daily one-hour window that starts twelve hours from now."""
    hour = (datetime.now(UTC) + timedelta(hours=12)).hour
    return {"start": f"0 {hour} * * *", "duration": "1h"}


def make_plan(name: str, pool: str, *, window: dict, **spec) -> dict:
    return {
        "apiVersion": "migplan.io/v1alpha1",
        "kind": "GPUPartitionPlan",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"matchLabels": {"migplan.io/pool": pool}},
            "demand": {
                "fromPendingPods": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": pool}},
                    "priority": 10,
                }
            },
            "policy": {"disruption": "evict"},
            "window": window,
            "rollout": {"maxUnavailable": 1, "drainTimeout": "20s"},
            **spec,
        },
    }


def apply(cp, *objects: dict) -> None:
    """kubectl apply `objects`, 200 to a request (fleets of a thousand nodes apply in one go)."""
    items = list(objects)
    for start in range(0, len(items), 200):
        cp.kubectl(
            "apply",
            "-f",
            "-",
            stdin=json.dumps(
                {"apiVersion": "v1", "kind": "List", "items": items[start : start + 200]}
            ),
            timeout=300,
        )


def build_pool(
    cp,
    pool: str,
    layouts: dict[str, str],
    *,
    labels: dict[str, str] | None = None,
    kubeconfig: Path | None = None,
    dra: bool = False,
) -> SimulatedFleet:
    """One-GPU H100 nodes labelled for `pool` (and `labels`), with the given layouts, their
    fleet running (its agents and device plugin talking to the API as `kubeconfig` says, the
    admin by default); with `dra`, NVIDIA's DRA kubelet plugin publishes their MIG devices."""
    catalog = default_catalog()
    apply(
        cp,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": pool}},
        *(gpu_node(n, product="NVIDIA-H100-80GB-HBM3", pool=pool, labels=labels) for n in layouts),
    )
    api = connect(kubeconfig=str(cp.kubeconfig))
    nodes = {
        n: emulated_node(["H100-80GB"], [layout], catalog=catalog) for n, layout in layouts.items()
    }
    # What a long-running operator has done by now: every node has a NodePartition its agent
    # reports in (so no test races the agents' first report).
    bootstrap = PartitionBootstrap(api)
    for name in layouts:
        bootstrap.ensure(node=name, uid=api.core.get_node(name=name).metadata.uid)
    fleet_api = connect(kubeconfig=str(kubeconfig)) if kubeconfig else api
    fleet = SimulatedFleet(
        api=fleet_api, nodes=nodes, catalog=catalog, interval=0.3, dra=dra
    ).start()
    wait_for(lambda: reported(cp) >= set(layouts), "the agents' first report")
    wait_for(lambda: ready(cp, *layouts), "the nodes to be Ready")
    return fleet


def pod(cp, namespace: str, name: str) -> dict | None:
    result = cp.kubectl("get", "pod", "-n", namespace, name, "-o", "json", check=False)
    return json.loads(result.stdout) if result.returncode == 0 else None


def running(cp, namespace: str, *names: str) -> bool:
    pods = [pod(cp, namespace, n) for n in names]
    return all(p and p["status"].get("phase") == "Running" for p in pods)


def plan_status(cp, name: str) -> dict:
    return json.loads(cp.kubectl("get", "gpp", name, "-o", "json").stdout).get("status", {})


def node_obj(cp, name: str) -> dict:
    return json.loads(cp.kubectl("get", "node", name, "-o", "json").stdout)


def layout_of(fleet: SimulatedFleet, node: str) -> str:
    return str(fleet.nodes[node].layout(0))


def pods_of(cp, namespace: str, app: str) -> list[dict]:
    return json.loads(
        cp.kubectl("get", "pods", "-n", namespace, "-l", f"app={app}", "-o", "json").stdout
    )["items"]


def app_running(cp, namespace: str, *apps: str) -> bool:
    return all(
        (pods := pods_of(cp, namespace, app))
        and all(p["status"].get("phase") == "Running" for p in pods)
        for app in apps
    )


def unschedulable(cp, namespace: str, *names: str) -> bool:
    """Whether the scheduler turned every pod away for want of a MIG instance (what migplan
    counts as demand; a node not Ready yet is turned away for its taint instead)."""
    return all(
        any(
            c.get("reason") == "Unschedulable" and "nvidia.com/mig-" in c.get("message", "")
            for c in (pod(cp, namespace, n) or {}).get("status", {}).get("conditions", [])
        )
        for n in names
    )


def ready(cp, *nodes: str) -> bool:
    """Whether kwok reports every node Ready and the node controller has lifted its
    not-ready taint (until then the scheduler turns pods away for the taint)."""
    for name in nodes:
        node = json.loads(cp.kubectl("get", "node", name, "-o", "json").stdout)
        conditions = {c["type"]: c["status"] for c in node["status"].get("conditions", [])}
        taints = {t["key"] for t in node["spec"].get("taints", [])}
        if conditions.get("Ready") != "True" or "node.kubernetes.io/not-ready" in taints:
            return False
    return True


def uids(cp, namespace: str, *apps: str) -> dict[str, str]:
    """Pod name -> uid of the pods of `apps` (Deployments) in `namespace`."""
    return {
        p["metadata"]["name"]: p["metadata"]["uid"] for a in apps for p in pods_of(cp, namespace, a)
    }


def start_running(cp, pool: str, *apps: str) -> dict[str, str]:
    """One-replica Deployments of 1g.10gb pods in `pool`, running; their pods' uids."""
    apply(cp, *(mig_deployment(a, profile="1g.10gb", namespace=pool, pool=pool) for a in apps))
    wait_for(lambda: app_running(cp, pool, *apps), "the running pods")
    return uids(cp, pool, *apps)


def add_pending(cp, pool: str, count: int, profile: str = "3g.40gb") -> list[str]:
    """`count` pods of `profile` in `pool` that no node can take yet; their names."""
    names = [f"want-{i}" for i in range(count)]
    apply(cp, *(mig_pod(n, profile=profile, namespace=pool, pool=pool) for n in names))
    wait_for(lambda: unschedulable(cp, pool, *names), "the new pods to be unschedulable")
    return names


def in_hand(cp, plan: str) -> str | None:
    """A node of `plan`'s rollout that is in hand now, if any."""
    in_hand = (plan_status(cp, plan).get("rollout") or {}).get("inHand") or []
    return in_hand[0] if in_hand else None


@contextmanager
def agents_held(fleet: SimulatedFleet) -> Iterator[None]:
    """Hold the fleet's sweep (every agent and the device plugin) until the block ends.

    A rollout on two idle simulated nodes takes about a second, quicker than a test polls for
    a node in hand; with the agents held, the node the operator has handed over waits in
    Verifying, so the test acts (kills a leader, restarts etcd) while the node is in hand."""
    gate = threading.Event()

    def hold(_node: str) -> None:
        gate.wait(timeout=300)

    fleet.hooks.append(hold)
    try:
        yield
    finally:
        gate.set()
        fleet.hooks.remove(hold)
