"""Gangs read from the cluster: each PodGroup API where it is served, which pod joins which,
and the pods already scheduled (in-memory API server)."""

from __future__ import annotations

from migplan.operator.cluster_inventory import read_inventory
from migplan.operator.kube.gangs import GangApi
from migplan.operator.sim.api_server import InMemoryCluster

MIG = {"nvidia.com/mig-2g.20gb": "1"}


def _pod_group(cluster: InMemoryCluster, kind: GangApi, name: str, spec: dict) -> None:
    group, version = kind.group_version
    body = {
        "apiVersion": f"{group}/{version}",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": spec,
    }
    cluster.store.create(f"podgroups:{kind.value}", body, namespace="ml")


def _member(cluster: InMemoryCluster, name: str, *, node: str | None = None, **join) -> None:
    cluster.add_pod("ml", name, requests=MIG, node=node)
    cluster.store.patch("pods", name, join, namespace="ml")


def test_each_served_api_gives_its_gangs_and_their_pods() -> None:
    cluster = InMemoryCluster()
    cluster.gangs.serving = {GangApi.POD_GROUP, GangApi.VOLCANO}
    _pod_group(cluster, GangApi.POD_GROUP, "train", {"schedulingPolicy": {"gang": {"minCount": 3}}})
    _pod_group(cluster, GangApi.POD_GROUP, "loose", {"schedulingPolicy": {"basic": {}}})
    _pod_group(cluster, GangApi.VOLCANO, "sweep", {"minMember": 2})
    joined = {"spec": {"schedulingGroup": {"podGroupName": "train"}}}
    _member(cluster, "train-0", node="gpu-1", **joined)  # already bound: counts towards 3
    _member(cluster, "train-1", **joined)
    _member(cluster, "train-2", **joined)
    _member(cluster, "loose-0", spec={"schedulingGroup": {"podGroupName": "loose"}})
    _member(cluster, "sweep-0", metadata={"annotations": {"scheduling.k8s.io/group-name": "sweep"}})
    # Coscheduling is not served here: its label joins nothing.
    _member(cluster, "co-0", metadata={"labels": {"scheduling.x-k8s.io/pod-group": "sweep"}})
    inventory = read_inventory(cluster).inventory
    gangs = {(g.kind, g.name): (g.min_count, g.scheduled) for g in inventory.gangs}
    assert gangs == {("PodGroup", "train"): (3, 1), ("VolcanoPodGroup", "sweep"): (2, 0)}
    assert {p.name: p.gang for p in inventory.pending_pods} == {
        "train-1": "train",
        "train-2": "train",
        "loose-0": "",
        "sweep-0": "sweep",
        "co-0": "",
    }


def test_no_podgroup_api_means_pods_count_one_by_one() -> None:
    cluster = InMemoryCluster()
    _member(cluster, "train-0", spec={"schedulingGroup": {"podGroupName": "train"}})
    inventory = read_inventory(cluster).inventory
    assert inventory.gangs == ()
    assert [p.gang for p in inventory.pending_pods] == [""]
