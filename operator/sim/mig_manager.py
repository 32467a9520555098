"""A simulated GPU Operator mig-manager for emulated nodes, obeying its label protocol.

It runs on a node only while `nvidia.com/gpu.deploy.mig-manager` is `true` (missing counts
as `true`: the GPU Operator adds it so on MIG-capable nodes), as its DaemonSet's node
selector does. When it starts on a node, and whenever the node's `nvidia.com/mig.config`
changes, it acts on the config that label names, as mig-parted's `reconfigure` does:
`failed` if the config file has no such entry (before touching anything); `success` without
a change if the GPUs already have the entry's instance counts; otherwise `pending`, every
listed GPU rebuilt from empty with the counts asked for (placed first-fit, as mig-parted
does; `mig-enabled: false` destroys every instance), the device plugin restarted, and
`success` (`failed` if a GPU still runs processes). Nodes in `wedged` stay `pending` forever
(the failure mode mig-parted#485 describes).

It reads its config from a file, not from the API: `ConfigFile` shows the ConfigMap as
kubelet's volume refresh does, `lag` seconds late.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import yaml

from migplan.operator.agent.reconcile import GpuPhase, reconcile_gpu
from migplan.operator.gpu_operator import (
    CONFIG_KEY,
    MIG_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
    MIG_MANAGER_DEPLOY_LABEL,
)
from migplan.operator.kube.seam import Kube
from migplan.operator.nvml.adapter import NvmlAdapter
from migplan.operator.nvml.emulator import FakeNvml
from migplan.operator.sim.device_plugin import SimulatedDevicePlugin
from migplan.planner.errors import MigplanInputError
from migplan.planner.export.migparted import first_fit_layout
from migplan.planner.hardware.catalog import Catalog
from migplan.planner.hardware.layout import Layout

REFRESH = 0.2
"""Seconds between the simulated kubelet's reads of the ConfigMap."""


class ConfigFile:
    """A ConfigMap's `config.yaml` as a pod's mounted file shows it: each content becomes
    visible `lag` seconds after it was first read from the API."""

    def __init__(
        self,
        *,
        api: Kube,
        config_map: tuple[str, str],
        lag: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api, self._config_map, self._lag, self._clock = api, config_map, lag, clock
        self._seen: list[tuple[float, dict[str, Any]]] = []
        self._read = 0.0

    def refresh(self) -> None:
        """Read the ConfigMap from the API (what kubelet's watch sees), at most every
        `REFRESH` seconds."""
        if self._seen and self._clock() - self._read < REFRESH:
            return
        self._read = self._clock()
        namespace, name = self._config_map
        data = self._api.core.get_config_map_data(namespace=namespace, name=name)
        configs = (yaml.safe_load(data.get(CONFIG_KEY) or "") or {}).get("mig-configs") or {}
        if not self._seen or self._seen[-1][1] != configs:
            self._seen.append((self._clock(), configs))

    def configs(self) -> dict[str, Any]:
        """The `mig-configs` the file holds now."""
        now = self._clock()
        visible = [configs for seen, configs in self._seen if now - seen >= self._lag]
        return visible[-1] if visible else {}


class SimulatedMigManager:
    """mig-manager behaviour for `nodes` (node name -> its emulated GPUs)."""

    def __init__(
        self,
        *,
        api: Kube,
        nodes: dict[str, FakeNvml],
        plugin: SimulatedDevicePlugin,
        catalog: Catalog,
        config_map: tuple[str, str],
        lag: float = 0.0,
        wedged: frozenset[str] = frozenset(),
        applied: dict[str, str] | None = None,
    ) -> None:
        self._api = api
        self._nodes = nodes
        self._plugin = plugin
        self._catalog = catalog
        self.file = ConfigFile(api=api, config_map=config_map, lag=lag)
        self._wedged = wedged
        self._applied: dict[str, str] = dict(applied or {})
        """Per node where it runs: the label value it last acted on (absent: just started)."""
        self.applied_configs: list[tuple[str, str]] = []
        """(node, config) it changed GPUs for."""
        self.outcomes: list[tuple[str, str, str]] = []
        """(node, config, success|failed) of every run."""

    def _label(self, node: str, state: str) -> None:
        self._api.core.patch_node(
            name=node, body={"metadata": {"labels": {MIG_CONFIG_STATE_LABEL: state}}}
        )

    def restart(self, node: str) -> None:
        """Its pod on `node` restarts: the new one acts on the label as it finds it."""
        self._applied.pop(node, None)

    def sync(self, node: str) -> None:
        """Act on the node's labels once (called for every node by the fleet's sweep)."""
        self.file.refresh()  # kubelet watches the ConfigMap all the time
        labels = self._api.core.get_node(name=node).metadata.labels or {}
        if labels.get(MIG_MANAGER_DEPLOY_LABEL, "true") != "true":
            self._applied.pop(node, None)  # its pod is gone; a new one starts afresh
            return
        wanted = labels.get(MIG_CONFIG_LABEL)
        if not wanted or self._applied.get(node) == wanted:
            return
        self._applied[node] = wanted
        entries = self.file.configs().get(wanted)
        if not entries:
            self._finish(node, wanted, "failed")  # `assert --valid-config` fails first
            return
        if self._has(node, entries):
            self._finish(node, wanted, "success")
            return
        if labels.get(MIG_CONFIG_STATE_LABEL) != "pending":
            self._label(node, "pending")
        if node in self._wedged:
            return
        ok = self._apply(node, entries)
        if ok:
            self.applied_configs.append((node, wanted))
        self._plugin.restart(node)
        self._finish(node, wanted, "success" if ok else "failed")

    def _finish(self, node: str, wanted: str, state: str) -> None:
        self.outcomes.append((node, wanted, state))
        self._label(node, state)

    def _targets(self, node: str, entries: list[dict[str, Any]]) -> dict[int, Layout] | None:
        """GPU index -> the layout the entries give it (None: a count does not fit)."""
        fake = self._nodes[node]
        targets = {}
        with NvmlAdapter(fake.pynvml) as nvml:
            devices = {d.index: d for d in nvml.devices()}
        for entry in entries:
            indices = devices if entry.get("devices") == "all" else entry["devices"]
            for index in indices:
                model = self._catalog.model(devices[index].name)
                if entry.get("mig-enabled") is False:
                    targets[index] = Layout()
                    continue
                try:
                    targets[index] = first_fit_layout(model, entry.get("mig-devices") or {})
                except MigplanInputError:
                    return None
        return targets

    def _has(self, node: str, entries: list[dict[str, Any]]) -> bool:
        """Whether every listed GPU already has the entry's counts (`nvidia-mig-parted
        assert`)."""
        targets = self._targets(node, entries)
        fake = self._nodes[node]
        return targets is not None and all(
            fake.layout(i).profile_counts() == t.profile_counts() for i, t in targets.items()
        )

    def _apply(self, node: str, entries: list[dict[str, Any]]) -> bool:
        targets = self._targets(node, entries)
        if targets is None:
            return False
        with NvmlAdapter(self._nodes[node].pynvml) as nvml:
            for index, layout in targets.items():
                model = self._catalog.model(nvml.devices()[index].name)
                outcome = reconcile_gpu(
                    nvml, index=index, model=model, desired=layout, rebuild=True
                )
                if outcome.phase is not GpuPhase.CONVERGED:
                    return False
        return True
