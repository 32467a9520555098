"""migplan beside NVIDIA's GPU Operator on the real control plane: mig-manager kept off the
nodes the agent lays out (a mig-manager restart must not rebuild them), and the components
that read the instances restarted after a change, on that node only, in order."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import watch
from nodes import gpu_node, partition
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
from rollout_records import rollout_nodes
from waiting import wait_for

from migplan.operator.agent.components import GpuOperatorComponents
from migplan.operator.agent.node import NodeAgent
from migplan.operator.controller.mig_manager import AGENT_OWNED
from migplan.operator.gpu_operator import (
    MIG_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
    MIG_MANAGER_DEPLOY_LABEL,
    GpuOperatorSettings,
)
from migplan.operator.kube.connect import connect
from migplan.operator.nvml.emulator import FakeNvml
from migplan.operator.nvml.errors import LIBRARY_NOT_FOUND
from migplan.operator.sim.components import SimulatedComponents
from migplan.operator.sim.device_plugin import SimulatedDevicePlugin
from migplan.operator.sim.mig_manager import SimulatedMigManager
from migplan.planner.hardware.catalog import default_catalog

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
    api = connect(kubeconfig=str(cp.kubeconfig))
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
        assert rollout_nodes(cp, "co", status)["co-a"]["step"] == "Done"
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


COMPONENTS = {
    # DaemonSet / app label -> its nvidia.com/gpu.deploy.* label
    "nvidia-device-plugin-daemonset": "nvidia.com/gpu.deploy.device-plugin",
    "gpu-feature-discovery": "nvidia.com/gpu.deploy.gpu-feature-discovery",
    "nvidia-dcgm-exporter": "nvidia.com/gpu.deploy.dcgm-exporter",
}


class PodDeletions:
    """Records (time received, app, node) of every pod deleted in the GPU Operator's
    namespace while it runs: watched from the resourceVersion of a list made on entry, so
    nothing deleted after entry is missed however late the watch opens."""

    def __init__(self, api) -> None:
        self.seen: list[tuple[float, str, str]] = []
        self._api = api.connection
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._since = ""

    def _watch(self) -> None:
        stream = watch.Watch()
        core = k8s.CoreV1Api(self._api)
        while not self._stop.is_set():
            for event in stream.stream(
                core.list_namespaced_pod,
                NAMESPACE,
                resource_version=self._since,
                timeout_seconds=2,
            ):
                pod = event["object"]
                self._since = pod.metadata.resource_version  # the next watch goes on from here
                if event["type"] == "DELETED":
                    app = (pod.metadata.labels or {}).get("app", "")
                    self.seen.append((time.time(), app, pod.spec.node_name or ""))

    def __enter__(self) -> PodDeletions:
        listed = k8s.CoreV1Api(self._api).list_namespaced_pod(NAMESPACE)
        self._since = listed.metadata.resource_version
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def running_pods(cp, node: str) -> dict[str, str]:
    """app -> uid of the Running component pods on `node`."""
    items = json.loads(cp.kubectl("get", "pods", "-n", NAMESPACE, "-o", "json").stdout)["items"]
    return {
        p["metadata"]["labels"]["app"]: p["metadata"]["uid"]
        for p in items
        if p["spec"].get("nodeName") == node
        and p["status"].get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    }


def test_after_a_change_the_agent_restarts_this_nodes_components_in_order(crds, tmp_path) -> None:
    cp = crds
    api = connect(kubeconfig=str(cp.kubeconfig))
    gpu_operator_namespace(cp)
    deploy = dict.fromkeys(COMPONENTS.values(), "true")
    nodes = {n: FakeNvml(["H100-80GB"], mig=True) for n in ("rc-a", "rc-b")}
    apply(
        cp,
        *(gpu_node(n, product="NVIDIA-H100-80GB-HBM3", pool="rc", labels=deploy) for n in nodes),
        *(component_daemonset(app, app, label) for app, label in COMPONENTS.items()),
    )
    plugin = SimulatedDevicePlugin(api=api, nodes=nodes)
    settings = GpuOperatorSettings()
    sim = SimulatedComponents(api=api, plugin=plugin, settings=settings)
    stop = threading.Event()

    def components() -> None:
        while not stop.is_set():
            for node in nodes:
                sim.sync(node)
            stop.wait(0.3)

    threading.Thread(target=components, daemon=True).start()
    marker = tmp_path / "cdi-generated"
    restarter = GpuOperatorComponents(api=api, settings=settings, cdi_command="false")
    agent = NodeAgent(
        api=api,
        node="rc-a",
        nvml=lambda: nodes["rc-a"].pynvml,
        catalog=default_catalog(),
        bindings=plugin,
        device_plugin=restarter,
        allocatable_timeout=30,
    )
    try:
        for node in nodes:
            wait_for(lambda n=node: len(running_pods(cp, n)) == 3, f"components on {node}")
        before_a, before_b = running_pods(cp, "rc-a"), running_pods(cp, "rc-b")
        api.plans.apply_node_partition(body=partition("rc-a", "3g.40gb@0+3g.40gb@4"))
        with PodDeletions(api) as deletions:
            # A failing CDI command fails the pass and restarts nothing ...
            status = agent.run_once()
            assert status.phase == "Failed"
            ready = next(c for c in status.conditions if c.type == "Ready")
            assert ready.reason == "ComponentsNotRestarted"
            assert "CDI command false exited 1" in ready.message
            # The agent deletes synchronously: had it deleted any, they would be gone now.
            assert running_pods(cp, "rc-a") == before_a
            # ... and the next pass, with a working one, restarts them.
            restarter.cdi_command = [
                sys.executable,
                "-c",
                f"import pathlib, time; pathlib.Path({str(marker)!r}).write_text(str(time.time()))",
            ]
            status = agent.run_once()
            wait_for(lambda: len(deletions.seen) >= 3, "the watch to see three deletions", 30)
        assert status.phase == "Applied", status
        ready = next(c for c in status.conditions if c.type == "Ready")
        assert "GFD's labels agree" in ready.message
        assert [(app, node) for _, app, node in deletions.seen] == [
            ("nvidia-device-plugin-daemonset", "rc-a"),
            ("gpu-feature-discovery", "rc-a"),
            ("nvidia-dcgm-exporter", "rc-a"),
        ]
        assert float(marker.read_text()) < deletions.seen[0][0]  # CDI spec first
        labels = node_obj(cp, "rc-a")["metadata"]["labels"]
        assert labels["nvidia.com/mig-3g.40gb.count"] == "2"
        assert running_pods(cp, "rc-b") == before_b  # the other node's pods never restarted
        wait_for(lambda: len(running_pods(cp, "rc-a")) == 3, "rc-a's components back")
    finally:
        stop.set()
        for app in COMPONENTS:
            cp.kubectl("delete", "daemonset", "-n", NAMESPACE, app, "--wait=false", check=False)
        for node in nodes:
            cp.kubectl("delete", "node", node, "--wait=false", check=False)
            cp.kubectl("delete", "nodepartition", node, "--wait=false", check=False)


def doctor(cp, *args: str) -> tuple[int, dict]:
    """`migplan doctor -o json` against the test cluster: (exit code, document)."""
    done = subprocess.run(
        [str(Path(sys.executable).with_name("migplan")), "doctor", "-o", "json", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "KUBECONFIG": str(cp.kubeconfig), "PYTHONSAFEPATH": "1"},
        timeout=120,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout)


def test_preflight_refuses_a_single_strategy_node_and_says_why(
    crds, operator_kubeconfig, tmp_path
) -> None:
    cp = crds
    fleet = build_pool(cp, "pf", {"pf-a": "-", "pf-b": "-"})
    cp.kubectl("label", "node", "pf-b", "nvidia.com/mig.strategy=single", "--overwrite")
    plan = make_plan("pf", "pf", window=ALWAYS_OPEN, actuator="agent")
    try:
        add_pending(cp, "pf", 4)  # two 3g.40gb per GPU: both nodes would be needed
        with running_operator(cp, kubeconfig=operator_kubeconfig):
            apply(cp, plan)
            status = wait_for(
                lambda: (s := plan_status(cp, "pf")).get("phase") == "Ready" and s,
                "the rollout of the node preflight allows",
                timeout=90,
            )
            wide = cp.kubectl("get", "gpp", "pf", "-o", "wide").stdout.splitlines()
        assert wide[0].split()[-3:] == ["PREFLIGHT", "SCALE-OUT", "AGE"]
        column = wide[0].index("PREFLIGHT")  # kubectl aligns each column under its header
        assert wide[1][column:].split()[0] == "MigStrategy"
        preflight = next(c for c in status["conditions"] if c["type"] == "Preflight")
        assert (preflight["status"], preflight["reason"]) == ("False", "MigStrategy")
        assert "1 of 2 nodes refused: pf-b: MIG strategy single" in preflight["message"]
        assert status["plan"]["leftOut"]["pf-b"].startswith("preflight: MIG strategy single")
        assert set(rollout_nodes(cp, "pf", status)) == {"pf-a"}
        assert status["demandMet"] == "2/4"
        assert layout_of(fleet, "pf-b") == "-"
        refused = [f for f in status["preflight"] if f["severity"] == "blocking"]
        assert [(f["node"], f["check"]) for f in refused] == [("pf-b", "MigStrategy")]
        assert "--set mig.strategy=mixed" in refused[0]["fix"]
        events = json.loads(
            cp.kubectl(
                "get", "events", "--field-selector", "involvedObject.name=pf", "-o", "json"
            ).stdout
        )["items"]
        warned = [e for e in events if e["reason"] == "Preflight"]
        assert warned
        assert warned[0]["type"] == "Warning"
        # The same, read-only, from the command line: the plan's nodes, for its actuator.
        plan_file = tmp_path / "plan.yaml"
        plan_file.write_text(yaml.safe_dump(plan))
        code, document = doctor(cp, "--plan", str(plan_file))
        assert code == 1
        found = {(f["node"], f["check"]): f for f in document["findings"]}
        assert found[("pf-b", "MigStrategy")]["severity"] == "blocking"
        assert found[("pf-a", "MigStrategy")]["severity"] == "ok"
        assert found[("pf-a", "DevicePlugin")]["severity"] == "warning"  # no plugin pod here
        assert found[("pf-a", "Agent")]["severity"] == "ok"
        # Under mig-manager, a node without a mig-manager pod would be refused too; pf-a has
        # none because migplan turned it off for its agent (and would turn it back on).
        code, document = doctor(cp, "--plan", str(plan_file), "--actuator", "mig-manager")
        found = {(f["node"], f["check"]): f for f in document["findings"]}
        assert found[("pf-b", "MigManager")]["severity"] == "blocking"
        assert found[("pf-a", "MigManager")]["severity"] == "info"
    finally:
        fleet.stop()


def test_an_agent_without_nvml_says_so_and_doctor_names_the_fix(crds) -> None:
    cp = crds
    api = connect(kubeconfig=str(cp.kubeconfig))
    apply(cp, gpu_node("nv-a", product="NVIDIA-H100-80GB-HBM3", pool="nv"))
    fake = FakeNvml(["H100-80GB"], mig=True)
    fake.fail("nvmlInitWithFlags", code=LIBRARY_NOT_FOUND)  # as the CUDA stub library does
    plugin = SimulatedDevicePlugin(api=api, nodes={"nv-a": fake})
    api.plans.apply_node_partition(body=partition("nv-a", "-"))
    agent = NodeAgent(
        api=api,
        node="nv-a",
        nvml=lambda: fake.pynvml,
        catalog=default_catalog(),
        bindings=plugin,
        device_plugin=plugin,
    )
    try:
        status = agent.run_once()
        assert status.phase == "NvmlUnavailable"
        (condition,) = status.conditions
        assert (condition.type, condition.status, condition.reason) == (
            "NvmlReady",
            "False",
            "LibraryNotFound",
        )
        assert "runtimeClassName: nvidia" in condition.message
        code, document = doctor(cp)
        assert code == 1
        nvml = [f for f in document["findings"] if f["node"] == "nv-a" and f["check"] == "Nvml"]
        assert nvml[0]["severity"] == "blocking"
        assert "NVML_ERROR_LIBRARY_NOT_FOUND" in nvml[0]["message"]
        # The next pass, with NVML back, reports the GPUs again.
        status = agent.run_once()
        assert status.phase == "Applied"
        assert next(c for c in status.conditions if c.type == "NvmlReady").status == "True"
    finally:
        cp.kubectl("delete", "node", "nv-a", "--wait=false", check=False)
        cp.kubectl("delete", "nodepartition", "nv-a", "--wait=false", check=False)
