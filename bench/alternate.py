"""Before/after on the fragmented bench's fleets, the two versions' runs alternating.

`fragmented.py --cli-pythonpath` runs one version over every scenario and then the other:
on a shared VM whose speed drifts by a fifth within minutes, rows the change cannot touch
moved as much as the rows it did. Here each scenario's preview runs other-version, this
version, other, this... `--repeat` times, and the table gives every time, the medians (also of
the CPU seconds each run used: wall time moves with waits for a core, CPU time less), the
peak RSS and whether both returned the same plan (the plan JSON without its timings).

    .venv/bin/python bench/alternate.py --cli-pythonpath DIR [--repeat 3] [--only TEXT]
        [--quick | --largest]

DIR: another migplan version installed apart (`pip install --no-deps --target DIR SRC`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import cast

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fragmented import CliRun, documents, family, run_cli
from report import write_json

TIMINGS = {"wallSeconds", "buildSeconds", "seconds"}


def without_timings(doc: object) -> object:
    """`doc` with every timing field left out, to compare two plans."""
    if isinstance(doc, dict):
        return {k: without_timings(v) for k, v in doc.items() if k not in TIMINGS}
    if isinstance(doc, list):
        return [without_timings(v) for v in doc]
    return doc


def _decisions(doc: dict) -> dict:
    """A plan without the digest of its inputs."""
    return {k: v for k, v in doc.items() if k != "inputHash"}


def _outcome(doc: dict) -> dict:
    """What a plan achieved, for rows whose plans differ: the solver's status, weighted
    demand met and bound, and the summary (met, evictions, GPUs changed, nodes touched)."""
    solver, summary = doc["solver"], doc["summary"]
    return {
        "status": solver["status"],
        "weighted": solver["objective"],
        "bound": solver["bound"],
        **{k: v for k, v in summary.items() if k != "requested"},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli-pythonpath", required=True, help="the other version's directory")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each version (default 3)")
    parser.add_argument("--only", help="run only scenarios whose name contains this")
    parser.add_argument("--quick", action="store_true", help="50 and 250 nodes only")
    parser.add_argument("--largest", action="store_true", help="only the 5,000-node fleets")
    parser.add_argument("--json", type=Path, default=Path("bench/results/alternate.json"))
    args = parser.parse_args()
    mine = {**os.environ, "PYTHONSAFEPATH": "1"}
    other = {**mine, "PYTHONPATH": args.cli_pythonpath}
    rows = []
    with tempfile.TemporaryDirectory(prefix="migplan-alternate-") as tmp:
        work = Path(tmp)
        for case in family(args.quick, args.largest):
            if args.only and args.only not in case.name:
                continue
            inventory, plan = documents(case)
            (work / "plan.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
            (work / "inventory.json").write_text(json.dumps(inventory))
            runs: dict[str, list[CliRun]] = {"before": [], "now": []}
            plans: dict[str, object] = {}
            outcome: dict[str, dict[str, object]] = {}
            for _ in range(args.repeat):
                for version, env in (("before", other), ("now", mine)):
                    run = run_cli(work / "plan.yaml", work / "inventory.json", work, env)
                    runs[version].append(run._replace(doc={}))  # the measures; one plan kept
                    plans[version] = without_timings(run.doc)
                    outcome[version] = _outcome(run.doc)
            row: dict[str, object] = {"scenario": case.name, "gpus": outcome["now"]["gpus"]}
            for v, measured in runs.items():
                walls = [r.wall for r in measured]
                cpus = [r.cpu for r in measured]
                row[f"{v}_seconds"] = [round(w, 2) for w in walls]
                row[f"{v}_median"] = round(statistics.median(walls), 2)
                row[f"{v}_cpu_seconds"] = [round(c, 2) for c in cpus]
                row[f"{v}_cpu_median"] = round(statistics.median(cpus), 2)
                row[f"{v}_rss_mib"] = round(max(r.rss_mib for r in measured))
            before, now = (cast(dict, plans[v]) for v in ("before", "now"))
            row |= {
                # The digest of the inputs is compared apart: a version may compute it
                # another way without planning anything differently.
                "same_plan": _decisions(before) == _decisions(now),
                "same_digest": before.get("inputHash") == now.get("inputHash"),
                "before": outcome["before"],
                "now": outcome["now"],
            }
            rows.append(row)
            print(
                f"{row['scenario']:<40} {row['before_median']:6.2f} -> {row['now_median']:6.2f} s"
                f"  ({' / '.join(map(str, row['before_seconds']))} | "
                f"{' / '.join(map(str, row['now_seconds']))})"
                f"  CPU {row['before_cpu_median']:.2f} -> {row['now_cpu_median']:.2f} s"
                f"  RSS {row['before_rss_mib']} -> {row['now_rss_mib']} MiB"
                f"  {'same plan' if row['same_plan'] else 'PLANS DIFFER'}"
                f"{'' if row['same_digest'] else ' (input digests differ)'}",
                flush=True,
            )
            if not row["same_plan"]:
                print(f"    before: {outcome['before']}\n    now:    {outcome['now']}")
    write_json(
        args.json,
        benchmark="alternate",
        cli_pythonpath=args.cli_pythonpath,
        repeat=args.repeat,
        inventory_format="json",
        rows=rows,
    )


if __name__ == "__main__":
    main()
