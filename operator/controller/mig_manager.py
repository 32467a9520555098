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

from migplan.operator.gpu_operator import (
    AGENT_OWNED,
    CONFIG_KEY,
    DISABLED_BY_MIGPLAN,
    MIG_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
    MIG_MANAGER_DEPLOY_LABEL,
    GpuOperatorSettings,
)
from migplan.operator.kube.seam import Kube
from migplan.planner.export.migparted import config_name, node_config, owned_by

CONFIG_LABEL = MIG_CONFIG_LABEL
STATE_LABEL = MIG_CONFIG_STATE_LABEL


def write_configs(
    api: Kube, *, targets: dict[str, dict[int, str]], namespace: str, config_map: str
) -> dict[str, tuple[str, str]]:
    """Write each node's target into the ConfigMap under two names, one for the first try
    and a fresh one for a retry; node -> (name, retry name). A node's older entries go,
    other nodes' entries stay.

    Written when the plan is made, well before a node's label points at them: mig-manager
    reads the ConfigMap through its mounted file, which kubelet refreshes a minute or more
    after the write, and it does not retry a config it could not find.
    """
    names: dict[str, tuple[str, str]] = {}
    entries: dict[str, Any] = {}
    for node, layouts in targets.items():
        config = node_config(layouts)
        first, retry = config_name(node, config), config_name(node, config, attempt=1)
        names[node] = (first, retry)
        entries[first] = entries[retry] = config

    def edit(data: dict[str, str]) -> dict[str, str]:
        document = yaml.safe_load(data.get(CONFIG_KEY) or "") or {}
        configs = {
            k: v
            for k, v in (document.get("mig-configs") or {}).items()
            if not any(owned_by(k, node) for node in targets)
        }
        configs.update(entries)
        document = {"version": "v1", "mig-configs": dict(sorted(configs.items()))}
        return {**data, CONFIG_KEY: yaml.safe_dump(document, sort_keys=False)}

    if targets:
        api.core.edit_config_map(namespace=namespace, name=config_map, edit=edit)
    return names


def point_at(api: Kube, *, node: str, name: str) -> None:
    """Set the node's `nvidia.com/mig.config` to `name`, clearing the state label in the same
    write (a stale `success` is never mistaken for the new one)."""
    enable_on_node(api, node=node)
    api.core.patch_node(
        name=node,
        body={"metadata": {"labels": {CONFIG_LABEL: name, STATE_LABEL: None}}},
    )


def hand_over(
    api: Kube, *, node: str, targets: dict[int, str], namespace: str, config_map: str
) -> str:
    """Write the node's target into the ConfigMap and point the node's label at it at once;
    the config name. (Only where mig-manager reads the ConfigMap through the API; the
    rollout waits for kubelet between the two.)"""
    name, _ = write_configs(
        api, targets={node: targets}, namespace=namespace, config_map=config_map
    )[node]
    point_at(api, node=node, name=name)
    return name


def disable_on_node(api: Kube, *, node: str) -> bool:
    """Keep mig-manager off a node whose GPUs the agent changes; whether a label changed.

    mig-manager applies the config its label names each time it starts, so a mig-manager
    restart (an upgrade, an evicted pod) would rebuild GPUs the agent laid out. Its
    DaemonSet runs only where `nvidia.com/gpu.deploy.mig-manager=true`, and the GPU Operator
    adds that label only when it is missing, so `false` keeps it away for good; the config
    label names a config that does not exist, in case a mig-manager starts there anyway.
    """
    labels = api.core.get_node(name=node).metadata.labels or {}
    if labels.get(MIG_MANAGER_DEPLOY_LABEL) == "false" and labels.get(CONFIG_LABEL) == AGENT_OWNED:
        return False
    api.core.patch_node(
        name=node,
        body={
            "metadata": {
                "labels": {MIG_MANAGER_DEPLOY_LABEL: "false", CONFIG_LABEL: AGENT_OWNED},
                "annotations": {DISABLED_BY_MIGPLAN: "true"},
            }
        },
    )
    return True


def enable_on_node(api: Kube, *, node: str) -> None:
    """Undo `disable_on_node` (the node is handed to mig-manager now)."""
    node_obj = api.core.get_node(name=node)
    if (node_obj.metadata.annotations or {}).get(DISABLED_BY_MIGPLAN):
        api.core.patch_node(
            name=node,
            body={
                "metadata": {
                    "labels": {MIG_MANAGER_DEPLOY_LABEL: "true"},
                    "annotations": {DISABLED_BY_MIGPLAN: None},
                }
            },
        )


def pods_on(api: Kube, *, node: str, settings: GpuOperatorSettings) -> list[str]:
    """Names of the mig-manager pods on `node` (terminating ones too: they may still act)."""
    return [
        str(p.metadata.name)
        for p in api.core.list_pods(
            namespace=settings.namespace, label_selector=settings.mig_manager, node=node
        )
    ]


def state_of(api: Kube, *, node: str) -> tuple[str | None, str | None]:
    """(config label, state label) of the node."""
    labels = api.core.get_node(name=node).metadata.labels or {}
    return labels.get(CONFIG_LABEL), labels.get(STATE_LABEL)
