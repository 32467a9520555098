"""Fragmented-fleet benchmark: busy fleets where almost every GPU differs (issue #11).

Each scenario is an inventory and a plan file (bench/scenarios.py `fragmented`): 85 % of the
GPUs hold an assorted maximal layout, half of those instances run pods, every node has
pending single-instance pods over nine profiles plus one explicit demand row. Families:
- sizes 50 / 250 / 1,000 nodes x 8 GPUs (A100-40GB and H100-80GB), policies none and evict,
  over-demand (12 pods per node: more than fits) and under-demand (3 per node);
- a three-model mix (A100-40GB, H100-80GB, H200-141GB), over-demand, both policies;
- over-demand where 30 % of the pods need 2 or 3 instances on one node (bundles), per size
  and policy;
- over-demand where 30 % of the pods are in PodGroups of 2-16 pods (met all or nothing) and
  10 % are bundles, per size and policy.

Per scenario: `migplan preview PLAN --cluster INV -o json` runs as a child process, as a user
would, for the wall time and peak RSS; the plan it prints gives the solver's figures. The
nos-style greedy, first-fit and static-geometry baselines run on the same input in this
process. "never worse" checks migplan's plan against each baseline on the whole lexicographic
objective (demand, evictions, GPUs changed, nodes touched, headroom, operations).

    .venv/bin/python bench/fragmented.py [--quick] [--only TEXT] [--time-limit S] [--json-inventory]
        [--cli-pythonpath DIR] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NamedTuple

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scenarios
from report import write_json

from migplan.planner.api.inventory import Inventory, resolve_inventory
from migplan.planner.api.spec import GPUPartitionPlan
from migplan.planner.baselines import first_fit_plan, greedy_plan, static_plan
from migplan.planner.demand import build_demand, demand_weight
from migplan.planner.hardware.catalog import default_catalog
from migplan.planner.hardware.layout import Layout
from migplan.planner.pipeline import covered
from migplan.planner.plan import Plan
from migplan.planner.solver.objective import score
from migplan.planner.validate import validate

BASELINES = {"greedy (nos)": greedy_plan, "first-fit": first_fit_plan, "static": static_plan}


@dataclass
class Scenario:
    """One benchmark case."""

    name: str
    nodes: int
    policy: str
    pods_per_node: int
    mix: str = "a100-h100"
    several: float = 0.0
    """Share of pending pods that need 2 or 3 instances on one node."""
    gangs: float = 0.0
    """Share of pending pods in PodGroups of 2-16, met all or nothing."""


@dataclass
class Row:
    """migplan and the baselines on one scenario."""

    scenario: str
    gpus: int
    policy: str
    cli_seconds: float
    peak_rss_mib: float
    build_seconds: float
    solve_seconds: float
    status: str
    stage_status: list[str]
    gap: float
    started_from: str
    chosen: str
    classes: int
    pools: int
    variables: int
    requested: int
    met: int
    weighted: int
    evictions: int
    gpus_changed: int
    nodes_touched: int
    baselines: dict[str, dict[str, float]] = field(default_factory=dict)
    never_worse: bool = True
    moved_from_first: int | None = None
    """A minute later: GPUs whose target differs from the first plan's (its stability)."""


LARGEST = 5000
"""Nodes in the largest cluster Kubernetes supports (40,000 GPUs here): `--largest` alone."""


def family(quick: bool, largest: bool = False) -> list[Scenario]:
    """The scenarios, smallest first; with `largest`, only the 5,000-node fleets."""
    if largest:
        return [
            Scenario(f"{LARGEST} nodes, {policy}, {demand}-demand", LARGEST, policy, pods)
            for demand, pods in (("over", 12), ("under", 3))
            for policy in ("none", "evict")
        ]
    sizes = (50, 250) if quick else (50, 250, 1000)
    cases = [
        Scenario(f"{n} nodes, {policy}, {demand}-demand", n, policy, pods)
        for n in sizes
        for demand, pods in (("over", 12), ("under", 3))
        for policy in ("none", "evict")
    ]
    cases += [
        Scenario(
            f"{n} nodes, {policy}, multi-instance",
            n,
            policy,
            12,
            several=0.3,
        )
        for n in sizes
        for policy in ("none", "evict")
    ]
    cases += [
        Scenario(f"{n} nodes, {policy}, gangs", n, policy, 12, several=0.1, gangs=0.3)
        for n in sizes
        for policy in ("none", "evict")
    ]
    mixed = 250 if quick else 1000
    cases += [
        Scenario(f"{mixed} nodes 3-model, {policy}, over-demand", mixed, policy, 12, "three-model")
        for policy in ("none", "evict")
    ]
    return cases


