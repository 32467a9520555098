"""The in-memory API server (`operator/sim/api_server.py`) against the real one: the same
calls through the kube seam, the same answers. Every behaviour the unit tests of the
controller and the stepper lean on is here: resourceVersion preconditions, AlreadyExists and
NotFound, merge patches, status subresources and generation, evictions with a UID
precondition and finalizers, label selectors, the ConfigMap edit, and where a watch starts."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from migplan.operator.kube.connect import connect
from migplan.operator.kube.core import PodReplacedError
from migplan.operator.kube.gangs import GangApi
from migplan.operator.kube.seam import Kube
from migplan.operator.pod_groups import GangReading
from migplan.operator.sim.api_server import InMemoryCluster
from migplan.planner.api.group import API_VERSION, PLANS

pytestmark = pytest.mark.cluster
POD_GROUPS = f"podgroups:{GangApi.POD_GROUP.value}"


@dataclass
class Twin:
    """One side: the seam, and how a test sets the scene on it (as kubectl would)."""

    api: Kube
    prefix: str
    create_raw: Any

    def name(self, what: str) -> str:
        return f"{self.prefix}-{what}"


@pytest.fixture(params=["memory", "real"])
def twin(request, crds) -> Iterator[Twin]:
    prefix = f"twin-{request.param[0]}{uuid.uuid4().hex[:5]}"
    if request.param == "memory":
        cluster = InMemoryCluster()
        cluster.gangs.serving = {GangApi.POD_GROUP}  # as the test control plane serves

        def create_memory(resource: str, body: dict[str, Any], namespace: str = "") -> None:
            cluster.store.create(resource, body, namespace)

        yield Twin(cluster, prefix, create_memory)
        return
    api = connect(kubeconfig=str(crds.kubeconfig))
    core = client.CoreV1Api(api.connection)
    objects = client.CustomObjectsApi(api.connection)

    def create_real(resource: str, body: dict[str, Any], namespace: str = "") -> None:
        if resource == "namespaces":
            core.create_namespace(body)
        elif resource == "nodes":
            core.create_node(body)
        elif resource == "pods":
            core.create_namespaced_pod(namespace, body)
        elif resource == POD_GROUPS:
            group, version = GangApi.POD_GROUP.group_version
            objects.create_namespaced_custom_object(group, version, namespace, "podgroups", body)
        elif resource == PLANS:
            objects.create_cluster_custom_object("migplan.io", "v1alpha1", PLANS, body)
        else:
            raise AssertionError(resource)

    yield Twin(api, prefix, create_real)
    for pod in core.list_namespaced_pod(prefix).items:
        if pod.metadata.finalizers:
            core.patch_namespaced_pod(pod.metadata.name, prefix, {"metadata": {"finalizers": None}})
    if core.list_namespace(field_selector=f"metadata.name={prefix}").items:
        core.delete_namespace(prefix)
    for node in core.list_node(label_selector=f"twin={prefix}").items:
        core.delete_node(node.metadata.name)
    for plan in objects.list_cluster_custom_object("migplan.io", "v1alpha1", PLANS)["items"]:
        if plan["metadata"]["name"].startswith(prefix):
            objects.delete_cluster_custom_object(
                "migplan.io", "v1alpha1", PLANS, plan["metadata"]["name"]
            )
    for partition in api.plans.list_node_partitions():
        if partition["metadata"]["name"].startswith(prefix):
            objects.delete_cluster_custom_object(
                "migplan.io", "v1alpha1", "nodepartitions", partition["metadata"]["name"]
            )


def _partition(name: str, layout: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "NodePartition",
        "metadata": {"name": name},
        "spec": {"nodeName": name, "gpus": [{"index": 0, "layout": layout}]},
    }


def _pod(name: str, *, finalizers: list[str] | None = None) -> dict[str, Any]:
    """A pod nothing schedules (no node has the label): deleted at once unless it has
    finalizers."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "finalizers": finalizers or []},
        "spec": {
            "containers": [{"name": "main", "image": "busybox"}],
            "nodeSelector": {"migplan.io/twin": "nowhere"},
        },
    }


def _status(code: int, call: Any) -> str:
    with pytest.raises(ApiException) as caught:
        call()
    assert caught.value.status == code
    return str(caught.value.body)


