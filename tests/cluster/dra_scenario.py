"""DRA at fleet size, in both modes; shared by tests/cluster/test_dra_scenario.py (a few
nodes, checked) and bench/dra.py (200 nodes, reported).

N one-GPU H100 nodes whose MIG devices NVIDIA's DRA driver publishes:
- `steer`: DynamicMIG slices, no agent; the operator taints every slot outside its plan.
- `static`: empty GPUs, the agent and the simulated DRA kubelet plugin (static MIG devices).

A plan for the pool (its pending pods as demand, window always open) is applied first; then
two waves of pods with claims (ResourceClaimTemplates, one MIG device each) arrive: N for
3g.40gb, then N for 2g.20gb and N for 1g.10gb. Once a wave's pods are all turned away by the
scheduler, a re-plan is asked for (the `migplan.io/rebalance` annotation, what `migplan
rebalance` writes); the wave's pods then run. Measured per pod: creation -> Running
(ContainersReady, second resolution, the wait for the scheduler's verdict included); per wave:
re-plan asked -> every pod Running; and that no pod of the first wave had its device changed.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from dra_objects import MIG_CLASS, claim_pod, claim_template
from nodes import gpu_node, reported
from operator_proc import running_operator
from pools import apply
from waiting import wait_for

from migplan.operator.kube.connect import connect
from migplan.operator.sim.dra_slices import PublishedGpu, resource_slices
from migplan.operator.sim.fleet import SimulatedFleet, emulated_node
from migplan.planner.hardware.catalog import default_catalog

WAVES = (("3g.40gb",), ("2g.20gb", "1g.10gb"))


@dataclass
class DraRun:
    """What happened in one mode."""

    mode: str
    nodes: int
    waits: dict[str, float] = field(default_factory=dict)
    """Pod -> creation to Running, s."""
    wave_seconds: list[float] = field(default_factory=list)
    """Per wave: re-plan asked -> every pod of the wave Running."""
    first_ready_s: float = 0.0
    """Plan applied -> Ready (steer: every slot tainted)."""
    taint_rules: int = 0
    disturbed: list[str] = field(default_factory=list)
    """First-wave pods whose device changed."""
    phase: str = ""


def _plan(name: str, mode: str) -> dict:
    return {
        "apiVersion": "migplan.io/v1alpha1",
        "kind": "GPUPartitionPlan",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"matchLabels": {"migplan.io/pool": name}},
            "demand": {
                "fromPendingPods": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}}
                }
            },
            "window": {"start": "* * * * *", "duration": "1h"},
            "rollout": {"maxUnavailable": 50, "drainTimeout": "30s"},
            "dra": {"mode": mode},
        },
    }


def _status(cp, name: str) -> dict:
    return json.loads(cp.kubectl("get", "gpp", name, "-o", "json").stdout).get("status", {})


def _pods(api, namespace: str) -> list:
    from kubernetes import client

    return list(client.CoreV1Api(api.connection).list_namespaced_pod(namespace).items)


def _wait(pod) -> float | None:
    for c in pod.status.conditions or []:
        if c.type == "ContainersReady" and c.status == "True" and c.last_transition_time:
            return float(
                c.last_transition_time.timestamp() - pod.metadata.creation_timestamp.timestamp()
            )
    return None


def _turned_away(pod) -> bool:
    return any(
        c.type == "PodScheduled" and c.reason == "Unschedulable"
        for c in pod.status.conditions or []
    )


def _devices(api, namespace: str) -> dict[str, str]:
    """Pod -> the device its claim holds."""
    claims = api.dra.list_objects(plural="resourceclaims")
    found = {}
    for c in claims:
        if c["metadata"].get("namespace") != namespace:
            continue
        status = c.get("status") or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        for r in status.get("reservedFor") or []:
            if results:
                found[r["name"]] = f"{results[0]['pool']}/{results[0]['device']}"
    return found


def _nodes(cp, name: str, count: int, mode: str) -> SimulatedFleet | None:
    """The pool's nodes (and, for static, their simulated agents and DRA plugin)."""
    catalog = default_catalog()
    h100 = catalog.model("H100-80GB")
    names = [f"{name}-{i:04d}" for i in range(count)]
    apply(
        cp,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        MIG_CLASS,
        *(
            gpu_node(n, product="NVIDIA-H100-80GB-HBM3", labels={"migplan.io/pool": name})
            for n in names
        ),
        *(claim_template(f"{name}-{p}", p, namespace=name) for w in WAVES for p in w),
    )
    if mode == "steer":
        slices = [
            s
            for i, n in enumerate(names)
            for s in resource_slices(
                n, [PublishedGpu(minor=0, uuid=f"GPU-{name}-{i}", model=h100)], mode="dynamic"
            )
        ]
        apply(cp, *slices)
        return None
    return SimulatedFleet(
        api=connect(kubeconfig=str(cp.kubeconfig)),
        nodes={n: emulated_node(["H100-80GB"], ["-"], catalog=catalog) for n in names},
        catalog=catalog,
        interval=1.0,
        workers=8,
        dra=True,
    ).start()


