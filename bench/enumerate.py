"""Benchmark: enumerate every valid (and every maximal) layout of each catalog model.

Target (issue #2): every model enumerates in well under a second on a 2-core machine.
Prints a table and writes JSON (default bench/results/enumerate.json).

    .venv/bin/python bench/enumerate.py [--repeat 5] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

from migplan.planner.hardware.catalog import default_catalog
from migplan.planner.hardware.enumeration import clear_cache, enumerate_layouts


def cold_seconds(model, *, maximal: bool, repeat: int) -> tuple[float, int]:
    """Median wall time of a cold (uncached) enumeration, and the number of layouts."""
    times = []
    count = 0
    for _ in range(repeat):
        clear_cache()
        start = time.perf_counter()
        count = len(enumerate_layouts(model, maximal=maximal))
        times.append(time.perf_counter() - start)
    return statistics.median(times), count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path, default=Path("bench/results/enumerate.json"))
    args = parser.parse_args()

    rows = []
    for model in default_catalog():
        all_s, all_n = cold_seconds(model, maximal=False, repeat=args.repeat)
        max_s, max_n = cold_seconds(model, maximal=True, repeat=args.repeat)
        rows.append(
            {
                "model": model.model,
                "layouts": all_n,
                "seconds": all_s,
                "maximal": max_n,
                "maximal_seconds": max_s,
            }
        )
    total = sum(r["seconds"] + r["maximal_seconds"] for r in rows)

    print(f"{'model':<14} {'layouts':>8} {'ms':>8} {'maximal':>8} {'ms':>8}")
    for r in rows:
        print(
            f"{r['model']:<14} {r['layouts']:>8} {r['seconds'] * 1e3:>8.1f} "
            f"{r['maximal']:>8} {r['maximal_seconds'] * 1e3:>8.1f}"
        )
    print(f"all models, both modes (median of {args.repeat} cold runs each): {total:.3f} s")

    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {
                "benchmark": "enumerate",
                "python": platform.python_version(),
                "machine": platform.machine(),
                "repeat": args.repeat,
                "total_seconds": total,
                "models": rows,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