def test_node_partitions_keep_generation_with_the_spec_and_status_apart(twin: Twin) -> None:
    api, name = twin.api, twin.name("np")
    assert api.plans.get_node_partition(name=name) is None
    assert api.plans.create_node_partition(body=_partition(name, "-"))
    assert not api.plans.create_node_partition(body=_partition(name, "-"))  # AlreadyExists
    created = api.plans.get_node_partition(name=name)
    assert created["metadata"]["generation"] == 1
    api.plans.patch_node_partition_status(name=name, status={"phase": "Applied"})
    after_status = api.plans.get_node_partition(name=name)
    assert after_status["metadata"]["generation"] == 1
    assert after_status["status"]["phase"] == "Applied"
    assert int(after_status["metadata"]["resourceVersion"]) > int(
        created["metadata"]["resourceVersion"]
    )
    api.plans.apply_node_partition(body=_partition(name, "7g.80gb@0"))
    changed = api.plans.get_node_partition(name=name)
    assert changed["metadata"]["generation"] == 2
    assert changed["status"] == {"phase": "Applied"}  # a spec write leaves status alone
    api.plans.apply_node_partition(body=_partition(name, "7g.80gb@0"))  # the same spec
    same = api.plans.get_node_partition(name=name)
    assert same["metadata"]["resourceVersion"] == changed["metadata"]["resourceVersion"]
    api.plans.apply_node_partition(body={**same, "spec": _partition(name, "-")["spec"]})
    assert api.plans.get_node_partition(name=name)["metadata"]["generation"] == 3


def test_a_node_partition_is_annotated_and_listed_by_its_label(twin: Twin) -> None:
    api, name = twin.api, twin.name("rec")
    labels, annotations = {"migplan.io/rollout-plan": twin.prefix}, {"migplan.io/rollout": "{}"}
    assert not api.plans.annotate_node_partition(
        name=name, labels=labels, annotations=annotations
    )  # none yet: False, not an error
    api.plans.create_node_partition(body=_partition(name, "-"))
    api.plans.create_node_partition(body=_partition(twin.name("other"), "-"))
    assert api.plans.annotate_node_partition(name=name, labels=labels, annotations=annotations)
    found = api.plans.get_node_partition(name=name)
    assert found["metadata"]["generation"] == 1  # metadata is not the spec
    assert found["metadata"]["annotations"]["migplan.io/rollout"] == "{}"
    selected = api.plans.list_node_partitions(
        label_selector=f"migplan.io/rollout-plan={twin.prefix}"
    )
    assert [p["metadata"]["name"] for p in selected] == [name]
    api.plans.annotate_node_partition(
        name=name, labels={}, annotations={"migplan.io/rollout": None}
    )
    assert "migplan.io/rollout" not in (
        api.plans.get_node_partition(name=name)["metadata"].get("annotations") or {}
    )


def test_plan_status_is_merged_and_none_removes_a_field(twin: Twin) -> None:
    api, name = twin.api, twin.name("plan")
    twin.create_raw(
        PLANS,
        {
            "apiVersion": API_VERSION,
            "kind": "GPUPartitionPlan",
            "metadata": {"name": name},
            "spec": {
                "nodeSelector": {"matchLabels": {"twin": twin.prefix}},
                "demand": {"profiles": [{"resource": "nvidia.com/mig-1g.10gb", "count": 1}]},
                "dryRun": True,
            },
        },
    )
    api.plans.patch_plan_status(name=name, status={"phase": "Ready", "progress": "0/1"})
    api.plans.patch_plan_status(name=name, status={"progress": None, "replanPending": True})
    found = api.plans.get_plan(name=name)
    assert found["status"] == {"phase": "Ready", "replanPending": True}
    assert found["metadata"]["generation"] == 1
    api.plans.annotate_plan(name=name, annotations={"migplan.io/rebalance": "now"})
    found = api.plans.get_plan(name=name)
    assert found["metadata"]["annotations"]["migplan.io/rebalance"] == "now"
    assert found["metadata"]["generation"] == 1  # metadata is not spec
    assert found["status"] == {"phase": "Ready", "replanPending": True}
    assert [p["metadata"]["name"] for p in api.plans.list_plans() if p["metadata"]["name"] == name]


