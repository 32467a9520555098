"""Soak benchmark: the operator for a long while on a large simulated fleet under pending-pod
churn (tests/cluster/soak_scenario.py says what churn), on the real control plane.

Reports the operator's resident memory over time (flat within 10 % after warm-up, the first
quarter of the run), its API requests per minute by verb and resource, pods' pending ->
Running times, and whether every convergence invariant held at the end.

    .venv/bin/python bench/soak.py [--nodes 1000] [--minutes 30] [--json bench/results/soak.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "cluster"))

from harness import ControlPlane  # noqa: E402
from operator_proc import install_crds, operator_service_account  # noqa: E402
from soak_scenario import by_verb, percentile, run_soak  # noqa: E402

from migplan.operator.logs import configure_logging  # noqa: E402

RSS_LIMIT = 0.10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--per-minute", type=float, default=None, help="arrivals per minute")
    parser.add_argument("--tick", type=float, default=2.0)
    parser.add_argument("--json", type=Path, default=Path("bench/results/soak.json"))
    args = parser.parse_args()
    configure_logging(level="warning")  # the simulated fleet's agents: a line per node per pass
    started = time.monotonic()
    with ControlPlane.up() as cp:
        install_crds(cp)
        run = run_soak(
            cp,
            nodes=args.nodes,
            minutes=args.minutes,
            per_minute=args.per_minute,
            tick=args.tick,
            kubeconfig=operator_service_account(cp),
            settle=900,
            progress=lambda line: print(line, file=sys.stderr, flush=True),
        )
    warm_up = args.minutes * 60 * 0.25
    growth = run.rss_growth(warm_up)
    waits = run.waits
    rows = {
        "nodes (one H100 each) / minutes / tick s": f"{run.nodes} / {run.minutes:g} / {run.tick:g}",
        "pods arrived / ran / gave up pending / pending at end": (
            f"{run.arrived} / {len(waits)} / {run.gave_up} /"
            f" {run.figures.get('pending_at_end', 0):.0f}"
        ),
        "pending -> Running s: p50 / p90 / p99 / max": " / ".join(
            f"{percentile(waits, q):.0f}" for q in (0.5, 0.9, 0.99, 1.0)
        ),
        "plans / mean planning s / nodes reconfigured / evictions": (
            f"{run.figures['plans']:.0f} / {run.figures['planner_s_mean']:.2f} /"
            f" {run.figures['nodes_reconfigured']:.0f} / {run.evicted}"
        ),
        "operator RSS MiB: after warm-up / peak / end": (
            f"{next(m for at, m in run.rss_mib if at >= warm_up):.0f} /"
            f" {max(m for _, m in run.rss_mib):.0f} / {run.rss_mib[-1][1]:.0f}"
        ),
        "RSS growth after warm-up": f"{growth:.1%}",
        "API requests/min by verb": ", ".join(
            f"{verb} {rate:.0f}" for verb, rate in by_verb(run.api_per_minute).items()
        ),
    }
    print(f"\nsoak benchmark ({run.source})")
    width = max(map(len, rows))
    for label, value in rows.items():
        print(f"  {label:<{width}}  {value}")
    print("  API requests/min by verb and resource (after warm-up):")
    for key, rate in run.api_per_minute.items():
        print(f"    {key:<40} {rate:8.1f}")
    checks = {
        "RSS flat within 10 % after warm-up": growth <= RSS_LIMIT,
        "every invariant held at the end": not run.invariants,
        "final phase Ready": run.final.get("phase") == "Ready",
    }
    for name, ok in checks.items():
        print(f"  {name:<{width}}  {'yes' if ok else 'NO'}")
    if run.invariants:
        print(f"  invariant failed: {run.invariants}")
    print(f"  (benchmark wall time {time.monotonic() - started:.0f} s)")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {
                "source": run.source,
                "nodes": run.nodes,
                "minutes": run.minutes,
                "tick": run.tick,
                "arrived": run.arrived,
                "ran": len(waits),
                "gave_up": run.gave_up,
                "evicted": run.evicted,
                "waits_s": sorted(waits),
                "rss_mib": run.rss_mib,
                "rss_growth_after_warm_up": growth,
                "api_per_minute": run.api_per_minute,
                "figures": run.figures,
                "invariants": run.invariants or "held",
                "final_phase": run.final.get("phase"),
                "checks": checks,
            },
            indent=1,
        )
    )
    print(f"wrote {args.json}")
    if not all(checks.values()):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
