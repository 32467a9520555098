"""DRA benchmark: claims pending -> Running at fleet size, in both modes, on the real control
plane (tests/cluster/build.sh) with simulated nodes.

The scenario is tests/cluster/dra_scenario.py (test_dra_scenario.py runs it on 3 nodes): N
one-GPU H100 nodes whose MIG devices NVIDIA's DRA driver publishes, DynamicMIG slots
(`steer`: the operator taints the slots outside its plan) or static MIG devices (`static`:
the agent lays the GPUs out, the DRA kubelet plugin republishes); two waves of pods with
claims (N x 3g.40gb, then N x 2g.20gb + N x 1g.10gb), each followed by a re-plan.

    .venv/bin/python bench/dra.py [--nodes 200] [--modes steer,static]
        [--json bench/results/dra.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "cluster"))

from dra_scenario import run_dra  # noqa: E402
from harness import ControlPlane  # noqa: E402
from operator_proc import install_crds, operator_service_account  # noqa: E402


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--modes", default="steer,static")
    parser.add_argument("--json", type=Path, default=Path("bench/results/dra.json"))
    args = parser.parse_args()
    started = time.monotonic()
    rows = []
    with ControlPlane.up() as cp:
        install_crds(cp)
        kubeconfig = operator_service_account(cp)
        for mode in args.modes.split(","):
            began = time.monotonic()
            run = run_dra(cp, nodes=args.nodes, mode=mode, kubeconfig=kubeconfig)
            waits = list(run.waits.values())
            rows.append(
                {
                    "mode": mode,
                    "nodes": run.nodes,
                    "pods": len(waits),
                    "first_ready_s": round(run.first_ready_s, 1),
                    "taint_rules": run.taint_rules,
                    "wave_seconds": [round(w, 1) for w in run.wave_seconds],
                    "pending_to_running_s": {
                        "p50": percentile(waits, 0.5),
                        "p90": percentile(waits, 0.9),
                        "max": max(waits, default=float("nan")),
                        "mean": round(statistics.fmean(waits), 1) if waits else None,
                    },
                    "first_wave_pods_moved": len(run.disturbed),
                    "phase": run.phase,
                    "wall_s": round(time.monotonic() - began, 1),
                }
            )
            # Written after each mode: a long run cut short keeps what it measured.
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps({"nodes": args.nodes, "runs": rows}, indent=2) + "\n")
    print(f"\nDRA benchmark: {args.nodes} one-GPU H100 nodes, 3 claims per node in two waves")
    header = (
        f"{'mode':<7} {'pods':>5} {'plan Ready s':>12} {'taint rules':>11} "
        f"{'wave 1 s':>8} {'wave 2 s':>8} {'p50 s':>6} {'p90 s':>6} {'max s':>6} "
        f"{'moved':>5} {'phase':>6}"
    )
    print(header)
    for r in rows:
        w = r["pending_to_running_s"]
        print(
            f"{r['mode']:<7} {r['pods']:>5} {r['first_ready_s']:>12} {r['taint_rules']:>11} "
            f"{r['wave_seconds'][0]:>8} {r['wave_seconds'][1]:>8} {w['p50']:>6.0f} "
            f"{w['p90']:>6.0f} {w['max']:>6.0f} {r['first_wave_pods_moved']:>5} {r['phase']:>6}"
        )
    print(f"(benchmark wall time {time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