ANY_VERSION = (
    "import sys; import migplan.operator.cli as cli; "
    "main = getattr(cli, 'main', None) "
    "or __import__('migplan.operator.cli.app', fromlist=['main']).main; "
    "sys.argv[0] = 'migplan'; sys.exit(main())"
)
"""The `migplan` script of any version: its entry point (migplan.operator.cli:main since
2026-11-27, migplan.operator.cli.app:main before)."""


class CliRun(NamedTuple):
    """One preview run: its JSON plan, wall seconds, peak RSS in MiB, and the CPU seconds its
    threads used (user and system; GLOP's and CP-SAT's threads included, so it may exceed the
    wall time). On a shared VM whose speed drifts, CPU seconds still move with a neighbour's
    load, but not with time spent waiting for a core."""

    doc: dict[str, object]
    wall: float
    rss_mib: float
    cpu: float


def run_cli(
    plan: Path,
    inventory: Path,
    workdir: Path,
    env: dict[str, str],
    previous: Path | None = None,
) -> CliRun:
    """The preview as a child process (from the plan in `previous`, if given)."""
    # With another version first on PYTHONPATH (--cli-pythonpath), the installed script may
    # name an entry point that version lacks: start whichever one it has.
    command = (
        [sys.executable, "-c", ANY_VERSION]
        if "PYTHONPATH" in env
        else [str(Path(sys.executable).with_name("migplan"))]
    )
    out_path, err_path = workdir / "plan.json", workdir / "stderr.txt"
    argv = [*command, "preview", str(plan), "--cluster", str(inventory), "-o", "json"]
    if previous is not None:
        argv += ["--previous", str(previous)]
    with out_path.open("wb") as out, err_path.open("wb") as err:
        started = time.perf_counter()
        child = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
        status, peak, usage = _wait_measuring(child.pid)
        wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise RuntimeError(f"migplan preview failed ({child.returncode}): {err_path.read_text()}")
    return CliRun(
        doc=json.loads(out_path.read_text()),
        wall=wall,
        rss_mib=peak / 1024,
        cpu=usage.ru_utime + usage.ru_stime,
    )


def _wait_measuring(pid: int) -> tuple[int, int, resource.struct_rusage]:
    """Wait for `pid`; its exit status, peak resident set in KiB, read from its own memory's
    high-water mark (/proc VmHWM) every 5 ms, and its resource usage. The child's ru_maxrss is
    no measure: Linux carries the resident size of the process it was forked from (this one,
    grown by the baselines of earlier scenarios) into it at exec, so later rows read this
    process's size."""
    peak = 0
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            return status, peak or usage.ru_maxrss, usage
        try:
            with open(f"/proc/{pid}/status") as proc:
                for line in proc:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
                        break
        except OSError:  # gone between the wait and the read
            pass
        time.sleep(0.005)


def documents(case: Scenario) -> tuple[dict[str, object], dict[str, object]]:
    """The scenario's inventory and GPUPartitionPlan (`scenarios.fragmented`)."""
    return scenarios.fragmented(
        nodes=case.nodes,
        policy=case.policy,
        pods_per_node=case.pods_per_node,
        mix=case.mix,
        several=case.several,
        gangs=case.gangs,
    )


