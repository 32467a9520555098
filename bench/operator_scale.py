"""The operator on the largest fleet Kubernetes supports: kwok nodes of 8 H100 GPUs (5,000 by
default), on the real control plane; not in CI (a run takes about half an hour).

R nodes (--rollout) are free: seven 1g.10gb on each GPU, their agents and device plugin
simulated. Every other node is busy: each GPU holds two 3g.40gb in use, its report written
once by the bench (no agent needed: nothing may change there). 8 x R pods ask for `7g.80gb`,
which only a free GPU can become, so the plan changes exactly the R free nodes. For each mode
(informer caches on, and `--no-informers`, the operator before #31):

- plan latency: the operator starts with the plan in place (window closed) and writes the
  first plan; then ten more pods arrive and `migplan rebalance`'s annotation is set: seconds
  until the written plan counts them (as unmet: the fleet is full);
- a steady stretch with a cron re-plan every minute: the operator's API requests per minute
  by verb and resource (every request through its client layer, informers' included), its
  RSS, and the seconds of each planning pass (reads included) and their mean (a pass a
  minute: the default 300 s hold five, where one pass varied by half from run to run);

then, with caches on, the window opens: seconds until the R nodes are rolled out under
`maxUnavailable` R/10 and the plan is Ready, and the pods running.

    .venv/bin/python bench/operator_scale.py [--nodes 5000] [--rollout 100] [--steady 300]
        [--modes both|caches] [--heartbeat lease|status] [--operator-log FILE]

Nodes beat as kubelets do by default (`--heartbeat lease`: a Lease renewed every 10 s, the
status posted every 5 minutes); kwok's own default posts every node's status every 20-25 s,
84 node updates a second at 5,000 nodes for the API server and every node watcher. The
simulated agents run in the bench's process, on the two cores the operator is measured on:
they sweep their nodes every 30 s until the rollout (a real agent's pace while its
NodePartition stays unchanged) and every 2 s during it.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "cluster"))

from harness import ControlPlane  # noqa: E402
from kubernetes.client.exceptions import ApiException  # noqa: E402
from nodes import gpu_node, mig_pod  # noqa: E402
from operator_proc import (  # noqa: E402
    free_port,
    install_crds,
    operator_service_account,
    running_operator,
)
from pools import apply, closed_window, make_plan  # noqa: E402
from rollout_records import rollout_nodes  # noqa: E402
from soak_scenario import api_requests, by_verb, metric, rss_mib  # noqa: E402
from urllib3.exceptions import HTTPError  # noqa: E402
from waiting import wait_for  # noqa: E402

from migplan.operator.agent import IDLE_INTERVAL_S  # noqa: E402
from migplan.operator.kube.connect import connect  # noqa: E402
from migplan.operator.logs import configure_logging  # noqa: E402
from migplan.operator.sim.fleet import SimulatedFleet, emulated_node  # noqa: E402
from migplan.planner.hardware.catalog import default_catalog  # noqa: E402

POOL = "scale"
BUSY = "3g.40gb@0+3g.40gb@4"
FREE = "1g.10gb@0+1g.10gb@1+1g.10gb@2+1g.10gb@3+1g.10gb@4+1g.10gb@5+1g.10gb@6"
GPUS = 8
MORE = 10
"""Pods that arrive after the first plan (the latency measured)."""
AGENT_IDLE_S = IDLE_INTERVAL_S
"""How often a simulated agent runs while its NodePartition stays unchanged: the real
agent's default `--interval`. The agents simulated here run in the bench's process, on the
two cores the operator is measured on; sweeping their 100 nodes every 2 s there took 0.86 of
them in the steady stretch (2026-11-29), where real agents run on their own nodes."""
ROLLOUT_SWEEP_S = 2.0
"""How often they run during the rollout, standing in for a real agent's watch."""


def _process_cpu_s(pid: int) -> tuple[float, float]:
    """CPU seconds `pid` has used so far, all its threads, and its children that ended (the
    planner's forked ones): user and system, /proc."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick


def _machine_cpu_s() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, all cores (/proc/stat)."""
    with open("/proc/stat", encoding="ascii") as stat:
        ticks = [int(t) for t in stat.readline().split()[1:]]
    idle = ticks[3] + ticks[4]  # idle, iowait
    return (sum(ticks) - idle) / os.sysconf("SC_CLK_TCK"), sum(ticks) / os.sysconf("SC_CLK_TCK")


