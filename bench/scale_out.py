"""Scale-out benchmark (#34): how many new nodes migplan asks for when reshaping cannot meet
the pending demand, against a whole-GPU-per-pod baseline and the LP bound on nodes.

Fleets: the busy, fragmented over-demand fleets of `bench/fragmented.py` (A100-40GB and
H100-80GB nodes of 8 GPUs, 85 % partitioned, half the instances in use, 12 or 24 pending
single-instance pods per node over nine profiles), policies none and evict, with
`spec.scaleOut` offering 8-GPU A100-40GB and H100-80GB nodes (cost 1 each, up to 64 of each).
After the covered GPUs' plan, the pods left unmet are what the new nodes are for:
- migplan: the nodes its scale-out asks for (and the pods they meet);
- whole GPU per pod: each pod left gets a GPU of a model that has its profile, as without
  MIG (nodes of a model: its pods / 8, the pods either model serves filling spare slots);
- LP bound: the fewest nodes any layouts could do it with, fractional (Gilmore-Gomory's
  cutting-stock relaxation over both models' maximal layouts, solved with GLOP; independent
  of the CP-SAT model), rounded up.

    .venv/bin/python bench/scale_out.py [--only TEXT] [--json PATH]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from itertools import product
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scenarios
from report import write_json

from migplan.planner.api.inventory import Inventory
from migplan.planner.api.spec import GPUPartitionPlan
from migplan.planner.demand import DemandItem, left_unmet
from migplan.planner.hardware.catalog import GpuModel, default_catalog
from migplan.planner.pipeline import plan_fleet

GPUS = 8
OFFER_MODELS = ("A100-40GB", "H100-80GB")
MAX_NODES = 64
PODS_PER_NODE = (12, 24)
"""Pending pods per node: 12 (the fragmented bench's over-demand) and twice that."""


@dataclass
class Row:
    """One scenario's figures."""

    scenario: str
    gpus: int
    seconds: float
    pods_left: int
    migplan_nodes: int
    migplan_gpus_partitioned: int
    pods_met_on_new_nodes: int
    status: str
    whole_gpu_nodes: int
    lp_bound_nodes: int
    lp_bound_exact: float


def _offers() -> list[dict[str, object]]:
    return [
        {
            "name": f"{key.split('-')[0].lower()}-8x",
            "gpuModel": key,
            "gpusPerNode": GPUS,
            "maxNodes": MAX_NODES,
            "nodeSelector": {"migplan.io/pool": "fragmented", "gpu": key},
        }
        for key in OFFER_MODELS
    ]


def _served_by(left: list[DemandItem], models: list[GpuModel]) -> Counter[tuple[str, ...]]:
    """Pods left per set of offered models that have (one of) their profiles."""
    found: Counter[tuple[str, ...]] = Counter()
    for item in left:
        names = tuple(m.model for m in models if set(item.profiles) & {p.name for p in m.profiles})
        found[names] += item.count
    return found


def whole_gpu_nodes(left: list[DemandItem], models: list[GpuModel]) -> int:
    """Nodes if every pod left took a whole GPU of a model with its profile: each model's own
    pods first, pods either serves in the spare slots, then more nodes."""
    served = _served_by(left, models)
    nodes = 0
    spare = 0
    for m in models:
        own = served[(m.model,)]
        nodes += math.ceil(own / GPUS)
        spare += -own % GPUS
    either = sum(n for key, n in served.items() if len(key) > 1)
    return nodes + math.ceil(max(either - spare, 0) / GPUS)


def lp_bound(left: list[DemandItem], models: list[GpuModel]) -> float:
    """Fewest nodes, fractional: cover every pod left (any of its profiles) with GPUs of the
    offered models, each GPU given a maximal layout; GPUs / 8."""
    from ortools.linear_solver import pywraplp

    from migplan.planner.hardware.enumeration import enumerate_layouts

    solver = pywraplp.Solver.CreateSolver("GLOP")
    wanted = sorted({p for item in left for p in item.profiles})
    gpus = []
    supply: dict[str, list[tuple[object, int]]] = {p: [] for p in wanted}
    for m in models:
        names = [p for p in wanted if p in {q.name for q in m.profiles}]
        if not names:
            continue
        for n, layout in enumerate(enumerate_layouts(m, profiles=names, maximal=True)):
            y = solver.NumVar(0, solver.infinity(), f"y_{m.model}_{n}")
            gpus.append(y)
            for profile, count in layout.profile_counts().items():
                supply[profile].append((y, count))
    # Per item, how its pods split over its profiles (either/or items choose).
    take: dict[str, list[object]] = {p: [] for p in wanted}
    for k, item in enumerate(left):
        split = [solver.NumVar(0, solver.infinity(), f"x_{k}_{p}") for p in item.profiles]
        solver.Add(sum(split) == item.count * item.per_unit)
        for profile, var in zip(item.profiles, split, strict=True):
            take[profile].append(var)
    for profile in wanted:
        solver.Add(sum(y * c for y, c in supply[profile]) >= sum(take[profile]))
    solver.Minimize(sum(gpus))
    if solver.Solve() != pywraplp.Solver.OPTIMAL:
        raise RuntimeError("LP bound: GLOP found no optimum")
    return float(solver.Objective().Value()) / GPUS


def measure(nodes: int, policy: str, pods: int) -> Row:
    inventory_doc, plan_doc = scenarios.fragmented(nodes=nodes, pods_per_node=pods, policy=policy)
    plan_doc["spec"]["scaleOut"] = {"offers": _offers()}
    catalog = default_catalog()
    manifest = GPUPartitionPlan.model_validate(plan_doc)
    inventory = Inventory.model_validate(inventory_doc)
    started = time.monotonic()
    outcome = plan_fleet(manifest, inventory, catalog, started=started)
    seconds = time.monotonic() - started
    plan = outcome.plan
    left = [item for _, item in left_unmet(outcome.demand, [r.met for r in plan.demand])]
    scale = plan.scale_out
    assert scale is not None
    models = [catalog.model(key) for key in OFFER_MODELS]
    bound = lp_bound(left, models)
    return Row(
        scenario=f"{nodes} nodes, {policy}, {pods} pods per node",
        gpus=nodes * GPUS,
        seconds=round(seconds, 2),
        pods_left=sum(item.count for item in left),
        migplan_nodes=len(scale.nodes),
        migplan_gpus_partitioned=sum(g != "-" for n in scale.nodes for g in n.gpus),
        pods_met_on_new_nodes=sum(i.met for i in scale.items),
        status=scale.status,
        whole_gpu_nodes=whole_gpu_nodes(left, models),
        lp_bound_nodes=math.ceil(bound - 1e-9),
        lp_bound_exact=round(bound, 3),
    )


def print_table(rows: list[Row]) -> None:
    print(
        "| scenario | GPUs | plan s | pods left | migplan: nodes | GPUs partitioned | pods met "
        "| status | whole GPU per pod: nodes | LP bound: nodes |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    for r in rows:
        print(
            f"| {r.scenario} | {r.gpus} | {r.seconds:.2f} | {r.pods_left} | "
            f"**{r.migplan_nodes}** | {r.migplan_gpus_partitioned} | {r.pods_met_on_new_nodes} | "
            f"{r.status} | {r.whole_gpu_nodes} | {r.lp_bound_nodes} ({r.lp_bound_exact:g}) |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=Path("bench/results/scale-out.json"))
    parser.add_argument("--only", help="run only scenarios whose name contains this")
    args = parser.parse_args()
    rows = []
    for nodes, policy, pods in product((50, 250), ("none", "evict"), PODS_PER_NODE):
        name = f"{nodes} nodes, {policy}, {pods} pods per node"
        if args.only and args.only not in name:
            continue
        row = measure(nodes, policy, pods)
        rows.append(row)
        print(
            f"  {row.scenario:<36} {row.seconds:6.2f} s  left {row.pods_left}  "
            f"nodes {row.migplan_nodes} (whole GPU {row.whole_gpu_nodes}, "
            f"LP {row.lp_bound_exact:g})",
            flush=True,
        )
    print()
    print_table(rows)
    write_json(args.json, benchmark="scale-out", rows=[asdict(r) for r in rows])


if __name__ == "__main__":
    main()
