"""The soak: a fleet of simulated one-GPU H100 nodes under pending-pod churn for a long
while, the operator re-planning every minute (cron) and rolling out; shared by
tests/cluster/test_soak.py (a short run that checks what happened) and bench/soak.py (the
long run that reports).

Churn: pods arrive at a steady rate (seeded Poisson, `per_minute`), each the next
single-GPU pod of the Alibaba openb trace in arrival order (its profile as bench/scenarios.py
maps it, its lifetime divided by LIFETIME_COMPRESSION and held within [MIN_LIFETIME,
MAX_LIFETIME] seconds); a pod still pending when its lifetime ends is withdrawn (it gave up).
The trace's own arrival times are not replayed: its first pods come in bursts (compressed to
30 minutes, 1,177 of the first 1,200 would arrive in the last two). Without the trace (a
clone without ../shared), a seeded synthetic stream with the trace's profile mix stands in,
and the run says so.

What is measured: the operator's resident memory over time, its API requests per minute by
verb and resource (every call through the client layer, from its
migplan_api_requests_total; kopf's own watches are not in it), pending -> Running times, and
at the end the invariants every fault suite checks (tests/cluster/invariants.py).
"""

from __future__ import annotations

import itertools
import json
import random
import sys
import time
import urllib.request
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from invariants import assert_converged, plan_events
from nodes import gpu_node, mig_pod, reported
from operator_proc import free_port, running_operator
from pools import apply
from prometheus_client.parser import text_string_to_metric_families
from rollout_records import rollout_nodes
from waiting import wait_for

from migplan.operator.kube.connect import connect
from migplan.operator.sim.fleet import SimulatedFleet, emulated_node
from migplan.planner.hardware.catalog import default_catalog

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import scenarios  # noqa: E402

NAME = "soak"
LIFETIME_COMPRESSION = 10
MIN_LIFETIME, MAX_LIFETIME = 45.0, 600.0
LAYOUTS = (
    "3g.40gb@0+3g.40gb@4",
    "1g.10gb@0+1g.10gb@1+1g.10gb@2+1g.10gb@3+1g.10gb@4+1g.10gb@5+1g.10gb@6",
    "2g.20gb@0+2g.20gb@2+2g.20gb@4+1g.10gb@6",
    "3g.40gb@0+2g.20gb@4+1g.10gb@6",
)
"""Small instances only: the trace asks mostly for whole GPUs (7g) and 4g, so the fleet must
be reshaped all the time."""
SYNTHETIC_MIX = {
    "7g.80gb": 0.76,
    "4g.40gb": 0.14,
    "3g.40gb": 0.055,
    "2g.20gb": 0.04,
    "1g.10gb": 0.005,
}
"""The trace's single-GPU profile mix (bench/scenarios.py's mapping), for the stand-in."""


@dataclass
class Arrival:
    at: float
    """Seconds after the churn starts."""
    lifetime: float
    profile: str
    name: str


@dataclass
class SoakRun:
    """What happened, for assertions and for the benchmark table."""

    nodes: int
    minutes: float
    tick: float
    source: str = ""
    rss_mib: list[tuple[float, float]] = field(default_factory=list)
    """(seconds since the operator started, resident MiB) every sample."""
    api_per_minute: dict[str, float] = field(default_factory=dict)
    """"verb resource" -> requests per minute after warm-up."""
    waits: list[float] = field(default_factory=list)
    """Pending -> Running seconds of every pod that ran."""
    arrived: int = 0
    gave_up: int = 0
    evicted: int = 0
    figures: dict[str, float] = field(default_factory=dict)
    invariants: str = ""
    """Empty when every invariant held, else what failed."""
    final: dict = field(default_factory=dict)
    unfinished: dict[str, str] = field(default_factory=dict)
    """Node -> step and failure of every node of the last rollout that did not end Done."""

    def rss_growth(self, warm_up: float) -> float:
        """Growth of resident memory after `warm_up` seconds: (highest later sample - first
        later sample) / first later sample."""
        later = [mib for at, mib in self.rss_mib if at >= warm_up]
        return (max(later) - later[0]) / later[0] if len(later) > 1 else float("nan")


def arrivals(
    *, minutes: float, per_minute: float, seed: int, trace_dir: Path = scenarios.TRACE_DIR
) -> tuple[list[Arrival], str]:
    """The churn for a run of `minutes`; and where it came from."""
    count = int(minutes * per_minute)
    rng = random.Random(seed)
    times = list(itertools.accumulate(rng.expovariate(per_minute / 60) for _ in range(count)))
    if (trace_dir / "openb_pod_list_default.csv").exists():
        pods = [p for p in scenarios.trace_pods(trace_dir) if p.count == 1 and p.created > 0]
        found = [
            Arrival(
                at=at,
                lifetime=_clip((p.deleted - p.created) / LIFETIME_COMPRESSION),
                profile=p.profile,
                name=f"t-{i:05d}",
            )
            for i, (at, p) in enumerate(zip(times, pods, strict=False))
        ]
        return found, (
            f"Alibaba openb trace: its first {len(found)} single-GPU pods in order, their"
            f" profiles and lifetimes (x1/{LIFETIME_COMPRESSION}, within [{MIN_LIFETIME:.0f},"
            f" {MAX_LIFETIME:.0f}] s), arriving at a steady {per_minute:g}/min"
        )
    found = [
        Arrival(
            at=at,
            lifetime=_clip(rng.lognormvariate(6.3, 1.6) / LIFETIME_COMPRESSION),
            profile=rng.choices(list(SYNTHETIC_MIX), weights=list(SYNTHETIC_MIX.values()))[0],
            name=f"s-{i:05d}",
        )
        for i, at in enumerate(times)
    ]
    return found, "synthetic stand-in (no trace at ../shared): the trace's profile mix"


