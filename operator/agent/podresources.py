"""Which pod holds which MIG instance on a real node: the kubelet PodResources API.

The kubelet lists, per pod and container, the device IDs it handed out; for MIG resources
those are MIG device UUIDs, which NVML maps to GPU instances. The messages are declared at
run time with protobuf's descriptor API (only the fields read here, with the field numbers
of k8s.io/kubelet/pkg/apis/podresources/v1/api.proto; unread fields are skipped on parse),
so no generated code is needed.
"""

from __future__ import annotations

from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from migplan.operator.nvml.adapter import NvmlAdapter
from migplan.planner.catalog import Catalog
from migplan.planner.layout import Instance
from migplan.planner.resources import is_mig_resource

SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
LIST_METHOD = "/v1.PodResourcesLister/List"
Binding = tuple[int, Instance]

# (message, [(field, number, type, label, message type)])
_STRING = descriptor_pb2.FieldDescriptorProto.TYPE_STRING
_MESSAGE = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
_ONE = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
_MANY = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
FIELDS: dict[str, list[tuple[str, int, int, int, str | None]]] = {
    "ListPodResourcesRequest": [],
    "ListPodResourcesResponse": [("pod_resources", 1, _MESSAGE, _MANY, "PodResources")],
    "PodResources": [
        ("name", 1, _STRING, _ONE, None),
        ("namespace", 2, _STRING, _ONE, None),
        ("containers", 3, _MESSAGE, _MANY, "ContainerResources"),
    ],
    "ContainerResources": [
        ("name", 1, _STRING, _ONE, None),
        ("devices", 2, _MESSAGE, _MANY, "ContainerDevices"),
    ],
    "ContainerDevices": [
        ("resource_name", 1, _STRING, _ONE, None),
        ("device_ids", 2, _STRING, _MANY, None),
    ],
}


def _messages() -> dict[str, Any]:
    file = descriptor_pb2.FileDescriptorProto(
        name="migplan/podresources_v1.proto", package="v1", syntax="proto3"
    )
    for name, fields in FIELDS.items():
        message = file.message_type.add(name=name)
        for field_name, number, kind, label, type_name in fields:
            field = message.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                field.type_name = f".v1.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"v1.{name}"))
        for name in FIELDS
    }


MESSAGES = _messages()


def list_devices(*, socket: str = SOCKET, timeout: float = 10.0) -> dict[str, str]:
    """MIG device UUID -> pod (namespace/name), as the kubelet reports them."""
    with grpc.insecure_channel(f"unix://{socket}") as channel:
        call = channel.unary_unary(
            LIST_METHOD,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=MESSAGES["ListPodResourcesResponse"].FromString,
        )
        response = call(MESSAGES["ListPodResourcesRequest"](), timeout=timeout)
    held = {}
    for pod in response.pod_resources:
        for container in pod.containers:
            for device in container.devices:
                if is_mig_resource(device.resource_name):
                    for device_id in device.device_ids:
                        held[device_id] = f"{pod.namespace}/{pod.name}"
    return held


class PodResourcesBindings:
    """The agent's `Bindings` on a real node: kubelet device IDs mapped through NVML."""

    def __init__(self, *, nvml: Any, catalog: Catalog, socket: str = SOCKET) -> None:
        self._nvml = nvml
        self._catalog = catalog
        self._socket = socket

    def bindings(self, node: str) -> dict[Binding, str]:
        """(GPU index, instance) -> pod, for every MIG device a pod holds."""
        held = list_devices(socket=self._socket)
        found: dict[Binding, str] = {}
        with NvmlAdapter(self._nvml) as nvml:
            for device in nvml.devices():
                if not device.mig_enabled:
                    continue
                model = self._catalog.model(device.name)
                _, by_instance = nvml.layout(device.index, model)
                by_gi = {gi.id: instance for instance, gi in by_instance.items()}
                for uuid, gi_id in nvml.mig_devices(device.index).items():
                    if uuid in held and gi_id in by_gi:
                        found[(device.index, by_gi[gi_id])] = held[uuid]
        return found
