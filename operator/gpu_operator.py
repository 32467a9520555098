"""What migplan needs to know about NVIDIA's GPU Operator: where its pods run, how to find
each component's pod on a node, and the node labels it reads and writes.

Every name here is a setting (`GpuOperatorSettings`), because installs differ: the GPU
Operator's namespace is chosen at `helm install`, and a device plugin installed on its own
carries other labels. The defaults are the GPU Operator's own (its Helm chart and the labels
in mig-parted's `pkg/mig/reconfigure/reconfigure.go`).
"""

from __future__ import annotations

from dataclasses import dataclass

MIG_CONFIG_LABEL = "nvidia.com/mig.config"
"""The mig-parted config mig-manager applies on the node (it acts when the value changes
and each time it starts)."""
MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"
MIG_MANAGER_DEPLOY_LABEL = "nvidia.com/gpu.deploy.mig-manager"
"""mig-manager's DaemonSet runs only on nodes where this is `true`; the GPU Operator adds
it when missing and never changes a value that is there."""
DRA_PLUGIN_NAMESPACE = "nvidia-dra-driver-gpu"
DRA_PLUGIN_SELECTOR = "nvidia-dra-driver-gpu-component=kubelet-plugin"
"""NVIDIA's DRA driver chart labels its kubelet-plugin DaemonSet's pods so (the driver is
installed beside the GPU Operator, in its own namespace)."""

STRATEGY_LABEL = "nvidia.com/mig.strategy"
"""GPU feature discovery's label: `mixed` is the only strategy under which MIG instances
are advertised as `nvidia.com/mig-<profile>`."""

AGENT_OWNED = "migplan-agent"
"""`nvidia.com/mig.config` on nodes whose GPUs migplan's agent changes. No mig-parted config
has this name, so a mig-manager that starts there anyway fails its config check
(`nvidia-mig-parted assert --valid-config`) before it pauses a component or touches a GPU."""
DISABLED_BY_MIGPLAN = "migplan.io/mig-manager-disabled"
"""Node annotation: migplan set `nvidia.com/gpu.deploy.mig-manager=false` (and puts it back
to `true` if a plan later hands the node to mig-manager)."""
CONFIG_KEY = "config.yaml"
"""The key mig-manager reads in its ConfigMap (point the ClusterPolicy's migManager.config
at this ConfigMap)."""


@dataclass(frozen=True)
class GpuOperatorSettings:
    """Where the GPU Operator's components are and how their pods are labelled."""

    namespace: str = "gpu-operator"
    strategy_label: str = STRATEGY_LABEL
    device_plugin: str = "app=nvidia-device-plugin-daemonset"
    feature_discovery: str = "app=gpu-feature-discovery"
    dcgm_exporter: str = "app=nvidia-dcgm-exporter"
    mig_manager: str = "app=nvidia-mig-manager"

    def components(self) -> dict[str, str]:
        """Component name -> label selector of its pods."""
        return {
            "device-plugin": self.device_plugin,
            "gpu-feature-discovery": self.feature_discovery,
            "dcgm-exporter": self.dcgm_exporter,
            "mig-manager": self.mig_manager,
        }

    def restart_order(self) -> tuple[tuple[str, str], ...]:
        """(component, selector) to restart after the node's instances change, in order: the
        device plugin first (pods wait on what it advertises), then the components that
        describe or watch the instances (mig-parted's reconfigure restores them in the same
        order)."""
        return (
            ("device-plugin", self.device_plugin),
            ("gpu-feature-discovery", self.feature_discovery),
            ("dcgm-exporter", self.dcgm_exporter),
        )
