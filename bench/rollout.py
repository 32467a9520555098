"""Rollout benchmark: the operator end to end on the real control plane (built and cached by
tests/cluster/build.sh), with simulated GPU nodes.

The scenario is tests/cluster/fleet_scenario.py (the same one tests/cluster/test_fleet.py
checks): N nodes x 2 H100-80GB split 3g+3g, pods for 1g and 2g instances nobody offers, the
operator plans and rolls out (maxUnavailable 10), the real scheduler runs the pods; then a
cron rebalance serves whole-GPU pods. Deliberate waits (the next cron minute) are excluded.

    .venv/bin/python bench/rollout.py [--nodes 50] [--json bench/results/rollout.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "cluster"))

from fleet_scenario import run_fleet  # noqa: E402
from harness import ControlPlane  # noqa: E402
from operator_proc import install_crds, operator_service_account  # noqa: E402

LABELS = {
    "pending_to_running_s": "pending pods -> all Running (plan, rollout, scheduling)",
    "plan_and_rollout_s": "plan applied -> rollout Ready",
    "planner_s_first": "solver seconds, first plan",
    "planner_s_rebalance": "solver seconds, rebalance",
    "planner_s_mean": "planning seconds per reconcile (inventory + solve + validate), mean",
    "rebalance_to_running_s": "cron fired -> whole-GPU pods Running",
    "nodes_reconfigured": "nodes reconfigured (both rollouts)",
    "operator_peak_rss_mib": "operator peak RSS, MiB",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--json", type=Path, default=Path("bench/results/rollout.json"))
    args = parser.parse_args()
    started = time.monotonic()
    with ControlPlane.up() as cp:
        install_crds(cp)
        run = run_fleet(cp, nodes=args.nodes, kubeconfig=operator_service_account(cp))
    checks = {
        "all pending pods ran": run.first.get("demandMet") == "90/90",
        "no running pod disturbed": run.kept_running,
        "no node left cordoned": not run.cordoned,
        "rebalance changed exactly 4 GPUs": run.second["plan"]["gpusChanged"] == 4,
    }
    print(f"\nrollout benchmark: {run.nodes} nodes, {run.gpus} GPUs")
    width = max(len(v) for v in LABELS.values())
    for key, label in LABELS.items():
        print(f"  {label:<{width}}  {run.figures.get(key, float('nan')):10.3f}")
    for name, ok in checks.items():
        print(f"  {name:<{width}}  {'yes' if ok else 'NO':>10}")
    print(f"  (benchmark wall time {time.monotonic() - started:.0f} s)")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {
                "nodes": run.nodes,
                "gpus": run.gpus,
                "figures": run.figures,
                "checks": checks,
                "first_plan": {k: run.first.get(k) for k in ("demandMet", "nodes", "plan")},
            },
            indent=2,
        )
    )
    print(f"wrote {args.json}")
    if not all(checks.values()):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