def _all_turned_away(api, namespace: str, count: int, *, timeout: float) -> None:
    wait_for(
        lambda: sum(_turned_away(p) for p in _pods(api, namespace)) >= count,
        "the wave's pods to be turned away",
        timeout=timeout,
    )


def run_dra(cp, *, nodes: int, mode: str, kubeconfig=None) -> DraRun:
    """Run the scenario in `mode` (steer or static) on `nodes` nodes."""
    name = f"dra-{mode}"
    run = DraRun(mode=mode, nodes=nodes)
    api = connect(kubeconfig=str(cp.kubeconfig))
    fleet = _nodes(cp, name, nodes, mode)
    timeout = 120 + nodes * 3
    try:
        with running_operator(cp, kubeconfig=kubeconfig, tick=1.0):
            if mode == "static":
                # The operator gives each node a NodePartition; plan once every simulated
                # agent reported into it (a plan made before has no GPUs to plan, and the
                # wave's rebalance could come before the reports: CI saw it once).
                names = {f"{name}-{i:04d}" for i in range(nodes)}
                wait_for(lambda: reported(cp) >= names, "every agent to report", timeout=timeout)
            applied = time.monotonic()
            apply(cp, _plan(name, mode))
            wait_for(lambda: _status(cp, name).get("phase") == "Ready", "Ready", timeout=timeout)
            run.first_ready_s = time.monotonic() - applied
            first: dict[str, str] = {}
            for n, wave in enumerate(WAVES):
                pods = [
                    claim_pod(
                        f"w{n}-{profile.replace('.', '-')}-{i:04d}",
                        namespace=name,
                        template=f"{name}-{profile}",
                        node_selector={"migplan.io/pool": name},
                    )
                    for profile in wave
                    for i in range(nodes)
                ]
                apply(cp, *pods)
                _all_turned_away(api, name, len(pods), timeout=timeout)
                asked = time.monotonic()
                stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                cp.kubectl(
                    "annotate", "gpp", name, f"migplan.io/rebalance={stamp}-{n}", "--overwrite"
                )
                wait_for(
                    lambda: all(_wait(p) is not None for p in _pods(api, name)),
                    "the wave's pods to run",
                    timeout=timeout,
                )
                run.wave_seconds.append(time.monotonic() - asked)
                if n == 0:
                    first = _devices(api, name)
            run.waits = {
                p.metadata.name: w for p in _pods(api, name) if (w := _wait(p)) is not None
            }
            now = _devices(api, name)
            run.disturbed = sorted(p for p, d in first.items() if now.get(p) != d)
            try:
                wait_for(lambda: _status(cp, name).get("phase") == "Ready", "Ready", timeout=60)
            finally:
                run.phase = str(_status(cp, name).get("phase"))
            if mode == "steer":
                run.taint_rules = len(
                    json.loads(
                        cp.kubectl(
                            "get",
                            "devicetaintrules.v1beta2.resource.k8s.io",
                            "-l",
                            f"migplan.io/plan={name}",
                            "-o",
                            "json",
                        ).stdout
                    )["items"]
                )
    finally:
        if fleet is not None:
            fleet.stop()
    return run
