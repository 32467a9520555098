"""Planner benchmark: the exact planner against peers' heuristics and lower bounds.

Scenarios (bench/scenarios.py says how each is built):
- fleet: 1,000 nodes x 8 GPUs (half A100-80GB, half H100-80GB), 20 % of the GPUs busy, about
  10,000 pending requests over six profiles;
- trace-snapshot: the Alibaba openb trace at its busiest moment on empty H100-80GB GPUs;
- trace-rebalance: the trace replayed over its creation/deletion times, re-planning at each
  step (pods keep their instances; departed pods free theirs; policy none).

Methods: cp-sat (migplan), greedy (nos), first-fit (HAMi / Dynamic Accelerator Slicer),
static geometry (mig-parted all-balanced style). Every plan is validated.

    .venv/bin/python bench/planner.py [--repeat 3] [--steps 8] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scenarios

from migplan.planner.api.inventory import GpuState
from migplan.planner.api.spec import PolicySpec
from migplan.planner.baselines import first_fit_plan, greedy_plan, static_plan
from migplan.planner.demand import DemandItem, demand_weight
from migplan.planner.hardware.layout import Instance, Layout
from migplan.planner.plan import Plan
from migplan.planner.solver import plan as cp_sat_plan
from migplan.planner.validate import validate

POLICY = PolicySpec()
Method = Callable[[Sequence[GpuState], Sequence[DemandItem]], Plan]


def _cp_sat(time_limit: float) -> Method:
    def run(gpus: Sequence[GpuState], demand: Sequence[DemandItem]) -> Plan:
        return cp_sat_plan(gpus, demand, POLICY, time_limit=time_limit)

    return run


def methods(time_limit: float) -> dict[str, Method]:
    """The planners compared, ours first."""
    return {
        "cp-sat": _cp_sat(time_limit),
        "greedy (nos)": greedy_plan,
        "first-fit": first_fit_plan,
        "static geometry": static_plan,
    }


@dataclass
class Row:
    """One method on one scenario."""

    scenario: str
    method: str
    seconds: float
    status: str
    gap: float | None
    requested: int
    met: int
    weighted_met: int
    gpus_used: int
    gpus_changed: int
    nodes_touched: int
    evictions: int
    extra: dict[str, float] = field(default_factory=dict)


def weighted(plan: Plan, demand: Sequence[DemandItem]) -> int:
    """Priority x compute weighted demand met."""
    return sum(r.met * demand_weight(d) for r, d in zip(plan.demand, demand, strict=True))


def gpus_used(plan: Plan) -> int:
    """GPUs with at least one instance after the plan."""
    return sum(1 for g in plan.gpus if g.after != "-")


def run_static(
    scenario: str,
    gpus: list[GpuState],
    demand: list[DemandItem],
    planners: dict[str, Method],
    repeat: int,
) -> list[Row]:
    """Every method on one fixed problem; wall time is the median of `repeat` runs."""
    rows = []
    for name, method in planners.items():
        times = []
        result = None
        for _ in range(repeat if name == "cp-sat" else 1):
            started = time.perf_counter()
            result = method(gpus, demand)
            times.append(time.perf_counter() - started)
        assert result is not None
        validate(result, gpus, demand, POLICY)
        s = result.summary
        rows.append(
            Row(
                scenario,
                name,
                statistics.median(times),
                result.solver.status,
                result.solver.gap if name == "cp-sat" else None,
                s.requested,
                s.met,
                weighted(result, demand),
                gpus_used(result),
                s.gpus_changed,
                s.nodes_touched,
                s.evictions,
            )
        )
        print(
            f"  {scenario:<16} {name:<16} {rows[-1].seconds:7.2f} s  met {s.met}/"
            f"{s.requested}  changed {s.gpus_changed}",
            flush=True,
        )
    return rows


def _apply(gpus: list[GpuState], plan: Plan) -> list[GpuState]:
    """The GPUs after `plan` (policy none: every pin survives)."""
    after = {(g.node, g.gpu): Layout.parse(g.after) for g in plan.gpus}
    return [
        GpuState(
            node=g.node,
            index=g.index,
            uuid=None,
            model=g.model,
            layout=after[(g.node, g.index)],
            pins=g.pins,
        )
        for g in gpus
    ]


def _place(
    gpus: list[GpuState], pending: list[scenarios.TracePod]
) -> tuple[list[GpuState], list[scenarios.TracePod]]:
    """Bind pending pods to free instances of their profile, first fit; return the rest."""
    pins = [dict(g.pins) for g in gpus]
    free: dict[str, list[tuple[int, Instance]]] = {}
    for n, g in enumerate(gpus):
        for i in g.layout.instances:
            if i not in g.pins:
                free.setdefault(i.profile, []).append((n, i))
    waiting = []
    for pod in pending:
        slots = free.get(pod.profile, [])
        if len(slots) < pod.count:
            waiting.append(pod)
            continue
        for k in range(pod.count):
            n, instance = slots.pop(0)
            pins[n][instance] = f"trace/{pod.name}-{k}"
    placed = [
        GpuState(node=g.node, index=g.index, uuid=None, model=g.model, layout=g.layout, pins=p)
        for g, p in zip(gpus, pins, strict=True)
    ]
    return placed, waiting


def run_rebalance(
    pods: list[scenarios.TracePod], fleet_size: int, steps: int, planners: dict[str, Method]
) -> list[Row]:
    """Replay the trace: at each step departed pods free their instances, the method plans
    for the pods still waiting, and waiting pods are bound to free instances."""
    start = min(p.created for p in pods)
    end = max(p.deleted for p in pods if p.deleted < 2**62)
    times = [start + (end - start) * (k + 1) // (steps + 1) for k in range(steps)]
    rows = []
    for name, method in planners.items():
        gpus = scenarios.empty_h100_fleet(fleet_size)
        bound: dict[str, scenarios.TracePod] = {}
        seconds = requested = met = weighted_met = changed = 0.0
        used: list[int] = []
        served: list[float] = []
        statuses: list[str] = []
        for t in times:
            alive = {p.name: p for p in scenarios.alive(pods, t)}
            gpus = [
                GpuState(
                    node=g.node,
                    index=g.index,
                    uuid=None,
                    model=g.model,
                    layout=g.layout,
                    pins={
                        i: pod
                        for i, pod in g.pins.items()
                        if pod.removeprefix("trace/").rsplit("-", 1)[0] in alive
                    },
                )
                for g in gpus
            ]
            bound = {k: v for k, v in bound.items() if k in alive}
            waiting = [p for p in alive.values() if p.name not in bound]
            demand = scenarios.demand_of(waiting)
            started = time.perf_counter()
            result = method(gpus, demand)
            seconds += time.perf_counter() - started
            validate(result, gpus, demand, POLICY)
            statuses.append(result.solver.status)
            requested += result.summary.requested
            met += result.summary.met
            weighted_met += weighted(result, demand)
            changed += result.summary.gpus_changed
            gpus, still = _place(_apply(gpus, result), waiting)
            bound.update({p.name: p for p in waiting if p not in still})
            used.append(sum(1 for g in gpus if g.layout))
            served.append(len(bound) / max(len(alive), 1))
        rows.append(
            Row(
                "trace-rebalance",
                name,
                seconds,
                ",".join(sorted(set(statuses))) + f" x{steps}",
                None,
                int(requested),
                int(met),
                int(weighted_met),
                max(used),
                int(changed),
                0,
                0,
                {
                    "mean_gpus_used": statistics.mean(used),
                    "pods_running_share": statistics.mean(served),
                },
            )
        )
        print(
            f"  trace-rebalance  {name:<16} {seconds:7.2f} s  pods running "
            f"{statistics.mean(served):.1%} of alive  changed {int(changed)}",
            flush=True,
        )
    return rows


def print_table(rows: list[Row], bounds: dict[str, dict[str, float]]) -> None:
    """The comparison table, with ratios to cp-sat and to the lower bounds."""
    header = (
        f"{'scenario':<16} {'method':<16} {'seconds':>8} {'status':<10} {'gap':>6} "
        f"{'met':>13} {'weighted':>9} {'vs ours':>8} {'GPUs used':>9} {'changed':>8} "
        f"{'nodes':>6} {'evict':>5}"
    )
    print(header)
    print("-" * len(header))
    ours = {r.scenario: r for r in rows if r.method == "cp-sat"}
    for r in rows:
        ratio = (
            r.weighted_met / ours[r.scenario].weighted_met if ours[r.scenario].weighted_met else 1.0
        )
        gap = "-" if r.gap is None else f"{r.gap:.2%}"
        print(
            f"{r.scenario:<16} {r.method:<16} {r.seconds:8.2f} {r.status:<10} {gap:>6} "
            f"{f'{r.met}/{r.requested}':>13} {r.weighted_met:>9} {ratio:>8.3f} "
            f"{r.gpus_used:>9} {r.gpus_changed:>8} {r.nodes_touched:>6} {r.evictions:>5}"
        )
    for r in rows:
        if r.extra:
            text = ", ".join(f"{k} {v:.3f}" for k, v in r.extra.items())
            print(f"{r.scenario} / {r.method}: {text}")
    for scenario, values in bounds.items():
        text = ", ".join(f"{k} {v:g}" for k, v in values.items())
        print(f"bounds for {scenario}: {text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="cp-sat runs per static scenario")
    parser.add_argument("--steps", type=int, default=8, help="rebalance steps over the trace")
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--quick", action="store_true", help="a 100-node fleet, 3 steps")
    parser.add_argument("--trace-dir", type=Path, default=scenarios.TRACE_DIR)
    parser.add_argument("--json", type=Path, default=Path("bench/results/planner.json"))
    args = parser.parse_args()
    planners = methods(args.time_limit)
    rows: list[Row] = []
    bounds: dict[str, dict[str, float]] = {}

    nodes = 100 if args.quick else 1000
    gpus, demand = scenarios.fleet(nodes=nodes, requests=nodes * 10)
    print(f"fleet: {len(gpus)} GPUs, {sum(d.count for d in demand)} pending requests")
    fleet_rows = run_static("fleet", gpus, demand, planners, args.repeat)
    rows += fleet_rows
    ours = fleet_rows[0]
    bounds["fleet"] = {
        "weighted demand (requested)": sum(demand_weight(d) * d.count for d in demand),
        "cp-sat proven weighted demand": float(ours.weighted_met),
    }

    pods = scenarios.trace_pods(args.trace_dir)
    # As in the FGD paper, the snapshot packs the trace's whole pod list at once (replayed in
    # time, only 30-50 of its short-lived pods run together; that is the rebalance scenario).
    snapshot = pods[: len(pods) // 8] if args.quick else pods
    h100 = scenarios.default_catalog().model("H100-80GB")
    snap_demand = scenarios.demand_of(snapshot)
    lower = scenarios.slice_lower_bound(snap_demand, h100)
    lp = scenarios.lp_lower_bound(snap_demand, h100)
    size = -(-int(lower * 1.25) // 8) * 8
    print(
        f"trace snapshot: {len(snapshot)} GPU pods at once, lower bound {lower} GPUs, "
        f"fleet of {size} empty H100-80GB"
    )
    snap_rows = run_static(
        "trace-snapshot", scenarios.empty_h100_fleet(size), snap_demand, planners, 1
    )
    for r in snap_rows:
        r.extra["gpus_vs_lp_bound"] = r.gpus_used / lp
        r.extra["gpus_vs_slice_bound"] = r.gpus_used / lower
    rows += snap_rows
    bounds["trace-snapshot"] = {
        "GPUs (LP relaxation)": round(lp, 2),
        "GPUs (slice capacity)": lower,
    }
    replay_size = 64 if args.quick else 128

    steps = 3 if args.quick else args.steps
    print(f"trace rebalance: {steps} steps on {size} H100-80GB")
    rows += run_rebalance(pods, replay_size, steps, planners)

    print()
    print_table(rows, bounds)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {
                "benchmark": "planner",
                "python": platform.python_version(),
                "machine": platform.machine(),
                "cpus": os.cpu_count(),
                "time_limit": args.time_limit,
                "trace_mapping": scenarios.__doc__,
                "bounds": bounds,
                "rows": [r.__dict__ for r in rows],
            },
            indent=2,
            default=str,
        )
        + "\n"
    )
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