def _node_names(count: int) -> list[str]:
    return [f"{POOL}-{i:05d}" for i in range(count)]


def _setup(cp, names: list[str], free: set[str]) -> None:
    """The nodes, and each one's NodePartition with the report its agent would write."""
    apply(cp, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": POOL}})
    apply(
        cp,
        *(
            gpu_node(
                n,
                product="NVIDIA-H100-80GB-HBM3",
                gpus=GPUS,
                mig={"1g.10gb": 7 * GPUS} if n in free else {"3g.40gb": 2 * GPUS},
                pool=POOL,
            )
            for n in names
        ),
    )
    from kubernetes import client

    objects = client.CustomObjectsApi(connect(kubeconfig=str(cp.kubeconfig)).connection)

    def report(node: str) -> None:
        layout = FREE if node in free else BUSY
        body = {
            "apiVersion": "migplan.io/v1alpha1",
            "kind": "NodePartition",
            "metadata": {"name": node},
            "spec": {
                "nodeName": node,
                "gpus": [{"index": i, "layout": layout} for i in range(GPUS)],
            },
        }
        objects.create_cluster_custom_object("migplan.io", "v1alpha1", "nodepartitions", body)
        gpus = [
            {
                "index": i,
                "model": "H100-80GB",
                "migEnabled": True,
                "layout": layout,
                "inUse": {}
                if layout == FREE
                else {
                    "3g.40gb@0": f"{POOL}/held-{node}-{i}a",
                    "3g.40gb@4": f"{POOL}/held-{node}-{i}b",
                },
            }
            for i in range(GPUS)
        ]
        status = {"status": {"phase": "Applied", "gpuCount": GPUS, "gpus": gpus}}
        objects.patch_cluster_custom_object_status(
            "migplan.io", "v1alpha1", "nodepartitions", node, status
        )

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(report, names))


def _fleet(cp, free: list[str]) -> SimulatedFleet:
    """Agents and the device plugin of the free nodes, sweeping at an idle agent's pace until
    the rollout (`AGENT_IDLE_S`)."""
    catalog = default_catalog()
    return SimulatedFleet(
        api=connect(kubeconfig=str(cp.kubeconfig)),
        nodes={
            n: emulated_node(["H100-80GB"] * GPUS, [FREE] * GPUS, catalog=catalog) for n in free
        },
        catalog=catalog,
        interval=AGENT_IDLE_S,
        workers=8,
    ).start()