def measure(
    case: Scenario,
    workdir: Path,
    env: dict[str, str],
    *,
    time_limit: float | None = None,
    json_inventory: bool = False,
    later: bool = False,
) -> list[Row]:
    """Write the scenario's files, run the CLI and the baselines, compare; with `later`, also
    the same fleet a minute later (`scenarios.a_minute_later`), planned afresh and from the
    first plan (`--previous`)."""
    inventory_doc, plan_doc = documents(case)
    if time_limit is not None:
        plan_doc["spec"]["solver"] = {"timeLimitSeconds": time_limit}  # type: ignore[index]
    plan_path = workdir / "plan.yaml"
    plan_path.write_text(yaml.safe_dump(plan_doc, sort_keys=False))
    files = {
        "plan_path": plan_path,
        "workdir": workdir,
        "env": env,
        "json_inventory": json_inventory,
    }
    first, _ = _row(case.name, inventory_doc, **files)
    if not later:
        return [first]
    previous = workdir / "previous.json"
    (workdir / "plan.json").replace(previous)
    moved = scenarios.a_minute_later(inventory_doc)
    name = f"{case.name}, +1 min"
    before = {(g["node"], g["gpu"]): g["after"] for g in json.loads(previous.read_text())["gpus"]}
    rows = [first]
    for row, plan in (
        _row(name, moved, **files),
        _row(f"{name}, warm", moved, **files, previous=previous),
    ):
        row.moved_from_first = sum(before.get((g.node, g.gpu)) != g.after for g in plan.gpus)
        rows.append(row)
    return rows


def _row(
    name: str,
    inventory_doc: dict[str, object],
    *,
    plan_path: Path,
    workdir: Path,
    env: dict[str, str],
    json_inventory: bool,
    previous: Path | None = None,
) -> tuple[Row, Plan]:
    """The CLI on `inventory_doc` against the baselines; the row and the CLI's plan."""
    inv_path = workdir / "inventory.yaml"
    inv_path.write_text(
        json.dumps(inventory_doc)
        if json_inventory
        else yaml.safe_dump(inventory_doc, sort_keys=False)
    )
    doc, wall, rss, _ = run_cli(plan_path, inv_path, workdir, env, previous)
    ours = Plan.model_validate(doc)

    manifest = GPUPartitionPlan.model_validate(yaml.safe_load(plan_path.read_text()))
    scope = covered(Inventory.model_validate(inventory_doc), manifest)
    gpus = resolve_inventory(scope, default_catalog())
    demand = build_demand(manifest.spec.demand, scope)
    policy = manifest.spec.policy
    validate(ours, gpus, demand, policy)

    def lexicographic(plan: Plan) -> tuple[int, ...]:
        return score(gpus, {(g.node, g.gpu): Layout.parse(g.after) for g in plan.gpus}, demand)

    def weighted(plan: Plan) -> int:
        return sum(r.met * demand_weight(d) for r, d in zip(plan.demand, demand, strict=True))

    mine = lexicographic(ours)
    s = ours.solver
    row = Row(
        scenario=name,
        gpus=len(gpus),
        policy=policy.disruption.value,
        cli_seconds=wall,
        peak_rss_mib=rss,
        build_seconds=s.build_seconds,
        solve_seconds=sum(st.seconds for st in s.stages),
        status=s.status,
        stage_status=[f"{st.name}: {st.status}" for st in s.stages],
        gap=s.gap,
        started_from=s.started_from or "",
        chosen=s.chosen or "",
        classes=s.classes,
        pools=s.pools,
        variables=s.variables,
        requested=ours.summary.requested,
        met=ours.summary.met,
        weighted=weighted(ours),
        evictions=ours.summary.evictions,
        gpus_changed=ours.summary.gpus_changed,
        nodes_touched=ours.summary.nodes_touched,
    )
    for baseline, method in BASELINES.items():
        started = time.perf_counter()
        theirs = method(gpus, demand)
        seconds = time.perf_counter() - started
        validate(theirs, gpus, demand, policy)
        row.baselines[baseline] = {
            "seconds": seconds,
            "met": theirs.summary.met,
            "weighted": weighted(theirs),
            "gpus_changed": theirs.summary.gpus_changed,
        }
        row.never_worse = row.never_worse and mine >= lexicographic(theirs)
    return row, ours


