"""Restarting what must see a node's new MIG instances, as mig-manager does after a change.

The device plugin advertises instances, GPU feature discovery (GFD) labels them and
dcgm-exporter watches them; each reads the GPU's instances when it starts, so after a change
the agent deletes this node's pod of each (its DaemonSet makes a new one), in that order.
Where the NVIDIA container toolkit runs in CDI mode, the CDI spec lists the MIG devices too:
the configured command regenerates it first, so the new device-plugin pod finds it current.
"""

from __future__ import annotations

import shlex
import subprocess

import structlog

from migplan.operator.gpu_operator import GpuOperatorSettings
from migplan.operator.kube.seam import Kube

log = structlog.get_logger("migplan.agent")
CDI_TIMEOUT = 120.0


class ComponentRestartError(RuntimeError):
    """The CDI command failed; nothing was restarted."""


class GpuOperatorComponents:
    """Restart the GPU Operator's components on a node by deleting their pods there."""

    def __init__(
        self, *, api: Kube, settings: GpuOperatorSettings, cdi_command: str | None = None
    ) -> None:
        self._api, self._settings = api, settings
        self.cdi_command = shlex.split(cdi_command) if cdi_command else None
        """The CDI command as argv (None: CDI not in use)."""
        self.feature_discovery_seen = False
        """Whether the last restart found a GFD pod (then its labels are checked too)."""

    def restart(self, node: str) -> None:
        """Regenerate the CDI spec (if configured), then delete the device-plugin, GFD and
        dcgm-exporter pods on `node`, in that order."""
        if self.cdi_command:
            try:
                done = subprocess.run(
                    self.cdi_command,
                    capture_output=True,
                    text=True,
                    timeout=CDI_TIMEOUT,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise ComponentRestartError(f"CDI command {self.cdi_command[0]}: {exc}") from exc
            if done.returncode != 0:
                raise ComponentRestartError(
                    f"CDI command {shlex.join(self.cdi_command)} exited {done.returncode}: "
                    f"{(done.stderr or done.stdout).strip()[-500:]}"
                )
        restarted = {}
        for component, selector in self._settings.restart_order():
            restarted[component] = self._api.core.delete_pods(
                namespace=self._settings.namespace, label_selector=selector, node=node
            )
        self.feature_discovery_seen = bool(restarted.get("gpu-feature-discovery"))
        log.info("components restarted", node=node, pods=restarted, cdi=bool(self.cdi_command))


class DraPluginRestarter:
    """Restart NVIDIA's DRA kubelet plugin on a node (deleting its pod there; the DaemonSet
    makes a new one, which publishes the node's MIG devices afresh)."""

    feature_discovery_seen = False

    def __init__(self, *, api: Kube, namespace: str, selector: str) -> None:
        self._api, self.namespace, self.selector = api, namespace, selector

    def restart(self, node: str) -> None:
        """Delete the kubelet plugin's pod on `node`."""
        deleted = self._api.core.delete_pods(
            namespace=self.namespace, label_selector=self.selector, node=node
        )
        if not deleted:
            raise ComponentRestartError(
                f"no DRA kubelet plugin pod ({self.selector}) in namespace {self.namespace} "
                f"on node {node}"
            )
        log.info("DRA kubelet plugin restarted", node=node, pods=deleted)