def _progress(line: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {line}", file=sys.stderr, flush=True)


def _plan(*, rollout: int, window: dict) -> dict:
    return make_plan(
        POOL,
        POOL,
        window=window,
        rebalanceSchedule="* * * * *",
        rollout={"maxUnavailable": max(1, rollout // 10), "drainTimeout": "30s"},
        policy={"disruption": "none"},
    )


def _status(cp) -> dict:
    """The plan's status ({} where the read fails: the caller polls again), read through the
    API client: a kubectl started every half second while the bench waits took a share of the
    two cores the operator is measured on."""
    try:
        plan = _client(str(cp.kubeconfig)).plans.get_plan(name=POOL)
    except (ApiException, HTTPError):
        return {}
    return (plan or {}).get("status") or {}


@functools.cache
def _client(kubeconfig: str):
    return connect(kubeconfig=kubeconfig)


def _until_met(cp, met: str, what: str, *, timeout: float) -> None:
    """Wait until the written plan's demandMet reads `met` ("met/requested")."""
    wait_for(lambda: _status(cp).get("demandMet") == met, what, timeout=timeout)


def _pods(cp, first: int, count: int) -> None:
    apply(
        cp,
        *(
            mig_pod(f"want-{i:05d}", profile="7g.80gb", namespace=POOL, pool=POOL)
            for i in range(first, first + count)
        ),
    )


def _mode(
    cp,
    *,
    fleet: SimulatedFleet,
    informers: bool,
    rollout: int,
    steady: float,
    kubeconfig,
    operator_log: Path | None,
) -> dict:
    """One operator run: plan latency and a steady stretch (and the rollout, with caches);
    returns the figures."""
    pods = rollout * GPUS
    port = free_port()
    figures: dict = {"informers": informers}
    extra = () if informers else ("--no-informers",)
    mode = "caches" if informers else "lists"
    apply(cp, _plan(rollout=rollout, window=closed_window()))
    started = time.monotonic()
    with running_operator(
        cp, metrics_port=port, kubeconfig=kubeconfig, tick=2, agent_timeout=300, extra_args=extra
    ) as proc:
        _until_met(cp, f"{pods}/{pods}", "the first plan", timeout=900)
        figures["first_plan_s"] = time.monotonic() - started
        _progress(f"{mode}: first plan written {figures['first_plan_s']:.0f} s after start")
        _pods(cp, pods, MORE)
        asked = time.monotonic()
        changed = _Passes(port)
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        cp.kubectl("annotate", "gpp", POOL, f"migplan.io/rebalance={stamp}", "--overwrite")
        _until_met(cp, f"{pods}/{pods + MORE}", "the plan to count the new pods", timeout=600)
        figures["pending_to_plan_s"] = time.monotonic() - asked
        changed.poll()
        # The passes between the pods' creation and the plan counting them saw new inputs
        # (unless the caches had not caught up yet): what a pass costs where it must solve.
        figures["changed_passes_s"] = [round(x, 2) for x in changed.seconds]
        figures["changed_passes_kept"] = changed.kept
        _progress(f"{mode}: {MORE} pods counted {figures['pending_to_plan_s']:.0f} s later")
        cp.kubectl("delete", "pod", "-n", POOL, "--wait=false", *_more(pods))
        # The steady stretch begins once a re-plan has seen them go: the fleet is then the
        # same from pass to pass, and the requests counted are a steady fleet's.
        _until_met(cp, f"{pods}/{pods}", "the plan without the ten", timeout=300)
        figures.update(_steady(port, pid=proc.pid, seconds=steady))
        _progress(f"{mode}: steady stretch done, RSS peak {figures['rss_mib_peak']:.0f} MiB")
        if informers:
            figures["rollout"] = _rollout(cp, fleet, pods=pods, rollout=rollout, port=port)
            figures["rss_mib_after_rollout"] = rss_mib(proc.pid)
        if operator_log is not None:
            operator_log.write_text(proc.output())
    return figures


def _steady(port: int, *, pid: int, seconds: float) -> dict:
    """The steady stretch of `seconds`: each pass's seconds, API requests a minute, RSS, and
    where the passes' time went (the planning thread's CPU, the reads, the operator's CPU
    over all its threads, how busy the machine's cores were)."""
    figures: dict = {}
    before, at = api_requests(port), time.monotonic()
    cpu_before = metric(port, "migplan_planner_cpu_seconds_sum")
    read_before = metric(port, "migplan_planner_read_seconds_sum")
    operator_before, machine_before = _process_cpu_s(pid), _machine_cpu_s()
    rss: list[float] = []
    passes = _Passes(port)
    while time.monotonic() - at < seconds:
        rss.append(rss_mib(pid))
        passes.poll()
        time.sleep(10)
    passes.poll()
    plans = len(passes.seconds)
    figures["plans_in_steady"] = plans
    figures["plans_kept_in_steady"] = passes.kept
    figures["planner_s_passes"] = [round(s, 2) for s in passes.seconds]
    figures["planner_s_mean"] = sum(passes.seconds) / max(1, plans)
    after, window = api_requests(port), (time.monotonic() - at) / 60
    (operator_cpu, children_cpu) = (
        a - b for a, b in zip(_process_cpu_s(pid), operator_before, strict=True)
    )
    busy, total = (a - b for a, b in zip(_machine_cpu_s(), machine_before, strict=True))
    # Where a pass's wall time went: the operator's other threads (informers, kopf) hold
    # the interpreter lock for the operator's CPU time less the planning thread's; the
    # cores were free for the share of the machine not busy.
    figures["operator_cpu_s_per_min"] = operator_cpu / window
    figures["children_cpu_s_per_min"] = children_cpu / window
    figures["machine_busy_share"] = busy / total if total else float("nan")
    rates = {k: (after[k] - before.get(k, 0)) / window for k in after}
    figures["api_per_minute"] = {k: round(v, 1) for k, v in sorted(rates.items()) if v}
    figures["rss_mib_peak"] = max(rss)
    figures["rss_mib_end"] = rss[-1]
    figures["planner_cpu_s_mean"] = (
        metric(port, "migplan_planner_cpu_seconds_sum") - cpu_before
    ) / max(1, plans)
    figures["planner_read_s_mean"] = (
        metric(port, "migplan_planner_read_seconds_sum") - read_before
    ) / max(1, plans)
    return figures


class _Passes:
    """Each planning pass's seconds, read off the operator's histogram between polls: a
    poll every 10 s and a pass a minute (cron), so a pass is one step of the count; where a
    step holds more than one, each is given their mean."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.seconds: list[float] = []
        self.kept = 0
        """Passes that took the last plan, the inputs being the same (the rest solved)."""
        self._count, self._sum, self._kept = self._read()

    def _read(self) -> tuple[float, float, float]:
        return (
            metric(self.port, "migplan_planner_seconds_count"),
            metric(self.port, "migplan_planner_seconds_sum"),
            metric(self.port, "migplan_plans_kept_total"),
        )

    def poll(self) -> None:
        count, total, kept = self._read()
        if count > self._count:
            each = (total - self._sum) / (count - self._count)
            self.seconds += [each] * int(count - self._count)
        self.kept += int(kept - self._kept)
        self._count, self._sum, self._kept = count, total, kept


def _more(pods: int) -> list[str]:
    return [f"want-{i:05d}" for i in range(pods, pods + MORE)]


def _rollout(cp, fleet: SimulatedFleet, *, pods: int, rollout: int, port: int) -> dict:
    """Open the window (and stop the cron: the plan rolled out stays the one planned);
    seconds until Ready, pods running. The simulated agents sweep every 2 s meanwhile, as
    real ones answer their NodePartition's change at once (they watch it)."""
    _until_met(cp, f"{pods}/{pods}", "the plan without the ten", timeout=300)
    fleet.pace(ROLLOUT_SWEEP_S)
    started = time.monotonic()
    window = {"start": "* * * * *", "duration": "1h"}
    cp.kubectl(
        "patch",
        "gpp",
        POOL,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"window": window, "rebalanceSchedule": None}}),
    )
    last = [""]

    def ready() -> dict | None:
        status = _status(cp)
        if status.get("progress") != last[0]:
            last[0] = status.get("progress") or ""
            _progress(f"rollout {last[0]} ({status.get('phase')})")
        return status if status.get("phase") in ("Ready", "Degraded") else None

    final = wait_for(ready, "the rollout to finish", timeout=3600)
    records = rollout_nodes(cp, POOL, final)
    failed = {n: r.get("message") or "" for n, r in records.items() if r["step"] != "Done"}
    seconds = time.monotonic() - started
    running = json.loads(
        cp.kubectl(
            "get", "pods", "-n", POOL, "--field-selector=status.phase=Running", "-o", "json"
        ).stdout
    )["items"]
    return {
        "nodes": final.get("nodes"),
        "max_unavailable": max(1, rollout // 10),
        "seconds": round(seconds, 1),
        "progress": final.get("progress"),
        "phase": final.get("phase"),
        "not_done": failed,
        "pods_running": len(running),
        "status_kib": round(len(json.dumps(final)) / 1024),
        "nodes_per_minute": round(len(records) / (seconds / 60), 1),
        "step_seconds_mean": {
            step: round(
                metric(port, "migplan_rollout_step_seconds_sum", step=step)
                / max(1.0, metric(port, "migplan_rollout_step_seconds_count", step=step)),
                2,
            )
            for step in ("Cordoning", "Evicting", "Partitioning", "Verifying", "Uncordoning")
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--rollout", type=int, default=100, help="free nodes: the rollout's")
    parser.add_argument("--steady", type=float, default=300, help="seconds of steady cron")
    parser.add_argument(
        "--modes",
        choices=("both", "caches"),
        default="both",
        help="both: lists, then caches (with the rollout); caches: only the latter",
    )
    parser.add_argument(
        "--heartbeat",
        choices=("lease", "status"),
        default="lease",
        help="lease: kwok's nodes renew a Lease every 10 s and post their status every 5 "
        "minutes, as kubelets do; status: kwok's default, the status posted every 20-25 s "
        "(84 node updates a second at 5,000 nodes)",
    )
    parser.add_argument("--json", type=Path, default=Path("bench/results/operator-scale.json"))
    parser.add_argument(
        "--operator-log",
        type=Path,
        help="write the operator's own output (its log events) here; with --modes both, the "
        "last mode's",
    )
    args = parser.parse_args()
    configure_logging(level="warning")
    names = _node_names(args.nodes)
    free = names[: args.rollout]
    with ControlPlane.up(heartbeat=args.heartbeat) as cp:
        install_crds(cp)
        kubeconfig = operator_service_account(cp)
        began = time.monotonic()
        _setup(cp, names, set(free))
        fleet = _fleet(cp, free)
        setup_s = time.monotonic() - began
        _progress(f"{args.nodes} nodes set up in {setup_s:.0f} s")
        try:
            _pods(cp, 0, args.rollout * GPUS)
            runs = [
                _mode(
                    cp,
                    fleet=fleet,
                    informers=on,
                    rollout=args.rollout,
                    steady=args.steady,
                    kubeconfig=kubeconfig,
                    operator_log=args.operator_log,
                )
                for on in ((False, True) if args.modes == "both" else (True,))
            ]
        finally:
            fleet.stop()
    _report(args, runs, setup_s)


def _report(args, runs: list[dict], setup_s: float) -> None:
    gpus = args.nodes * GPUS
    print(
        f"\noperator at {args.nodes} nodes / {gpus} GPUs (setup {setup_s:.0f} s,"
        f" {args.heartbeat} heartbeats)"
    )
    rows = {
        "first plan after start, s": lambda r: f"{r['first_plan_s']:.1f}",
        f"{MORE} pods pending -> plan counting them, s": lambda r: f"{r['pending_to_plan_s']:.1f}",
        f"passes after the {MORE} pods came (new inputs), s each": lambda r: (
            " / ".join(f"{s:.1f}" for s in r.get("changed_passes_s", []))
            + f" ({r.get('changed_passes_kept', 0)} kept the last plan)"
        ),
        "planner s per pass (cron, steady)": lambda r: f"{r['planner_s_mean']:.2f}",
        "each pass, s": lambda r: " / ".join(f"{s:.1f}" for s in r.get("planner_s_passes", [])),
        "steady passes that kept the last plan (inputs unchanged)": lambda r: (
            f"{r.get('plans_kept_in_steady', 0)} of {r['plans_in_steady']}"
        ),
        "of which the planning thread on a core, s": lambda r: f"{r['planner_cpu_s_mean']:.2f}",
        "of which reading the caches or lists, s": lambda r: (
            f"{r['planner_read_s_mean']:.2f}" if "planner_read_s_mean" in r else "-"
        ),
        "operator process on a core, s a minute (all threads)": lambda r: (
            f"{r['operator_cpu_s_per_min']:.1f}" if "operator_cpu_s_per_min" in r else "-"
        ),
        "its forked children on a core, s a minute": lambda r: (
            f"{r['children_cpu_s_per_min']:.1f}" if "children_cpu_s_per_min" in r else "-"
        ),
        "machine's cores busy in the stretch, %": lambda r: (
            f"{100 * r['machine_busy_share']:.0f}" if "machine_busy_share" in r else "-"
        ),
        "operator RSS MiB: peak / end": lambda r: (
            f"{r['rss_mib_peak']:.0f} / {r['rss_mib_end']:.0f}"
        ),
        "API requests/min by verb": lambda r: ", ".join(
            f"{v} {n:.0f}" for v, n in by_verb(r["api_per_minute"]).items()
        ),
        "list requests/min by resource": lambda r: (
            ", ".join(
                f"{k.split(' ', 1)[1]} {n:.1f}"
                for k, n in r["api_per_minute"].items()
                if k.startswith("list ")
            )
            or "none"
        ),
    }
    print("| | " + " | ".join("caches" if r["informers"] else "lists" for r in runs) + " |")
    print("|---|" + "---|" * len(runs))
    for label, cell in rows.items():
        print(f"| {label} | " + " | ".join(cell(r) for r in runs) + " |")
    rollout = next(r["rollout"] for r in runs if "rollout" in r)
    print(
        f"\nrollout: {rollout['nodes']} nodes, maxUnavailable {rollout['max_unavailable']}:"
        f" {rollout['seconds']:.0f} s to {rollout['phase']} ({rollout['progress']},"
        f" {len(rollout['not_done'])} not done),"
        f" {rollout['pods_running']} pods running; plan status {rollout['status_kib']} KiB;"
        f" {rollout['nodes_per_minute']:.1f} nodes a minute; mean s per step: "
        + ", ".join(f"{k} {v:.1f}" for k, v in rollout["step_seconds_mean"].items())
    )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {
                "nodes": args.nodes,
                "gpus": gpus,
                "heartbeat": args.heartbeat,
                "setup_s": setup_s,
                "runs": runs,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