def print_table(rows: list[Row]) -> None:
    """One line per scenario: migplan's figures, then each baseline's weighted demand."""
    header = (
        f"{'scenario':<36} {'GPUs':>5} {'CLI s':>6} {'RSS MiB':>7} {'build':>5} {'solve':>5} "
        f"{'status':<8} {'gap':>6} {'met':>11} {'weighted':>8} {'greedy':>7} {'1st-fit':>7} "
        f"{'static':>7} {'evict':>5} {'changed':>7} {'nodes':>5} {'>=all':>5}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        b = r.baselines
        print(
            f"{r.scenario:<36} {r.gpus:>5} {r.cli_seconds:6.2f} {r.peak_rss_mib:7.0f} "
            f"{r.build_seconds:5.2f} {r.solve_seconds:5.2f} {r.status:<8} {r.gap:6.2%} "
            f"{f'{r.met}/{r.requested}':>11} {r.weighted:>8} "
            f"{b['greedy (nos)']['weighted']:>7.0f} {b['first-fit']['weighted']:>7.0f} "
            f"{b['static']['weighted']:>7.0f} {r.evictions:>5} {r.gpus_changed:>7} "
            f"{r.nodes_touched:>5} {'yes' if r.never_worse else 'NO':>5}"
        )
    for r in rows:
        moved = (
            ""
            if r.moved_from_first is None
            else f"; {r.moved_from_first} GPUs' targets differ from the first plan's"
        )
        print(
            f"{r.scenario}: {'; '.join(r.stage_status)}; from {r.started_from}, "
            f"chose {r.chosen}{moved}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="50 and 250 nodes only")
    parser.add_argument(
        "--largest",
        action="store_true",
        help=f"only the {LARGEST:,}-node fleets (the largest cluster Kubernetes supports; "
        "use with --json-inventory, as a tool reading that many nodes would)",
    )
    parser.add_argument("--json", type=Path, default=Path("bench/results/fragmented.json"))
    parser.add_argument("--only", help="run only scenarios whose name contains this")
    parser.add_argument(
        "--time-limit", type=float, help="the plans' spec.solver.timeLimitSeconds (default 10)"
    )
    parser.add_argument(
        "--json-inventory", action="store_true", help="write the inventories as JSON, not YAML"
    )
    parser.add_argument(
        "--a-minute-later",
        action="store_true",
        help="after each scenario, the same fleet a minute later (2 %% of the running pods "
        "done, as many new ones pending), planned afresh and from the first plan (--previous)",
    )
    parser.add_argument(
        "--cli-pythonpath",
        help="run the preview with this PYTHONPATH first: an installed copy of another migplan "
        "version, for before/after figures (pip install --no-deps --target DIR WHEEL)",
    )
    args = parser.parse_args()
    env = {**os.environ, "PYTHONSAFEPATH": "1"}
    if args.cli_pythonpath:
        env["PYTHONPATH"] = args.cli_pythonpath
    rows = []
    with tempfile.TemporaryDirectory(prefix="migplan-bench-") as tmp:
        for case in family(args.quick, args.largest):
            if args.only and args.only not in case.name:
                continue
            found = measure(
                case,
                Path(tmp),
                env,
                time_limit=args.time_limit,
                json_inventory=args.json_inventory,
                later=args.a_minute_later,
            )
            rows += found
            for row in found:
                print(
                    f"  {row.scenario:<36} {row.cli_seconds:6.2f} s  {row.status:<8} "
                    f"met {row.met}/{row.requested}  never worse: {row.never_worse}",
                    flush=True,
                )
    print()
    print_table(rows)
    write_json(
        args.json,
        benchmark="fragmented",
        time_limit=args.time_limit or 10.0,
        cli_pythonpath=args.cli_pythonpath,
        inventory_format="json" if args.json_inventory else "yaml",
        scenarios=scenarios.fragmented.__doc__,
        rows=[asdict(r) for r in rows],
    )


if __name__ == "__main__":
    main()
