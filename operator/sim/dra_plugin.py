"""A simulated NVIDIA DRA kubelet plugin (static MIG devices) for emulated GPU nodes.

It publishes each node's ResourceSlice from the emulated NVML (`dra_slices.py`, as the real
plugin does when it starts: restarting it is how a new layout reaches the scheduler), and
reports which pod holds which instance from the claims the scheduler allocated on the node
(what kubelet's PodResources API lists under `dynamic_resources`), starting a fake process on
each held instance as the workload would.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import defaultdict
from typing import Any

from migplan.operator.dra.devices import DeviceKind, slice_devices
from migplan.operator.kube.seam import Kube
from migplan.operator.nvml.adapter import NvmlAdapter
from migplan.operator.nvml.emulator import FakeNvml
from migplan.operator.sim.dra_slices import PublishedGpu, resource_slices
from migplan.planner.hardware.catalog import Catalog
from migplan.planner.hardware.layout import Instance

Binding = tuple[int, Instance]
CLAIMS_TTL = 1.0


class SimulatedDraPlugin:
    """NVIDIA's DRA kubelet plugin for `nodes` (node name -> its emulated GPUs)."""

    feature_discovery_seen = False

    def __init__(self, *, api: Kube, nodes: dict[str, FakeNvml], catalog: Catalog) -> None:
        self._api, self._nodes, self._catalog = api, nodes, catalog
        self._generation = dict.fromkeys(nodes, 0)
        self._lock = threading.Lock()
        # Per node; a node the fleet adopts later starts with none.
        self._bound: defaultdict[str, dict[Binding, str]] = defaultdict(dict)
        self._pids: dict[tuple[str, Binding], int] = {}
        self._next_pid = itertools.count(50_000)
        self._claims_read: tuple[float, list[dict[str, Any]]] = (float("-inf"), [])
        self.publications: list[str] = []
        """Nodes in the order their slices were published (a restart each)."""

    def gpus(self, node: str) -> list[PublishedGpu]:
        """The node's GPUs and instances as the plugin reads them from NVML."""
        found = []
        with NvmlAdapter(self._nodes[node].pynvml) as nvml:
            for device in nvml.devices():
                model = self._catalog.model(device.name)
                _, by_instance = nvml.layout(device.index, model)
                uuid_of = {gi: uuid for uuid, gi in nvml.mig_devices(device.index).items()}
                found.append(
                    PublishedGpu(
                        minor=device.index,
                        uuid=device.uuid,
                        model=model,
                        mig_enabled=device.mig_enabled,
                        instances=[(i, uuid_of.get(gi.id, "")) for i, gi in by_instance.items()],
                    )
                )
        return found

    def publish(self, node: str) -> None:
        """Write the node's ResourceSlice from NVML, one pool generation later."""
        self._generation[node] += 1
        for body in resource_slices(
            node, self.gpus(node), mode="static", generation=self._generation[node]
        ):
            self._api.dra.apply_resource_slice(body=body)
        self.publications.append(node)

    def restart(self, node: str) -> None:
        """What deleting the kubelet plugin's pod does: publish again."""
        self.publish(node)

    def bindings(self, node: str) -> dict[Binding, str]:
        """Instances held through claims on `node`: (GPU, instance) -> namespace/name."""
        with self._lock:
            return dict(self._bound[node])

    def _claims(self) -> list[dict[str, Any]]:
        """Every ResourceClaim, read at most once a second (a sweep visits every node)."""
        with self._lock:
            if time.monotonic() - self._claims_read[0] > CLAIMS_TTL:
                self._claims_read = (
                    time.monotonic(),
                    self._api.dra.list_objects(plural="resourceclaims"),
                )
            return self._claims_read[1]

    def sync(self, node: str) -> None:
        """Follow the claims allocated on `node`: bind new holders, release ended ones."""
        slices = self._api.dra.list_objects(
            plural="resourceslices", field_selector=f"spec.nodeName={node}"
        )
        devices = {d.key: d for d in slice_devices(slices) if d.kind is DeviceKind.MIG}
        held: dict[Binding, str] = {}
        for claim in self._claims():
            status = claim.get("status") or {}
            pods = [
                r["name"] for r in status.get("reservedFor") or [] if r.get("resource") == "pods"
            ]
            results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
            for result in results:
                device = devices.get(
                    (result.get("driver"), result.get("pool"), result.get("device"))
                )
                if device and pods and device.minor is not None and device.instance is not None:
                    namespace = claim["metadata"]["namespace"]
                    held[(device.minor, device.instance)] = f"{namespace}/{pods[0]}"
        fake = self._nodes[node]
        with self._lock:
            for binding in set(self._bound[node]) - set(held):
                pid = self._pids.pop((node, binding), None)
                if pid is not None:
                    fake.detach_process(binding[0], pid)
            for binding in set(held) - set(self._bound[node]):
                gi = fake.gpu_instance_id(binding[0], binding[1])
                if gi is None:
                    continue  # the instance is gone: the plugin republishes on restart
                pid = next(self._next_pid)
                fake.attach_process(binding[0], gi=gi, pid=pid)
                self._pids[(node, binding)] = pid
            self._bound[node] = {b: p for b, p in held.items() if (node, b) in self._pids}