def test_a_write_on_a_stale_version_is_a_conflict_and_cordons_are_marked(twin: Twin) -> None:
    api, name = twin.api, twin.name("node")
    twin.create_raw("nodes", {"metadata": {"name": name, "labels": {"twin": twin.prefix}}})
    read = api.core.get_node(name=name)
    api.core.patch_node(name=name, body={"metadata": {"labels": {"a": "b"}}})
    body = _status(
        409,
        lambda: api.core.patch_node(
            name=name,
            body={
                "spec": {"unschedulable": True},
                "metadata": {"resourceVersion": read.metadata.resource_version},
            },
        ),
    )
    assert "Conflict" in body
    assert not api.core.get_node(name=name).spec.unschedulable
    assert api.core.cordon_node(name=name, annotation="migplan.io/cordoned-by", owner="p")
    assert api.core.cordon_node(name=name, annotation="migplan.io/cordoned-by", owner="p")
    assert not api.core.uncordon_node(name=name, annotation="migplan.io/cordoned-by", owner="q")
    assert api.core.get_node(name=name).spec.unschedulable
    assert api.core.uncordon_node(name=name, annotation="migplan.io/cordoned-by", owner="p")
    node = api.core.get_node(name=name)
    assert not node.spec.unschedulable
    assert "migplan.io/cordoned-by" not in (node.metadata.annotations or {})


def test_label_selectors_select_the_same_nodes(twin: Twin) -> None:
    for suffix, labels in (
        ("a", {"tier": "gpu"}),
        ("b", {"tier": "gpu", "spot": "y"}),
        ("c", {"tier": "cpu"}),
    ):
        twin.create_raw(
            "nodes",
            {"metadata": {"name": twin.name(suffix), "labels": {"twin": twin.prefix, **labels}}},
        )

    def names(selector: str) -> list[str]:
        found = twin.api.core.list_nodes(label_selector=f"twin={twin.prefix},{selector}")
        return sorted(n.metadata.name.removeprefix(twin.prefix + "-") for n in found)

    assert names("tier=gpu") == ["a", "b"]
    assert names("tier==gpu,!spot") == ["a"]
    assert names("tier!=gpu") == ["c"]
    assert names("spot") == ["b"]


def test_evictions_check_the_uid_and_finalizers_leave_a_pod_terminating(twin: Twin) -> None:
    api, namespace = twin.api, twin.prefix
    twin.create_raw("namespaces", {"metadata": {"name": namespace}})
    twin.create_raw("pods", _pod("plain"), namespace)
    twin.create_raw("pods", _pod("held", finalizers=["migplan.io/twin"]), namespace)
    plain = api.core.get_pod(namespace=namespace, name="plain")
    assert plain.status.phase == "Pending"
    assert [p.metadata.name for p in api.core.pending_pods() if p.metadata.namespace == namespace]
    with pytest.raises(PodReplacedError):
        api.core.evict_pod(namespace=namespace, name="plain", uid=str(uuid.uuid4()))
    assert api.core.get_pod(namespace=namespace, name="plain") is not None
    assert api.core.evict_pod(namespace=namespace, name="plain", uid=plain.metadata.uid) is None
    assert api.core.get_pod(namespace=namespace, name="plain") is None
    assert api.core.evict_pod(namespace=namespace, name="plain") is None  # gone: not an error
    assert api.core.evict_pod(namespace=namespace, name="held") is None
    held = api.core.get_pod(namespace=namespace, name="held")
    assert held.metadata.deletion_timestamp is not None


def test_a_pod_created_by_generate_name_is_deleted_once(twin: Twin) -> None:
    api, namespace = twin.api, twin.prefix
    twin.create_raw("namespaces", {"metadata": {"name": namespace}})
    body = _pod("unused")
    body["metadata"] = {"generateName": "reserve-", "labels": {"migplan.io/plan": "p"}}
    created = api.core.create_pod(namespace=namespace, body=body)
    assert created.metadata.name.startswith("reserve-")
    assert created.metadata.name != "reserve-"
    (listed,) = api.core.list_pods(namespace=namespace, label_selector="migplan.io/plan=p")
    assert listed.metadata.uid == created.metadata.uid
    assert api.core.delete_pod(namespace=namespace, name=created.metadata.name) is True
    assert api.core.get_pod(namespace=namespace, name=created.metadata.name) is None
    assert api.core.delete_pod(namespace=namespace, name=created.metadata.name) is False


