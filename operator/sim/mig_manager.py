"""A simulated GPU Operator mig-manager for emulated nodes, obeying its label protocol.

When a node's `nvidia.com/mig.config` names a config it has not applied, it sets
`nvidia.com/mig.config.state=pending`, reads the mig-parted config from the ConfigMap,
rebuilds every listed GPU from empty with the counts asked for (placed first-fit, as
mig-parted does), restarts the device plugin and sets `success`; `failed` if a GPU still
runs processes or the config is missing. Nodes in `wedged` stay `pending` forever (the
failure mode mig-parted#485 describes).
"""

from __future__ import annotations

from typing import Any

import yaml

from migplan.operator.agent.reconcile import GpuPhase, reconcile_gpu
from migplan.operator.controller.mig_manager import CONFIG_KEY, CONFIG_LABEL, STATE_LABEL
from migplan.operator.kube import client as kube
from migplan.operator.nvml.adapter import NvmlAdapter
from migplan.operator.nvml.emulator import FakeNvml
from migplan.operator.sim.device_plugin import SimulatedDevicePlugin
from migplan.planner.catalog import Catalog
from migplan.planner.errors import MigplanInputError
from migplan.planner.migparted import first_fit_layout


class SimulatedMigManager:
    """mig-manager behaviour for `nodes` (node name -> its emulated GPUs)."""

    def __init__(
        self,
        *,
        api: Any,
        nodes: dict[str, FakeNvml],
        plugin: SimulatedDevicePlugin,
        catalog: Catalog,
        config_map: tuple[str, str],
        wedged: frozenset[str] = frozenset(),
    ) -> None:
        self._api = api
        self._nodes = nodes
        self._plugin = plugin
        self._catalog = catalog
        self._config_map = config_map
        self._wedged = wedged
        self._applied: dict[str, str] = {}
        self.applied_configs: list[tuple[str, str]] = []

    def _label(self, node: str, state: str) -> None:
        kube.patch_node(self._api, name=node, body={"metadata": {"labels": {STATE_LABEL: state}}})

    def sync(self, node: str) -> None:
        """Act on the node's labels once (called for every node by the fleet's sweep)."""
        labels = kube.get_node(self._api, name=node).metadata.labels or {}
        wanted = labels.get(CONFIG_LABEL)
        if not wanted or self._applied.get(node) == wanted:
            return
        if labels.get(STATE_LABEL) != "pending":
            self._label(node, "pending")
        if node in self._wedged:
            return
        self._applied[node] = wanted
        self._label(node, "success" if self._apply(node, wanted) else "failed")
        self._plugin.restart(node)

    def _apply(self, node: str, wanted: str) -> bool:
        namespace, name = self._config_map
        data = kube.get_config_map_data(self._api, namespace=namespace, name=name)
        document = yaml.safe_load(data.get(CONFIG_KEY) or "") or {}
        entries = (document.get("mig-configs") or {}).get(wanted)
        if not entries:
            return False
        with NvmlAdapter(self._nodes[node]) as nvml:
            devices = {d.index: d for d in nvml.devices()}
            for entry in entries:
                for index in entry["devices"]:
                    model = self._catalog.model(devices[index].name)
                    try:
                        layout = first_fit_layout(model, entry.get("mig-devices") or {})
                    except MigplanInputError:
                        return False
                    outcome = reconcile_gpu(
                        nvml, index=index, model=model, desired=layout, rebuild=True
                    )
                    if outcome.phase is not GpuPhase.CONVERGED:
                        return False
        self.applied_configs.append((node, wanted))
        return True
