"""migplan beside NVIDIA's GPU Operator on the real control plane: mig-manager kept off the
nodes the agent lays out (a mig-manager restart must not rebuild them)."""

from __future__ import annotations

import json

import pytest
import yaml
from operator_proc import running_operator
from pools import (
    ALWAYS_OPEN,
    add_pending,
    apply,
    build_pool,
    layout_of,
    make_plan,
    node_obj,
    plan_status,
    running,
)
from waiting import wait_for

from migplan.operator.controller.mig_manager import AGENT_OWNED
from migplan.operator.gpu_operator import (
    MIG_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
    MIG_MANAGER_DEPLOY_LABEL,
)
from migplan.operator.kube import client as kube
from migplan.operator.sim.mig_manager import SimulatedMigManager
from migplan.planner.catalog import default_catalog

pytestmark = pytest.mark.cluster
NAMESPACE = "gpu-operator"
DEFAULT_CONFIG = ("gpu-operator", "default-mig-parted-config")
# The GPU Operator labels MIG nodes with its default config and lets mig-manager run there.
GPU_OPERATOR_LABELS = {MIG_CONFIG_LABEL: "all-disabled", MIG_MANAGER_DEPLOY_LABEL: "true"}


def gpu_operator_namespace(cp) -> None:
    """The GPU Operator's namespace and its default mig-parted config (two of its entries)."""
    configs = {
        "version": "v1",
        "mig-configs": {
            "all-disabled": [{"devices": "all", "mig-enabled": False}],
            "all-1g.10gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}],
        },
    }
    apply(
        cp,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": DEFAULT_CONFIG[1], "namespace": NAMESPACE},
            "data": {"config.yaml": yaml.safe_dump(configs)},
        },
    )


def component_daemonset(name: str, app: str, deploy_label: str) -> dict:
    """A GPU Operator component's DaemonSet as the operator makes it: it runs where its
    `nvidia.com/gpu.deploy.*` label is `true` (kwok runs the pods)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "selector": {"matchLabels": {"app": app}},
            "template": {
                "metadata": {"labels": {"app": app}},
                "spec": {
                    "nodeSelector": {deploy_label: "true"},
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [{"name": "main", "image": "registry.invalid/nvidia:latest"}],
                },
            },
        },
    }


def pods_on(cp, app: str, node: str) -> list[dict]:
    items = json.loads(
        cp.kubectl(
            "get", "pods", "-n", NAMESPACE, "-l", f"app={app}", "-o", "json", check=False
        ).stdout
        or '{"items": []}'
    )["items"]
    return [p for p in items if p["spec"].get("nodeName") == node]


def test_a_mig_manager_restart_leaves_the_agents_layout(crds, operator_kubeconfig) -> None:
    cp = crds
    gpu_operator_namespace(cp)
    api = kube.connect(kubeconfig=str(cp.kubeconfig))
    catalog = default_catalog()
    fleet = build_pool(cp, "co", {"co-a": "-"}, labels=GPU_OPERATOR_LABELS)
    # A node no plan covers, with what mig-manager made at boot: shows what a restart does.
    other = build_pool(cp, "co-other", {"co-b": "1g.10gb@0"}, labels=GPU_OPERATOR_LABELS)
    managers = {
        name: SimulatedMigManager(
            api=api,
            nodes=f.nodes,
            plugin=f.plugin,
            catalog=catalog,
            config_map=DEFAULT_CONFIG,
            applied=dict.fromkeys(f.nodes, "all-disabled"),
        )
        for name, f in (("co", fleet), ("co-other", other))
    }
    fleet.hooks.append(managers["co"].sync)
    other.hooks.append(managers["co-other"].sync)
    apply(
        cp,
        component_daemonset("nvidia-mig-manager", "nvidia-mig-manager", MIG_MANAGER_DEPLOY_LABEL),
    )
    try:
        wait_for(lambda: pods_on(cp, "nvidia-mig-manager", "co-a"), "mig-manager on co-a")
        wanted = add_pending(cp, "co", 2)
        with running_operator(cp, kubeconfig=operator_kubeconfig):
            apply(cp, make_plan("co", "co", window=ALWAYS_OPEN, actuator="agent"))
            target = wait_for(
                lambda: layout_of(fleet, "co-a") != "-" and layout_of(fleet, "co-a"),
                "the agent to lay co-a out",
                timeout=90,
            )
            # mig-manager's pod left before the agent changed a GPU.
            assert not pods_on(cp, "nvidia-mig-manager", "co-a")
            # Mid-way, mig-manager comes back (an upgrade puts the label back) and restarts.
            cp.kubectl("label", "node", "co-a", f"{MIG_MANAGER_DEPLOY_LABEL}=true", "--overwrite")
            managers["co"].restart("co-a")
            wait_for(
                lambda: ("co-a", AGENT_OWNED, "failed") in managers["co"].outcomes,
                "the restarted mig-manager to refuse migplan's config",
            )
            status = wait_for(
                lambda: (s := plan_status(cp, "co")).get("phase") == "Ready" and s,
                "the rollout",
                timeout=90,
            )
            wait_for(lambda: running(cp, "co", *wanted), "the pending pods to run")
        assert status["rollout"]["nodes"]["co-a"]["step"] == "Done"
        assert layout_of(fleet, "co-a") == target  # the agent's layout survived
        assert managers["co"].applied_configs == []
        labels = node_obj(cp, "co-a")["metadata"]["labels"]
        assert labels[MIG_CONFIG_LABEL] == AGENT_OWNED
        assert labels[MIG_CONFIG_STATE_LABEL] == "failed"
        events = cp.kubectl(
            "get", "events", "--field-selector", "involvedObject.name=co", "-o", "json"
        ).stdout
        assert "MigManagerDisabled" in events
        # The same restart on a node migplan did not fence rebuilds its GPU.
        managers["co-other"].restart("co-b")
        wait_for(lambda: layout_of(other, "co-b") == "-", "mig-manager to apply all-disabled")
        assert managers["co-other"].applied_configs == [("co-b", "all-disabled")]
    finally:
        fleet.stop()
        other.stop()
        cp.kubectl("delete", "daemonset", "-n", NAMESPACE, "nvidia-mig-manager", check=False)
