"""A simulated NVIDIA device plugin for many emulated GPU nodes in one process.

For each node it publishes `nvidia.com/mig-<profile>` capacity and allocatable from the
emulator's instances (what the real plugin advertises after a restart), and binds pods that
the scheduler placed on the node to concrete free instances, as kubelet's device manager
would, starting a fake process on each. The agent reads those bindings (on a real node it
asks the kubelet PodResources API).
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter, defaultdict

from migplan.operator.kube.seam import Kube
from migplan.operator.nvml.emulator import FakeNvml
from migplan.planner.hardware.layout import Instance
from migplan.planner.hardware.resources import is_mig_resource, profile_of, resource_name

Binding = tuple[int, Instance]
"""(GPU index, instance)."""


class SimulatedDevicePlugin:
    """Device-plugin behaviour for `nodes` (node name -> its emulated GPUs)."""

    feature_discovery_seen = False
    """No GPU feature discovery here: its labels are not checked."""

    def __init__(self, *, api: Kube, nodes: dict[str, FakeNvml]) -> None:
        self._api = api
        self._nodes = nodes
        self._lock = threading.Lock()
        # Per node; a node the fleet adopts later starts with none.
        self._bound: defaultdict[str, dict[Binding, str]] = defaultdict(dict)
        self._pids: dict[tuple[str, str], list[tuple[int, int]]] = {}
        self._next_pid = itertools.count(10_000)

    def resources(self, node: str) -> Counter[str]:
        """MIG resource counts the node's GPUs offer now."""
        fake = self._nodes[node]
        counts: Counter[str] = Counter()
        for gpu in range(fake.gpu_count()):
            counts.update(resource_name(i.profile) for i in fake.layout(gpu).instances)
        return counts

    def publish(self, node: str) -> Counter[str]:
        """Advertise the node's MIG resources (a device-plugin restart); returns them."""
        counts = self.resources(node)
        current = self._api.core.get_node(name=node).status.capacity or {}
        resources: dict[str, str | None] = {k: None for k in current if is_mig_resource(k)}
        resources.update({k: str(v) for k, v in counts.items()})
        self._api.core.patch_node_status(
            name=node, status={"capacity": resources, "allocatable": resources}
        )
        return counts

    def restart(self, node: str) -> None:
        """What deleting the device-plugin pod does: republish."""
        self.publish(node)

    def bindings(self, node: str) -> dict[Binding, str]:
        """Instances held by pods on `node`: (GPU, instance) -> namespace/name."""
        with self._lock:
            return dict(self._bound[node])

    def sync(self, node: str) -> None:
        """Bind newly placed pods to free instances and release those of ended pods."""
        pods = self._api.core.pods_on_node(node=node)
        live = {}
        for pod in pods:
            if pod.status.phase in ("Succeeded", "Failed") or pod.metadata.deletion_timestamp:
                continue
            wants: Counter[str] = Counter()
            for container in pod.spec.containers:
                for key, value in (
                    (container.resources and container.resources.limits) or {}
                ).items():
                    if is_mig_resource(key):
                        wants[profile_of(key)] += int(value)
            if wants:
                live[f"{pod.metadata.namespace}/{pod.metadata.name}"] = wants
        with self._lock:
            self._release(node, set(live))
            for pod, wants in sorted(live.items()):
                if pod not in self._bound[node].values():
                    self._bind(node, pod, wants)

    def _release(self, node: str, live: set[str]) -> None:
        fake = self._nodes[node]
        for binding, pod in list(self._bound[node].items()):
            if pod not in live:
                del self._bound[node][binding]
                for gpu, pid in self._pids.pop((node, pod), []):
                    fake.detach_process(gpu, pid)

    def _bind(self, node: str, pod: str, wants: Counter[str]) -> None:
        fake = self._nodes[node]
        taken = set(self._bound[node])
        for profile, count in wants.items():
            free = [
                (gpu, i)
                for gpu in range(fake.gpu_count())
                for i in fake.layout(gpu).instances
                if i.profile == profile and (gpu, i) not in taken
            ][:count]
            for gpu, instance in free:
                self._bound[node][(gpu, instance)] = pod
                taken.add((gpu, instance))
                pid = next(self._next_pid)
                gi = fake.gpu_instance_id(gpu, instance)
                fake.attach_process(gpu, gi=gi, pid=pid)
                self._pids.setdefault((node, pod), []).append((gpu, pid))
