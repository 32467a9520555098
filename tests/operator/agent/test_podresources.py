"""Bindings from the kubelet PodResources API, through a gRPC server on a Unix socket."""

from __future__ import annotations

import re
import subprocess
from concurrent import futures
from pathlib import Path

import grpc

from migplan.operator.agent.podresources import LIST_METHOD, PodResourcesBindings
from migplan.operator.agent.podresources_v1 import KUBELET_MODULE_VERSION, api_pb2
from migplan.operator.nvml.adapter import NvmlAdapter
from migplan.operator.nvml.emulator import FakeNvml
from migplan.operator.sim.api_server import InMemoryCluster
from migplan.operator.sim.dra_slices import PublishedGpu, resource_slices
from migplan.planner.hardware.layout import Instance

ROOT = Path(__file__).resolve().parents[3]


def pinned_kubelet() -> str:
    """The k8s.io/kubelet module version of the Kubernetes the control plane runs."""
    versions = dict(
        line.split("=", 1)
        for line in (ROOT / "tests" / "cluster" / "versions.env").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    )
    return "v0." + versions["KUBERNETES_VERSION"].removeprefix("v1.")


def test_the_bindings_are_generated_from_the_pinned_kubelet_api() -> None:
    # scripts/gen-podresources makes them; re-run it when the Kubernetes pin moves.
    assert pinned_kubelet() == KUBELET_MODULE_VERSION
    cache = subprocess.run(
        ["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True
    ).stdout.strip()
    upstream = Path(cache) / f"k8s.io/kubelet@{KUBELET_MODULE_VERSION}"
    upstream = upstream / "pkg/apis/podresources/v1/api.proto"
    assert upstream.exists(), f"{upstream} missing: tests/cluster/build.sh downloads it"
    vendored = ROOT / "operator" / "agent" / "podresources_v1" / "api.proto"
    assert vendored.read_text() == upstream.read_text()
    fields = {f.name: f.number for f in api_pb2.ContainerResources.DESCRIPTOR.fields}
    assert fields["dynamic_resources"] == int(
        re.search(r"repeated DynamicResource dynamic_resources = (\d+);", upstream.read_text())[1]
    )


def serve(tmp_path: Path, response) -> tuple[grpc.Server, str]:
    socket = str(tmp_path / "kubelet.sock")
    handler = grpc.method_handlers_generic_handler(
        "v1.PodResourcesLister",
        {
            "List": grpc.unary_unary_rpc_method_handler(
                lambda request, context: response,
                request_deserializer=api_pb2.ListPodResourcesRequest.FromString,
                response_serializer=lambda m: m.SerializeToString(),
            )
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"unix://{socket}")
    server.start()
    return server, socket


def test_bindings_map_mig_device_ids_to_instances(tmp_path, catalog) -> None:
    fake = FakeNvml(["H100-80GB"], mig=True)
    with NvmlAdapter(fake.pynvml) as nvml:
        nvml.create_instance(0, profile_id=9, start=0, size=4)
        nvml.create_instance(0, profile_id=19, start=6, size=1)
        by_gi = {gi: uuid for uuid, gi in nvml.mig_devices(0).items()}
        three_g = next(g.id for g in nvml.instances(0) if g.start == 0)
    response = api_pb2.ListPodResourcesResponse()
    pod = response.pod_resources.add(name="train-0", namespace="ml")
    container = pod.containers.add(name="main")
    container.devices.add(resource_name="nvidia.com/mig-3g.40gb", device_ids=[by_gi[three_g]])
    container.devices.add(resource_name="example.com/fpga", device_ids=["fpga-0"])
    server, socket = serve(tmp_path, response)
    try:
        found = PodResourcesBindings(nvml=fake.pynvml, catalog=catalog, socket=socket).bindings("n")
    finally:
        server.stop(None)
    assert LIST_METHOD == "/v1.PodResourcesLister/List"
    assert found == {(0, Instance(0, "3g.40gb")): "ml/train-0"}


def test_dra_claims_are_mapped_through_the_nodes_resource_slice(tmp_path, catalog) -> None:
    fake = FakeNvml(["H100-80GB"], mig=True)
    with NvmlAdapter(fake.pynvml) as nvml:
        nvml.create_instance(0, profile_id=9, start=4, size=4)
        nvml.create_instance(0, profile_id=19, start=0, size=1)
        uuid = nvml.devices()[0].uuid
    gpu = PublishedGpu(
        minor=0,
        uuid=uuid,
        model=catalog.model("H100-80GB"),
        instances=[(Instance(4, "3g.40gb"), "MIG-a"), (Instance(0, "1g.10gb"), "MIG-b")],
    )
    cluster = InMemoryCluster()
    cluster.dra.serving = True
    for published in resource_slices("node-1", [gpu], mode="static"):
        cluster.dra.apply_resource_slice(body=published)
    response = api_pb2.ListPodResourcesResponse()
    container = response.pod_resources.add(name="infer", namespace="ml").containers.add(name="c")
    claim = container.dynamic_resources.add(claim_name="infer-gpu", claim_namespace="ml")
    claim.claim_resources.add(
        driver_name="gpu.nvidia.com", pool_name="node-1", device_name="gpu-0-mig-3g40gb-9-4"
    )
    claim.claim_resources.add(driver_name="other.example.com", pool_name="p", device_name="d")
    server, socket = serve(tmp_path, response)
    try:
        found = PodResourcesBindings(
            nvml=fake.pynvml, catalog=catalog, socket=socket, api=cluster
        ).bindings("node-1")
    finally:
        server.stop(None)
    assert found == {(0, Instance(4, "3g.40gb")): "ml/infer"}
