"""The operator's informer caches (`kube/informers.py`, `kube/cached.py`) on the real API
server: a planning pass reads from them what it reads from lists, follows changes through
the watches, and lists nothing after the caches are filled."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from nodes import gpu_node, mig_pod, report_partition
from operator_proc import running_operator
from pools import apply
from prometheus_client import REGISTRY
from waiting import wait_for

from migplan.operator.cluster_inventory import MIG_CAPABLE as MIG
from migplan.operator.cluster_inventory import read_inventory
from migplan.operator.kube.connect import connect
from migplan.operator.kube.informers import LAST_APPLIED, ClusterCache
from migplan.operator.pod_groups import GangReading

pytestmark = pytest.mark.cluster


def _requests(verb: str) -> Counter[str]:
    """migplan's API requests so far with `verb`, by resource (discovery, GET /apis, left
    out: a pass asks which APIs are served, a request independent of the cluster's size)."""
    found: Counter[str] = Counter()
    for family in REGISTRY.collect():
        for sample in family.samples:
            if sample.name == "migplan_api_requests_total" and sample.labels["verb"] == verb:
                found[sample.labels["resource"]] += int(sample.value)
    del found["-"]
    return found


@pytest.fixture
def stop_after() -> Iterator[Callable[[ClusterCache], None]]:
    """Caches to stop after the test: their informers would otherwise retry (and log) once
    the session's control plane is gone, up to the interpreter's exit."""
    made: list[ClusterCache] = []
    yield made.append
    for cache in made:
        cache.stop()


def _scene(cp, pool: str) -> list[str]:
    """Two GPU nodes of `pool` with their agents' reports, and a namespace of pending pods."""
    nodes = [f"{pool}-n{i}" for i in range(2)]
    apply(
        cp,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": pool}},
        *(gpu_node(n, product="NVIDIA-H100-80GB-HBM3", pool=pool) for n in nodes),
    )
    for node in nodes:
        report_partition(cp, node, layout="3g.40gb@0+3g.40gb@4")
    apply(cp, *(mig_pod(f"p{i}", profile="1g.10gb", namespace=pool, pool=pool) for i in range(3)))
    return nodes


def test_a_planning_pass_reads_from_the_caches_what_it_lists(crds, stop_after) -> None:
    cp = crds
    pool = f"inf-{uuid.uuid4().hex[:6]}"
    nodes = _scene(cp, pool)
    plain = connect(kubeconfig=str(cp.kubeconfig))
    cached = plain.cached()
    stop_after(cached.core.cache)

    def same() -> bool:
        return read_inventory(cached).inventory == read_inventory(plain).inventory

    wait_for(same, "the cached inventory to equal the listed one")
    mine = read_inventory(cached).inventory
    assert {n.name for n in mine.nodes} >= set(nodes)
    # Slimmed in the cache: what no pass reads, and what weighs most.
    node = next(n for n in cached.core.list_nodes(label_selector=MIG) if n.metadata.name in nodes)
    assert node.metadata.managed_fields is None
    assert LAST_APPLIED not in (node.metadata.annotations or {})
    assert node.status.capacity["cpu"] == "64"  # the rest kept
    assert all("managedFields" not in p["metadata"] for p in cached.plans.list_node_partitions())
    assert {p.name for p in mine.pending_pods if p.namespace == pool} == {"p0", "p1", "p2"}

    # Changes arrive through the watches, and reading them lists nothing.
    assert _requests("watch").total() > 0, "the caches were filled without watches"
    apply(cp, mig_pod("p3", profile="2g.20gb", namespace=pool, pool=pool))
    cp.kubectl("delete", "pod", "-n", pool, "p0", "--wait=false")
    report_partition(cp, nodes[0], layout="7g.80gb@0")
    cp.kubectl("label", "node", nodes[1], "nvidia.com/mig.capable=false", "--overwrite")
    wait_for(same, "the caches to follow a pod added, one deleted, a report and a label")
    mine = read_inventory(cached).inventory
    assert {p.name for p in mine.pending_pods if p.namespace == pool} == {"p1", "p2", "p3"}
    assert [n.gpus[0].layout for n in mine.nodes if n.name == nodes[0]] == ["7g.80gb@0"]
    assert nodes[1] not in {n.name for n in mine.nodes}
    # Only the pods of namespaces holding gangs (other tests') are listed: GangReading counts
    # their scheduled members from a list of each such namespace.
    gang_namespaces = {namespace for namespace, _ in GangReading.read(plain).gangs}
    lists = _requests("list")
    for _ in range(5):
        read_inventory(cached)
    listed = _requests("list") - lists
    assert listed == Counter({"pods": 5 * len(gang_namespaces)}), "a pass listed a cached kind"


