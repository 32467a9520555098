"""Bindings from the kubelet PodResources API, through a gRPC server on a Unix socket."""

from __future__ import annotations

import re
import subprocess
from concurrent import futures
from pathlib import Path

import grpc

from migplan.operator.agent.podresources import (
    FIELDS,
    LIST_METHOD,
    MESSAGES,
    PodResourcesBindings,
)
from migplan.operator.nvml.adapter import NvmlAdapter
from migplan.operator.nvml.emulator import FakeNvml
from migplan.planner.layout import Instance

ROOT = Path(__file__).resolve().parents[3]


def kubelet_proto() -> str:
    """api.proto of the kubelet module pinned with the control plane (in the Go cache)."""
    versions = dict(
        line.split("=", 1)
        for line in (ROOT / "tests" / "cluster" / "versions.env").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    )
    minor = versions["KUBERNETES_VERSION"].removeprefix("v1.")
    cache = subprocess.run(
        ["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True
    ).stdout.strip()
    path = Path(cache) / f"k8s.io/kubelet@v0.{minor}/pkg/apis/podresources/v1/api.proto"
    assert path.exists(), f"{path} missing: tests/cluster/build.sh downloads it"
    return path.read_text()


def test_field_numbers_match_the_kubelet_api() -> None:
    proto = kubelet_proto()
    for message, fields in FIELDS.items():
        block = re.search(rf"message {message} \{{(.*?)\n\}}", proto, re.S)
        assert block, message
        declared = {
            m[1]: int(m[2])
            for m in re.finditer(
                r"^\s*(?:repeated |optional )?[\w.]+ (\w+) = (\d+);", block.group(1), re.M
            )
        }
        for name, number, *_ in fields:
            assert declared[name] == number, (message, name)


def serve(tmp_path: Path, response) -> tuple[grpc.Server, str]:
    socket = str(tmp_path / "kubelet.sock")
    handler = grpc.method_handlers_generic_handler(
        "v1.PodResourcesLister",
        {
            "List": grpc.unary_unary_rpc_method_handler(
                lambda request, context: response,
                request_deserializer=MESSAGES["ListPodResourcesRequest"].FromString,
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
    with NvmlAdapter(fake) as nvml:
        nvml.create_instance(0, profile_id=9, start=0, size=4)
        nvml.create_instance(0, profile_id=19, start=6, size=1)
        by_gi = {gi: uuid for uuid, gi in nvml.mig_devices(0).items()}
        three_g = next(g.id for g in nvml.instances(0) if g.start == 0)
    response = MESSAGES["ListPodResourcesResponse"]()
    pod = response.pod_resources.add(name="train-0", namespace="ml")
    container = pod.containers.add(name="main")
    container.devices.add(resource_name="nvidia.com/mig-3g.40gb", device_ids=[by_gi[three_g]])
    container.devices.add(resource_name="example.com/fpga", device_ids=["fpga-0"])
    server, socket = serve(tmp_path, response)
    try:
        found = PodResourcesBindings(nvml=fake, catalog=catalog, socket=socket).bindings("n")
    finally:
        server.stop(None)
    assert LIST_METHOD == "/v1.PodResourcesLister/List"
    assert found == {(0, Instance(0, "3g.40gb")): "ml/train-0"}
