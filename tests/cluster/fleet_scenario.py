"""The large end-to-end scenario, shared by tests/cluster/test_fleet.py (which checks what
happened) and bench/rollout.py (which reports how long it took).

A fleet of simulated H100 nodes, two GPUs each, every GPU split 3g+3g and some instances in
use. Pods ask for 1g and 2g instances that no node offers; the operator plans, rolls out in
waves, and the real scheduler runs them. Then demand shifts (the 2g pods end, whole-GPU pods
arrive) and the cron rebalance changes only what it must.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nodes import gpu_node, mig_pod, reported
from operator_proc import free_port, running_operator
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from waiting import wait_for

from migplan.operator.kube.connect import connect
from migplan.operator.sim.fleet import SimulatedFleet, emulated_node
from migplan.planner.hardware.catalog import default_catalog
from migplan.planner.rollout.schedule import parse_timestamp, timestamp

NAMESPACE = "fleet"
MIGPLAN = str(Path(sys.executable).parent / "migplan")


@dataclass
class FleetRun:
    """What happened, for assertions and for the benchmark table."""

    nodes: int
    gpus: int
    figures: dict[str, float] = field(default_factory=dict)
    first: dict[str, Any] = field(default_factory=dict)
    """The plan's status after the first rollout."""
    second: dict[str, Any] = field(default_factory=dict)
    """The plan's status after the cron rebalance."""
    third: dict[str, Any] = field(default_factory=dict)
    """The plan's status after `migplan rebalance`."""
    kept_running: bool = False
    """Every pod running before a rollout still ran, unchanged, after it."""
    cordoned: list[str] = field(default_factory=list)
    fleet_errors: list[str] = field(default_factory=list)
    status_text: str = ""


def _apply(cp, items: list[dict]) -> None:
    cp.kubectl(
        "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    )


def _pods(cp) -> dict[str, dict]:
    found = json.loads(cp.kubectl("get", "pods", "-n", NAMESPACE, "-o", "json").stdout)["items"]
    return {p["metadata"]["name"]: p for p in found}


def _status(cp, name: str) -> dict:
    return json.loads(cp.kubectl("get", "gpp", name, "-o", "json").stdout).get("status", {})


def _all(cp, prefix: str, check) -> bool:
    pods = [p for n, p in _pods(cp).items() if n.startswith(prefix)]
    return bool(pods) and all(check(p) for p in pods)


def _is_running(pod: dict) -> bool:
    return pod["status"].get("phase") == "Running"


def _is_unschedulable(pod: dict) -> bool:
    return any(c.get("reason") == "Unschedulable" for c in pod["status"].get("conditions", []))


def _running_uids(cp) -> dict[str, str]:
    return {n: p["metadata"]["uid"] for n, p in _pods(cp).items() if _is_running(p)}


def _memory_mib(pid: int) -> float:
    """Peak resident memory of process `pid` (VmHWM), MiB."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _plan() -> dict:
    return {
        "apiVersion": "migplan.io/v1alpha1",
        "kind": "GPUPartitionPlan",
        "metadata": {"name": "fleet"},
        "spec": {
            "nodeSelector": {"matchLabels": {"migplan.io/pool": "fleet"}},
            "demand": {
                "fromPendingPods": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}}
                }
            },
            "window": {"start": "* * * * *", "duration": "1h"},
            "rollout": {"maxUnavailable": 10},
        },
    }


def _start_fleet(cp, names: list[str]) -> SimulatedFleet:
    catalog = default_catalog()
    _apply(
        cp,
        [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}]
        + [gpu_node(n, product="NVIDIA-H100-80GB-HBM3", gpus=2, pool="fleet") for n in names],
    )
    return SimulatedFleet(
        api=connect(kubeconfig=str(cp.kubeconfig)),
        nodes={
            n: emulated_node(["H100-80GB"] * 2, ["3g.40gb@0+3g.40gb@4"] * 2, catalog=catalog)
            for n in names
        },
        catalog=catalog,
        interval=0.5,
    ).start()


def _first_rollout(cp, run: FleetRun) -> bool:
    """Apply the plan; wait for the rollout and the pods. Whether running pods survived."""
    before = _running_uids(cp)
    started = time.monotonic()
    _apply(cp, [_plan()])
    run.first = wait_for(
        lambda: (s := _status(cp, "fleet")).get("phase") == "Ready" and s,
        "the first rollout",
        timeout=300,
    )
    rolled = time.monotonic()
    wait_for(
        lambda: _all(cp, "small-", _is_running) and _all(cp, "mid-", _is_running),
        "the pending pods to run",
        timeout=120,
    )
    run.figures["pending_to_running_s"] = time.monotonic() - started
    run.figures["plan_and_rollout_s"] = rolled - started
    run.figures["planner_s_first"] = run.first["plan"]["solver"]["seconds"]
    after = _running_uids(cp)
    return all(after.get(n) == uid for n, uid in before.items())


def _shift_and_rebalance(cp, run: FleetRun, *, mid: int) -> bool:
    """The 2g pods end, whole-GPU pods arrive; wait for the cron rebalance to serve them.

    The schedule is set only now: a rebalance in the first rollout's last second (its pods
    running, demand 0/0) replaced that rollout's status before the test read it once, and
    the first plan's "90/90" was read as "0/0"."""
    cp.kubectl(
        "patch",
        "gpp",
        "fleet",
        "--type",
        "merge",
        "-p",
        json.dumps({"spec": {"rebalanceSchedule": "* * * * *"}}),
    )
    for i in range(mid):
        cp.kubectl("delete", "pod", "-n", NAMESPACE, f"mid-{i}", "--wait=false")
    wait_for(lambda: not any(n.startswith("mid-") for n in _pods(cp)), "the 2g pods to end")
    # The cron fires at the start of each minute: create the pods well inside one, so that no
    # rebalance sees some of them and not the others (one CI run saw 1 of the 4 and planned
    # "1/1"). A rebalance that came before them plans for no demand and does not count; the
    # next one serves them. (Timestamps are whole seconds, hence >=.)
    while not 5 <= datetime.now(UTC).second < 40:
        time.sleep(0.5)
    since = timestamp(datetime.now(UTC))
    _apply(
        cp,
        [
            mig_pod(f"whole-{i}", profile="7g.80gb", namespace=NAMESPACE, pool=NAMESPACE)
            for i in range(4)
        ],
    )
    wait_for(lambda: _all(cp, "whole-", _is_unschedulable), "the whole-GPU pods to wait")
    before = _running_uids(cp)
    run.second = wait_for(
        lambda: (
            (s := _status(cp, "fleet")).get("lastRebalance", "") >= since
            and s.get("demandMet", "0/0") != "0/0"
            and s.get("phase") == "Ready"
            and s
        ),
        "the cron rebalance and its rollout",
        timeout=200,
    )
    wait_for(lambda: _all(cp, "whole-", _is_running), "the whole-GPU pods to run", timeout=120)
    # From the cron firing (not the wait for the next minute) to the pods running.
    fired = parse_timestamp(run.second["lastRebalance"])
    run.figures["rebalance_to_running_s"] = (datetime.now(UTC) - fired).total_seconds()
    run.figures["planner_s_rebalance"] = run.second["plan"]["solver"]["seconds"]
    after = _running_uids(cp)
    return all(after.get(n) == uid for n, uid in before.items())