def _clip(seconds: float) -> float:
    return min(MAX_LIFETIME, max(MIN_LIFETIME, seconds))


def _plan(nodes: int) -> dict:
    return {
        "apiVersion": "migplan.io/v1alpha1",
        "kind": "GPUPartitionPlan",
        "metadata": {"name": NAME},
        "spec": {
            "nodeSelector": {"matchLabels": {"migplan.io/pool": NAME}},
            "demand": {
                "fromPendingPods": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NAME}}
                }
            },
            "window": {"start": "* * * * *", "duration": "1h"},
            "rebalanceSchedule": "* * * * *",
            "rollout": {"maxUnavailable": max(1, nodes // 20), "drainTimeout": "30s"},
        },
    }


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def api_requests(port: int) -> Counter[str]:
    """The operator's API requests so far, by "verb resource"."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    found: Counter[str] = Counter()
    for line in text.splitlines():
        if line.startswith("migplan_api_requests_total{"):
            labels = dict(
                part.split("=", 1)
                for part in line[line.index("{") + 1 : line.index("}")].split(",")
            )
            key = f"{labels['verb'].strip(chr(34))} {labels['resource'].strip(chr(34))}"
            found[key] += int(float(line.rsplit(" ", 1)[1]))
    return found


def metric(port: int, name: str, **labels: str) -> float:
    """The sum of the samples `name` with `labels` (every plan's, where it has a plan label)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    )


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


class _Watcher:
    """Pods of the soak namespace seen running, with their pending -> Running time (from the
    pod's own timestamps, second resolution)."""

    def __init__(self, api) -> None:
        from kubernetes import client

        self.core = client.CoreV1Api(api.connection)
        self.waits: dict[str, float] = {}

    def look(self) -> set[str]:
        """Record pods that became Ready; the names of the pods that exist."""
        names = set()
        for pod in self.core.list_namespaced_pod(NAME).items:
            names.add(pod.metadata.name)
            if pod.metadata.name in self.waits:
                continue
            for c in pod.status.conditions or []:
                # ContainersReady, not Ready: kwok sets it once, and a pod whose node was slow
                # to send its first heartbeat keeps Ready=False from the node controller.
                if c.type == "ContainersReady" and c.status == "True" and c.last_transition_time:
                    created = pod.metadata.creation_timestamp.timestamp()
                    self.waits[pod.metadata.name] = c.last_transition_time.timestamp() - created
        return names


def run_soak(
    cp,
    *,
    nodes: int,
    minutes: float,
    per_minute: float | None = None,
    tick: float = 2.0,
    seed: int = scenarios.SEED,
    kubeconfig: Path | None = None,
    settle: float = 420.0,
    progress=print,
) -> SoakRun:
    """Run the soak on the control plane `cp`; returns what happened."""
    run = SoakRun(nodes=nodes, minutes=minutes, tick=tick)
    churn, run.source = arrivals(minutes=minutes, per_minute=per_minute or nodes / 25, seed=seed)
    names = [f"{NAME}-{i:04d}" for i in range(nodes)]
    rng = random.Random(seed)
    layouts = {n: rng.choice(LAYOUTS) for n in names}
    fleet = _start_fleet(cp, layouts)
    watcher = _Watcher(connect(kubeconfig=str(cp.kubeconfig)))
    try:
        # Long-running work on a third of the nodes: instances a plan must keep or evict.
        base = [
            mig_pod(f"base-{i:04d}", profile=layouts[n].split("@")[0], namespace=NAME, pool=NAME)
            for i, n in enumerate(names[: nodes // 3])
        ]
        apply(cp, *base)
        port = free_port()
        with running_operator(
            cp, metrics_port=port, kubeconfig=kubeconfig, tick=tick, agent_timeout=120
        ) as proc:
            wait_for(lambda: reported(cp) >= set(names), "every agent to report", timeout=600)
            held = [p["metadata"]["name"] for p in base]
            wait_for(
                lambda: watcher.look() and all(p in watcher.waits for p in held),
                "the long-running pods to run",
                timeout=300,
            )
            apply(cp, _plan(nodes))
            _churn(run, churn, watcher=watcher, pid=proc.pid, port=port, progress=progress)
            # Arrivals stop; the pods still pending are served and the rollout finishes.
            try:
                wait_for(
                    lambda: not (watcher.look() - set(watcher.waits)),
                    "the pods still pending to run",
                    timeout=settle,
                )
            except AssertionError:
                run.figures["pending_at_end"] = len(watcher.look() - set(watcher.waits))
            run.final = wait_for(
                lambda: _settled(cp) and _status(cp), "the last rollout to finish", timeout=settle
            )
            run.unfinished = {
                node: f"{r.get('step')}: {r.get('failure')}"
                for node, r in rollout_nodes(cp, NAME, run.final).items()
                if r.get("step") != "Done"
            }
            run.rss_mib.append((run.rss_mib[-1][0] + 1, rss_mib(proc.pid)))
            try:
                assert_converged(cp, NAME, fleet, rolled_out=False)
            except AssertionError as exc:
                run.invariants = str(exc)[:2000]
        run.evicted = sum(1 for e in plan_events(cp, NAME) if e["reason"] == "Evicted")
        run.waits = [w for pod, w in watcher.waits.items() if not pod.startswith("base-")]
        run.figures["fleet_errors"] = len(fleet.errors)
    finally:
        fleet.stop()
    return run


def _start_fleet(cp, layouts: dict[str, str]) -> SimulatedFleet:
    catalog = default_catalog()
    apply(cp, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAME}})
    apply(cp, *(gpu_node(n, product="NVIDIA-H100-80GB-HBM3", pool=NAME) for n in layouts))
    return SimulatedFleet(
        api=connect(kubeconfig=str(cp.kubeconfig)),
        nodes={
            n: emulated_node(["H100-80GB"], [layout], catalog=catalog)
            for n, layout in layouts.items()
        },
        catalog=catalog,
        interval=1.0,
        workers=8,
    ).start()


def _churn(
    run: SoakRun, churn: list[Arrival], *, watcher: _Watcher, pid: int, port: int, progress
) -> None:
    """Replay `churn` for the run's minutes: create pods when they arrive, withdraw them when
    their lifetime ends; sample memory and pods every 10 s; API rates after warm-up."""
    started = time.monotonic()
    warm_up = run.minutes * 60 * 0.25
    baseline: Counter[str] | None = None
    base_at = next_sample = 0.0
    due = sorted(churn, key=lambda a: a.at)
    ends: dict[str, float] = {}
    live: set[str] = set()
    while (elapsed := time.monotonic() - started) < run.minutes * 60:
        while due and due[0].at <= elapsed:
            arrival = due.pop(0)
            body = mig_pod(arrival.name, profile=arrival.profile, namespace=NAME, pool=NAME)
            watcher.core.create_namespaced_pod(NAME, body)
            ends[arrival.name] = elapsed + arrival.lifetime
            run.arrived += 1
        if elapsed >= next_sample:
            live = watcher.look()
            run.rss_mib.append((elapsed, rss_mib(pid)))
            if baseline is None and elapsed >= warm_up:
                baseline, base_at = api_requests(port), elapsed
            next_sample = elapsed + 10
            progress(
                f"  soak {elapsed / 60:5.1f}/{run.minutes:g} min: {run.arrived} arrived,"
                f" {sum(not p.startswith('base-') for p in watcher.waits)} ran,"
                f" RSS {run.rss_mib[-1][1]:.0f} MiB"
            )
        for pod, end in list(ends.items()):
            if end <= elapsed:
                if pod not in watcher.waits and pod in live:
                    run.gave_up += 1
                watcher.core.delete_namespaced_pod(pod, NAME, grace_period_seconds=0)
                del ends[pod]
        time.sleep(0.5)
    watcher.look()
    assert baseline is not None
    used = api_requests(port)
    window = (time.monotonic() - started - base_at) / 60
    rates = {key: (used[key] - baseline.get(key, 0)) / window for key in used}
    run.api_per_minute = dict(sorted(rates.items(), key=lambda kv: -kv[1]))
    run.figures["plans"] = metric(port, "migplan_planner_seconds_count")
    run.figures["planner_s_mean"] = metric(port, "migplan_planner_seconds_sum") / max(
        1.0, run.figures["plans"]
    )
    run.figures["nodes_reconfigured"] = metric(
        port, "migplan_nodes_reconfigured_total", result="Done"
    )


def _status(cp) -> dict:
    return json.loads(cp.kubectl("get", "gpp", NAME, "-o", "json").stdout).get("status", {})


def _settled(cp) -> bool:
    status = _status(cp)
    records = rollout_nodes(cp, NAME, status)
    in_hand = [
        n for n, r in records.items() if r and r.get("step") not in ("Done", "RolledBack", "Failed")
    ]
    return status.get("phase") in ("Ready", "Degraded") and not in_hand


def percentile(values: list[float], share: float) -> float:
    """The `share` quantile of `values` (nearest rank); NaN when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def by_verb(per_minute: dict[str, float]) -> dict[str, float]:
    """Requests per minute summed by verb."""
    totals: dict[str, float] = defaultdict(float)
    for key, rate in per_minute.items():
        totals[key.split(" ")[0]] += rate
    return dict(totals)
