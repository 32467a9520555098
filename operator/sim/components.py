"""Simulated GPU Operator components that react to their pods, as the real ones do.

On a real node, the device plugin advertises the MIG instances and GPU feature discovery
labels them when their pods start. Here, when a node gets a new pod of either (its
DaemonSet replaced the one the agent deleted), the node's resources are published and GFD's
labels (`nvidia.com/mig.strategy=mixed`, `nvidia.com/mig-<profile>.count`) written from the
emulated GPUs.
"""

from __future__ import annotations

from collections import Counter

from migplan.operator.gpu_operator import GpuOperatorSettings
from migplan.operator.kube.seam import Kube
from migplan.operator.sim.device_plugin import SimulatedDevicePlugin
from migplan.planner.hardware.resources import is_mig_resource


class SimulatedComponents:
    """Device-plugin and GFD behaviour, driven by their pods on each node."""

    def __init__(
        self, *, api: Kube, plugin: SimulatedDevicePlugin, settings: GpuOperatorSettings
    ) -> None:
        self._api, self._plugin, self._settings = api, plugin, settings
        self._seen: dict[tuple[str, str], str] = {}
        self.starts: list[tuple[str, str]] = []
        """(node, component) each time a new pod of it started on the node."""

    def _pod(self, node: str, selector: str) -> str | None:
        pods = self._api.core.list_pods(
            namespace=self._settings.namespace, label_selector=selector, node=node
        )
        running = [
            p for p in pods if p.status.phase == "Running" and not p.metadata.deletion_timestamp
        ]
        return str(running[0].metadata.uid) if running else None

    def sync(self, node: str) -> None:
        """Act on new device-plugin and GFD pods on `node`."""
        for component, selector, act in (
            ("device-plugin", self._settings.device_plugin, self._plugin.publish),
            ("gpu-feature-discovery", self._settings.feature_discovery, self._label),
        ):
            uid = self._pod(node, selector)
            if uid is not None and self._seen.get((node, component)) != uid:
                self._seen[(node, component)] = uid
                act(node)
                self.starts.append((node, component))

    def _label(self, node: str) -> Counter[str]:
        counts = self._plugin.resources(node)
        labels = self._api.core.get_node(name=node).metadata.labels or {}
        update: dict[str, str | None] = {
            k: None
            for k in labels
            if k.endswith(".count") and is_mig_resource(k.removesuffix(".count"))
        }
        update.update({f"{resource}.count": str(n) for resource, n in counts.items()})
        update[self._settings.strategy_label] = "mixed"
        self._api.core.patch_node(name=node, body={"metadata": {"labels": update}})
        return counts
