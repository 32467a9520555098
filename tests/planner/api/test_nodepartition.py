"""The NodePartition model as the API takes it: the operator writes every NodePartition
from it, so its body is what the CRD and the agent read back."""

from __future__ import annotations

from migplan.planner.api.group import API_VERSION
from migplan.planner.api.nodepartition import GpuTarget, NodePartition, NodePartitionSpec
from migplan.planner.export.crd import node_partition_crd


def test_a_body_names_the_node_and_carries_the_spec_in_camel_case() -> None:
    spec = NodePartitionSpec(
        node_name="gpu-1",
        plan="p",
        plan_generation=3,
        gpus=(GpuTarget(index=0, layout="7g.80gb@0"),),
        evicted_pods=("ns/a",),
        evicted_pod_uids={"ns/a": "uid-a"},
    )
    body = NodePartition.for_node(spec).body()
    assert body["apiVersion"] == API_VERSION
    assert body["kind"] == "NodePartition"
    assert body["metadata"] == {"name": "gpu-1"}
    assert body["spec"]["nodeName"] == "gpu-1"
    assert body["spec"]["planGeneration"] == 3
    assert body["spec"]["gpus"] == [{"index": 0, "layout": "7g.80gb@0"}]
    assert body["spec"]["evictedPodUids"] == {"ns/a": "uid-a"}
    assert "status" not in body
    assert NodePartition.model_validate(body) == NodePartition.for_node(spec)


def test_a_node_uid_makes_the_node_its_owner() -> None:
    body = NodePartition.for_node(NodePartitionSpec(node_name="gpu-2"), node_uid="u-2").body()
    assert body["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "gpu-2", "uid": "u-2"}
    ]


def test_every_spec_key_a_body_has_is_in_the_crd() -> None:
    """A key the CRD does not declare would be pruned by the API server, silently."""
    spec = NodePartitionSpec(node_name="n", plan="p", plan_generation=1, dra=True)
    declared = node_partition_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    keys = set(declared["properties"]["spec"]["properties"])
    assert set(NodePartition.for_node(spec).body()["spec"]) <= keys