def _migplan(cp, *args: str) -> str:
    return subprocess.run(
        [MIGPLAN, *args, "--kubeconfig", str(cp.kubeconfig)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def run_fleet(
    cp,
    *,
    nodes: int = 50,
    running: int = 50,
    small: int = 60,
    mid: int = 30,
    kubeconfig: Path | None = None,
) -> FleetRun:
    """Run the whole scenario on the control plane `cp`; returns what happened."""
    names = [f"fl-{i:02d}" for i in range(nodes)]
    fleet = _start_fleet(cp, names)
    run = FleetRun(nodes=nodes, gpus=2 * nodes)
    try:
        _apply(
            cp,
            [
                mig_pod(f"run-{i}", profile="3g.40gb", namespace=NAMESPACE, pool=NAMESPACE)
                for i in range(running)
            ],
        )
        wait_for(lambda: _all(cp, "run-", _is_running), "the running pods", timeout=120)
        _apply(
            cp,
            [
                mig_pod(f"small-{i}", profile="1g.10gb", namespace=NAMESPACE, pool=NAMESPACE)
                for i in range(small)
            ]
            + [
                mig_pod(f"mid-{i}", profile="2g.20gb", namespace=NAMESPACE, pool=NAMESPACE)
                for i in range(mid)
            ],
        )
        wait_for(
            lambda: _all(cp, "small-", _is_unschedulable) and _all(cp, "mid-", _is_unschedulable),
            "the new pods to be unschedulable",
            timeout=120,
        )
        port = free_port()
        with running_operator(cp, metrics_port=port, kubeconfig=kubeconfig) as proc:
            # The operator gives each node a NodePartition; plan once every agent reported.
            wait_for(lambda: reported(cp) >= set(names), "every agent to report", timeout=120)
            kept = _first_rollout(cp, run)
            run.kept_running = _shift_and_rebalance(cp, run, mid=mid) and kept
            run.status_text = _migplan(cp, "status", "fleet")
            stamp = _migplan(cp, "rebalance", "fleet").split(" at ")[-1].strip()
            run.third = wait_for(
                lambda: (s := _status(cp, "fleet")).get("rebalanceHandled") == stamp and s,
                "the requested rebalance",
                timeout=60,
            )
            run.figures["operator_peak_rss_mib"] = _memory_mib(proc.pid)
            metrics = _metrics(port)
            run.figures["planner_s_mean"] = metrics.total("migplan_planner_seconds_sum") / max(
                1.0, metrics.total("migplan_planner_seconds_count")
            )
            run.figures["nodes_reconfigured"] = metrics.total(
                "migplan_nodes_reconfigured_total", result="Done"
            )
        run.cordoned = [
            n["metadata"]["name"]
            for n in json.loads(cp.kubectl("get", "nodes", "-o", "json").stdout)["items"]
            if n["spec"].get("unschedulable") and n["metadata"]["name"] in names
        ]
        run.fleet_errors = list(fleet.errors)
    finally:
        fleet.stop()
    return run


@dataclass(frozen=True)
class _Scraped:
    """One /metrics answer."""

    samples: list[Sample]

    def total(self, name: str, **labels: str) -> float:
        """The sum of the samples `name` with `labels` (over every plan)."""
        return sum(
            s.value
            for s in self.samples
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
        )


def _metrics(port: int) -> _Scraped:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return _Scraped([s for f in text_string_to_metric_families(text) for s in f.samples])