def test_a_pod_that_leaves_pending_leaves_the_cache(crds, stop_after) -> None:
    cp = crds
    pool = f"inf-{uuid.uuid4().hex[:6]}"
    _scene(cp, pool)
    runners = (pool, "app=runner")  # as the GPU Operator's components are listed
    cache = connect(kubeconfig=str(cp.kubeconfig)).cached(pod_sets=frozenset({runners})).core
    stop_after(cache.cache)

    def cached_pending() -> set[str]:
        return {p.metadata.name for p in cache.pending_pods() if p.metadata.namespace == pool}

    assert cached_pending() == {"p0", "p1", "p2"}
    # A pod asking for nothing lands on a kwok node of the pool, which runs it.
    assert cache.list_pods(namespace=pool, label_selector="app=runner") == []
    runner = mig_pod("runs", profile="1g.10gb", namespace=pool, pool=pool)
    del runner["spec"]["containers"][0]["resources"]
    runner["metadata"]["labels"] = {"app": "runner"}
    apply(cp, runner)

    def ran() -> bool:
        result = cp.kubectl("get", "pod", "-n", pool, "runs", "-o", "json")
        return json.loads(result.stdout)["status"].get("phase") == "Running"

    wait_for(ran, "kwok to run the pod")
    wait_for(lambda: "runs" not in cached_pending(), "the running pod to leave the cache")
    assert cached_pending() == {"p0", "p1", "p2"}

    def runners_seen() -> list[tuple[str, str]]:
        found = cache.list_pods(namespace=pool, label_selector="app=runner")
        return [(p.metadata.name, p.status.phase) for p in found]

    wait_for(lambda: runners_seen() == [("runs", "Running")], "the pod set's cache to follow")
    lists = _requests("list")
    assert runners_seen() == [("runs", "Running")]
    assert _requests("list") == lists, "the pod set was listed although it is watched"
    listed = cache.list_pods(namespace=pool, label_selector="")  # not a pod set: listed
    assert {p.metadata.name for p in listed} == {"p0", "p1", "p2", "runs"}
    assert _requests("list") - lists == Counter({"pods": 1})


def test_a_kind_not_served_falls_back_to_a_list_at_once(crds, stop_after) -> None:
    cache = ClusterCache(connect(kubeconfig=str(crds.kubeconfig)).connection, sync_timeout=30)
    stop_after(cache)
    started = time.monotonic()
    assert cache.custom(group="nothing.example.com", version="v1", plural="things") is None
    assert time.monotonic() - started < 10, "it waited for a list refused with 404"
    assert cache.nodes(label_selector="migplan.io/none=here") == []  # served, and empty


def test_node_listeners_hear_the_nodes_cached_and_every_change(crds, stop_after) -> None:
    cp = crds
    pool = f"inf-{uuid.uuid4().hex[:6]}"
    first, later = f"{pool}-n0", f"{pool}-n1"
    apply(cp, gpu_node(first, product="NVIDIA-H100-80GB-HBM3", pool=pool))
    heard: dict[str, list[tuple[str, str]]] = {"before": [], "after": []}

    def listener(which: str) -> Callable[[str, object], None]:
        def hear(kind: str, node) -> None:
            if node.metadata.name.startswith(pool):
                heard[which].append((kind, node.metadata.name))

        return hear

    # One cache told before any read (the operator's startup), one after a pass's read.
    told_first = connect(kubeconfig=str(cp.kubeconfig)).cached().cache
    read_first = connect(kubeconfig=str(cp.kubeconfig)).cached().cache
    assert told_first is not None
    assert read_first is not None
    stop_after(told_first)
    stop_after(read_first)
    told_first.on_nodes(label_selector=MIG, handler=listener("before"))
    # The first read of an informer a listener started waits for its list, as any first
    # read does, rather than listing directly.
    assert told_first.nodes(label_selector=MIG) is not None
    assert read_first.nodes(label_selector=MIG) is not None
    read_first.on_nodes(label_selector=MIG, handler=listener("after"))
    for which in heard:
        wait_for(lambda w=which: ("ADDED", first) in heard[w], f"{which}: the node there")

    apply(cp, gpu_node(later, product="NVIDIA-H100-80GB-HBM3", pool=pool))
    cp.kubectl("annotate", "node", first, "migplan.io/test=1")
    cp.kubectl("delete", "node", later, "--wait=false")
    for which, events in heard.items():
        wait_for(lambda e=events: ("DELETED", later) in e, f"{which}: the node deleted")
        assert ("ADDED", later) in events
        assert ("MODIFIED", first) in events


@pytest.mark.parametrize("extra_args", [(), ("--no-informers",)], ids=["informers", "lists"])
def test_the_operator_gives_a_new_gpu_node_a_node_partition(crds, extra_args) -> None:
    """Node events reach the operator from its node informer, or from kopf's node watch
    without informers: either way a MIG-capable node that appears gets its NodePartition."""
    cp = crds
    pool = f"inf-{uuid.uuid4().hex[:6]}"
    with running_operator(cp, extra_args=extra_args):
        apply(cp, gpu_node(f"{pool}-n0", product="NVIDIA-H100-80GB-HBM3", pool=pool))

        def made() -> bool:
            found = cp.kubectl("get", "nodepartition", f"{pool}-n0", "-o", "json", check=False)
            return found.returncode == 0

        wait_for(made, "the operator to create the new node's NodePartition")
