"""The mig-manager actuator: hand a node's target to NVIDIA's GPU Operator.

The GPU Operator's mig-manager applies the mig-parted config named by the node label
`nvidia.com/mig.config`, taken from a ConfigMap, and reports in `nvidia.com/mig.config.state`
(`pending`, `rebooting`, `success`, `failed`). migplan keeps one ConfigMap with an entry per
node and target (`migplan-<node>-<node hash>-<digest>`, always a valid label value; a new
target is a new label value), and clears
the state label when it sets the config label, so a stale `success` is never mistaken for
the new one.
"""

from __future__ import annotations

from typing import Any

import yaml

from migplan.operator.kube import client as kube
from migplan.planner.migparted import config_name, node_config, owned_by

CONFIG_LABEL = "nvidia.com/mig.config"
STATE_LABEL = "nvidia.com/mig.config.state"
CONFIG_KEY = "config.yaml"
"""The key mig-manager reads in its ConfigMap (point the ClusterPolicy's migManager.config
at this ConfigMap)."""


def hand_over(
    api: Any, *, node: str, targets: dict[int, str], namespace: str, config_map: str
) -> str:
    """Write the node's target into the ConfigMap and point the node's label at it; the
    config name."""
    entries = node_config(targets)
    name = config_name(node, entries)

    def edit(data: dict[str, str]) -> dict[str, str]:
        document = yaml.safe_load(data.get(CONFIG_KEY) or "") or {}
        configs = dict(document.get("mig-configs") or {})
        # A node's older targets go; other nodes' entries stay.
        configs = {k: v for k, v in configs.items() if not owned_by(k, node)}
        configs[name] = entries
        document = {"version": "v1", "mig-configs": dict(sorted(configs.items()))}
        return {**data, CONFIG_KEY: yaml.safe_dump(document, sort_keys=False)}

    kube.edit_config_map(api, namespace=namespace, name=config_map, edit=edit)
    kube.patch_node(
        api,
        name=node,
        body={"metadata": {"labels": {CONFIG_LABEL: name, STATE_LABEL: None}}},
    )
    return name


def state_of(api: Any, *, node: str) -> tuple[str | None, str | None]:
    """(config label, state label) of the node."""
    labels = kube.get_node(api, name=node).metadata.labels or {}
    return labels.get(CONFIG_LABEL), labels.get(STATE_LABEL)