def test_a_config_map_edit_creates_then_changes_it(twin: Twin) -> None:
    api, namespace = twin.api, twin.prefix
    twin.create_raw("namespaces", {"metadata": {"name": namespace}})
    assert api.core.get_config_map_data(namespace=namespace, name="cfg") == {}
    api.core.edit_config_map(namespace=namespace, name="cfg", edit=lambda d: {**d, "a": "1"})
    api.core.edit_config_map(namespace=namespace, name="cfg", edit=lambda d: {**d, "b": "2"})
    assert api.core.get_config_map_data(namespace=namespace, name="cfg") == {"a": "1", "b": "2"}
    assert api.core.namespace_labels()[namespace] == {"kubernetes.io/metadata.name": namespace}


def test_a_watch_starts_with_the_object_as_it_is(twin: Twin) -> None:
    """A watch without a resourceVersion begins with an ADDED event for what exists: it
    returns at once rather than waiting for a change."""
    api, name = twin.api, twin.name("watched")
    started = time.monotonic()
    assert api.plans.watch_node_partition(name=name, timeout=1) == []
    assert time.monotonic() - started >= 0.9
    api.plans.create_node_partition(body=_partition(name, "-"))
    started = time.monotonic()
    assert api.plans.watch_node_partition(name=name, timeout=5) == ["ADDED"]
    assert time.monotonic() - started < 2


def test_a_watch_from_the_version_read_waits_for_a_change_after_it(twin: Twin) -> None:
    api, name = twin.api, twin.name("since")
    api.plans.create_node_partition(body=_partition(name, "-"))
    read = api.plans.get_node_partition(name=name)["metadata"]["resourceVersion"]
    api.plans.patch_node_partition_status(name=name, status={"phase": "Applied"})
    assert api.plans.watch_node_partition(name=name, timeout=5, since=read) == ["MODIFIED"]
    now = api.plans.get_node_partition(name=name)["metadata"]["resourceVersion"]
    started = time.monotonic()
    assert api.plans.watch_node_partition(name=name, timeout=1, since=now) == []
    assert time.monotonic() - started >= 0.9


def test_an_event_is_posted_then_counted_again(twin: Twin) -> None:
    api, namespace = twin.api, twin.prefix
    twin.create_raw("namespaces", {"metadata": {"name": namespace}})
    obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "x", "namespace": namespace},
    }
    name = api.core.create_event(obj=obj, kind="Normal", reason="Tested", message="once")
    assert name.startswith("x.")
    assert api.core.bump_event(namespace=namespace, name=name, count=2)
    assert not api.core.bump_event(namespace=namespace, name="x.gone", count=2)


def test_pod_groups_and_their_pods_read_the_same(twin: Twin) -> None:
    api, namespace = twin.api, twin.prefix
    twin.create_raw("namespaces", {"metadata": {"name": namespace}})
    group, version = GangApi.POD_GROUP.group_version
    for name, policy in (("train", {"gang": {"minCount": 2}}), ("loose", {"basic": {}})):
        body = {
            "apiVersion": f"{group}/{version}",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"schedulingPolicy": policy},
        }
        twin.create_raw(POD_GROUPS, body, namespace)
    member = _pod("train-0")
    member["spec"]["schedulingGroup"] = {"podGroupName": "train"}
    twin.create_raw("pods", member, namespace)
    assert GangApi.POD_GROUP in api.gangs.served()
    found = [g for g in api.gangs.list_pod_groups(kind=GangApi.POD_GROUP) if _in(g, namespace)]
    assert sorted(g["metadata"]["name"] for g in found) == ["loose", "train"]
    reading = GangReading.read(api)
    assert reading.gangs[namespace, "train"].min_count == 2
    assert (namespace, "loose") not in reading.gangs
    (pod,) = api.core.list_pods(namespace=namespace, label_selector="")
    assert reading.gang_of(pod) == "train"


def _in(obj: dict[str, Any], namespace: str) -> bool:
    return bool(obj["metadata"]["namespace"] == namespace)
