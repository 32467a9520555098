"""The node agent on the real control plane: a NodePartition is applied through the NVML
emulator, the simulated device plugin advertises the new instances, the real scheduler
places a pending pod on one, and a change that would destroy it is refused."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from kubernetes import client as k8s
from nodes import gpu_node, mig_pod, partition
from waiting import wait_for

from migplan.operator.agent.node import NodeAgent
from migplan.operator.cli.app import run
from migplan.operator.kube.connect import connect
from migplan.operator.nvml.adapter import NvmlAdapter
from migplan.operator.nvml.emulator import FakeNvml
from migplan.operator.sim.device_plugin import SimulatedDevicePlugin
from migplan.planner.hardware.catalog import default_catalog
from migplan.planner.hardware.layout import Layout

pytestmark = pytest.mark.cluster


def test_agent_applies_a_partition_and_the_scheduler_uses_it(crds) -> None:
    cp = crds
    api = connect(kubeconfig=str(cp.kubeconfig))
    nodes = {f"sim-h100-{i}": FakeNvml(["H100-80GB"], mig=True) for i in range(2)}
    for name in nodes:
        cp.kubectl(
            "apply", "-f", "-", stdin=json.dumps(gpu_node(name, product="NVIDIA-H100-80GB-HBM3"))
        )
    plugin = SimulatedDevicePlugin(api=api, nodes=nodes)
    for name in nodes:
        plugin.publish(name)
    agent = NodeAgent(
        api=api,
        node="sim-h100-0",
        nvml=lambda: nodes["sim-h100-0"].pynvml,
        catalog=default_catalog(),
        bindings=plugin,
        device_plugin=plugin,
        allocatable_timeout=30,
    )

    api.plans.apply_node_partition(body=partition("sim-h100-0", "3g.40gb@0+3g.40gb@4"))
    status = agent.run_once()
    assert status is not None
    assert status.phase == "Applied"
    assert status.applied_generation == 1
    profiles = next(c for c in status.conditions if c.type == "ProfilesMatch")
    assert profiles.status == "True"
    assert str(nodes["sim-h100-0"].layout(0)) == "3g.40gb@0+3g.40gb@4"
    node = api.core.get_node(name="sim-h100-0")
    assert node.status.allocatable["nvidia.com/mig-3g.40gb"] == "2"
    table = cp.kubectl("get", "np", "sim-h100-0").stdout.splitlines()[1].split()
    assert table[:5] == ["sim-h100-0", "sim-h100-0", "1", "Applied", "1"]

    cp.kubectl("apply", "-f", "-", stdin=json.dumps(mig_pod("serve-0", profile="3g.40gb")))
    pod = wait_for(
        lambda: (
            (p := json.loads(cp.kubectl("get", "pod", "serve-0", "-o", "json").stdout))[
                "status"
            ].get("phase")
            == "Running"
            and p
        ),
        "the pod to run on the new instance",
    )
    assert pod["spec"]["nodeName"] == "sim-h100-0"
    plugin.sync("sim-h100-0")
    status = agent.run_once()
    assert list(status.gpus[0].in_use.values()) == ["default/serve-0"]

    # A target that would destroy the pod's instance is refused until the pod is evicted.
    api.plans.apply_node_partition(body=partition("sim-h100-0", "7g.80gb@0"))
    blocked = agent.run_once()
    assert blocked.phase == "Blocked"
    ready = next(c for c in blocked.conditions if c.type == "Ready")
    assert "default/serve-0, which has not been evicted" in ready.message
    assert ready.reason == "Blocked"  # not EvictedPodsStopping: the operator fails the node
    assert blocked.applied_generation == 1
    assert str(nodes["sim-h100-0"].layout(0)) == "3g.40gb@0+3g.40gb@4"

    # The operator evicts the pod and says so in the spec; once it is gone the change goes on.
    cp.kubectl("delete", "pod", "serve-0", "--wait=true", "--timeout=60s")
    api.plans.apply_node_partition(
        body=partition("sim-h100-0", "7g.80gb@0", evicted=["default/serve-0"])
    )
    plugin.sync("sim-h100-0")
    applied = agent.run_once()
    assert applied.phase == "Applied"
    assert applied.applied_generation == 3
    assert str(nodes["sim-h100-0"].layout(0)) == "7g.80gb@0"

    # Same spec again: no NVML change at all, and no status write either.
    nodes["sim-h100-0"].calls.clear()
    version = json.loads(cp.kubectl("get", "np", "sim-h100-0", "-o", "json").stdout)["metadata"][
        "resourceVersion"
    ]
    assert agent.run_once().phase == "Applied"
    assert (
        json.loads(cp.kubectl("get", "np", "sim-h100-0", "-o", "json").stdout)["metadata"][
            "resourceVersion"
        ]
        == version
    )
    changing = ("Create", "Destroy", "SetMigMode")
    assert not [c for c in nodes["sim-h100-0"].calls if any(w in c for w in changing)]


def test_one_process_simulates_fifty_gpu_nodes(crds) -> None:
    cp = crds
    api = connect(kubeconfig=str(cp.kubeconfig))
    layouts = ["1g.10gb@0+1g.10gb@1+2g.20gb@2+3g.40gb@4", "7g.80gb@0"]
    nodes = {}
    for i in range(50):
        fake = FakeNvml(["H100-80GB", "H100-80GB"], mig=True)
        for gpu, layout in enumerate(layouts):
            with NvmlAdapter(fake.pynvml) as nvml:
                model = default_catalog().model("H100-80GB")
                for inst in Layout.parse(layout).instances:
                    p = model.profile(inst.profile)
                    nvml.create_instance(gpu, profile_id=p.id, start=inst.start, size=p.size)
        nodes[f"fleet-{i:02d}"] = fake
    manifests = [gpu_node(name, product="NVIDIA-H100-80GB-HBM3", gpus=2) for name in nodes]
    cp.kubectl(
        "apply",
        "-f",
        "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests}),
    )
    plugin = SimulatedDevicePlugin(api=api, nodes=nodes)
    started = time.monotonic()
    for name in nodes:
        plugin.publish(name)
    published = time.monotonic() - started
    capacity = {
        n.metadata.name: n.status.allocatable
        for n in k8s.CoreV1Api(api.connection).list_node(label_selector="type=kwok").items
        if n.metadata.name.startswith("fleet-")
    }
    assert len(capacity) == 50
    assert all(
        c["nvidia.com/mig-7g.80gb"] == "1" and c["nvidia.com/mig-1g.10gb"] == "2"
        for c in capacity.values()
    )
    assert published < 30


def np_status(cp, name: str) -> dict:
    return json.loads(cp.kubectl("get", "np", name, "-o", "json").stdout).get("status", {})


def test_agent_command_once(crds, capsys) -> None:
    cp = crds
    api = connect(kubeconfig=str(cp.kubeconfig))
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(gpu_node("cli-a30", product="NVIDIA-A30")))
    api.plans.apply_node_partition(body=partition("cli-a30", "2g.12gb@0+1g.6gb@2+1g.6gb@3"))
    code = run(
        [
            "agent",
            "--node",
            "cli-a30",
            "--kubeconfig",
            str(cp.kubeconfig),
            "--simulate",
            "A30",
            "--once",
        ]
    )
    assert code == 0
    assert "cli-a30: Applied" in capsys.readouterr().out
    allocatable = api.core.get_node(name="cli-a30").status.allocatable
    assert allocatable["nvidia.com/mig-1g.6gb"] == "2"
    assert np_status(cp, "cli-a30")["gpus"][0]["layout"] == "2g.12gb@0+1g.6gb@2+1g.6gb@3"


def test_agent_process_follows_changes_and_stops_cleanly(crds, tmp_path) -> None:
    cp = crds
    api = connect(kubeconfig=str(cp.kubeconfig))
    cp.kubectl(
        "apply", "-f", "-", stdin=json.dumps(gpu_node("loop-h100", product="NVIDIA-H100-80GB-HBM3"))
    )
    api.plans.apply_node_partition(body=partition("loop-h100", "7g.80gb@0"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    migplan = str(Path(sys.executable).parent / "migplan")
    proc = subprocess.Popen(
        [
            migplan,
            "agent",
            "--node",
            "loop-h100",
            "--kubeconfig",
            str(cp.kubeconfig),
            "--simulate",
            "H100-80GB",
            "--interval",
            "2",
            "--liveness",
            f"http://127.0.0.1:{port}/healthz",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "MIGPLAN_LOG_LEVEL": "info"},
    )
    try:
        wait_for(lambda: np_status(cp, "loop-h100").get("phase") == "Applied", "first pass")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as reply:
            assert reply.status == 200
        api.plans.apply_node_partition(body=partition("loop-h100", "4g.40gb@0+3g.40gb@4"))
        wait_for(
            lambda: np_status(cp, "loop-h100").get("appliedGeneration") == 2,
            "the agent to apply the changed spec",
            timeout=30,
        )
        assert np_status(cp, "loop-h100")["gpus"][0]["layout"] == "4g.40gb@0+3g.40gb@4"
    finally:
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, output
    assert '"event": "reconciled"' in output


def test_agent_reports_profiles_that_differ_from_the_hardware(crds) -> None:
    cp = crds
    api = connect(kubeconfig=str(cp.kubeconfig))
    real = default_catalog().model("H200-141GB")
    # A "hardware" H200 whose 3g.71gb only starts at 4 (our starts are inferred from H100).
    hardware = real.model_copy(
        update={
            "profiles": tuple(
                p.model_copy(update={"starts": (4,)}) if p.name == "3g.71gb" else p
                for p in real.profiles
            )
        }
    )
    fake = FakeNvml([hardware], mig=True)
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(gpu_node("h200-odd", product="NVIDIA-H200")))
    plugin = SimulatedDevicePlugin(api=api, nodes={"h200-odd": fake})
    plugin.publish("h200-odd")
    api.plans.apply_node_partition(body=partition("h200-odd", "7g.141gb@0"))
    agent = NodeAgent(
        api=api,
        node="h200-odd",
        nvml=lambda: fake.pynvml,
        catalog=default_catalog(),
        bindings=plugin,
        device_plugin=plugin,
        allocatable_timeout=30,
    )
    status = agent.run_once()
    profiles = next(c for c in status.conditions if c.type == "ProfilesMatch")
    assert profiles.status == "False"
    assert "3g.71gb: placements is {4}:4 on this GPU, {0,4}:4 in profiles/" in profiles.message
