"""Restarting the NVIDIA device plugin on a node, so it advertises the new MIG instances."""

from __future__ import annotations

from typing import Any

from migplan.operator.kube import client as kube


class PodDeletingDevicePlugin:
    """Restart the device plugin on a node by deleting its pod there (its DaemonSet makes a
    new one, which re-reads the GPUs)."""

    def __init__(self, *, api: Any, namespace: str, selector: str) -> None:
        self._api, self._namespace, self._selector = api, namespace, selector

    def restart(self, node: str) -> None:
        """Delete the device-plugin pod(s) on `node`."""
        kube.delete_pods(
            self._api, namespace=self._namespace, label_selector=self._selector, node=node
        )
