"""Benchmark scenarios: a synthetic 1,000-node fleet and the Alibaba openb trace on H100s.

Trace mapping (stated in the report): the trace has no MIG profiles and no GPU-memory column
(`memory_mib` is host memory), so a GPU-sharing pod (0 < gpu_milli < 1000) gets the smallest
H100-80GB profile whose compute share c/7 covers gpu_milli/1000 (1g.10gb up to 142 milli,
2g.20gb up to 285, 3g.40gb up to 428, 4g.40gb up to 571, else 7g.80gb); a pod with whole
GPUs gets one 7g.80gb per GPU; pods without GPUs are dropped. Node locality of multi-GPU pods
is ignored.
"""

from __future__ import annotations

import csv
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from migplan.planner.api.inventory import GpuState
from migplan.planner.demand import DemandItem, DemandKind
from migplan.planner.hardware.catalog import GpuModel, default_catalog
from migplan.planner.hardware.layout import Layout

SEED = 20261122
FLEET_PROFILES = ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")
FLEET_MIX = (0.40, 0.15, 0.20, 0.15, 0.05, 0.05)
BUSY_LAYOUTS = (
    "3g.40gb@0+2g.20gb@4+1g.10gb@6",
    "1g.10gb@0+1g.10gb@1+1g.10gb@2+1g.10gb@3+1g.10gb@4+1g.10gb@5+1g.10gb@6",
    "4g.40gb@0+3g.40gb@4",
    "3g.40gb@0+3g.40gb@4",
    "2g.20gb@0+2g.20gb@2+2g.20gb@4+1g.10gb@6",
    "7g.80gb@0",
)
IDLE_LAYOUTS = ("3g.40gb@0+2g.20gb@4+1g.10gb@6", "1g.20gb@0+1g.20gb@2+1g.20gb@4+1g.20gb@6")
TRACE_DIR = Path(__file__).resolve().parents[2] / "shared" / "traces" / "alibaba-gpu-v2023"


def _model(key: str) -> GpuModel:
    return default_catalog().model(key)


def fleet(
    *,
    nodes: int = 1000,
    gpus_per_node: int = 8,
    busy: float = 0.2,
    idle: float = 0.2,
    requests: int = 10_000,
    seed: int = SEED,
) -> tuple[list[GpuState], list[DemandItem]]:
    """Half A100-80GB and half H100-80GB nodes; `busy` of the GPUs run pods on some of their
    instances, `idle` hold unused instances, the rest are empty; `requests` pending requests
    over six profiles."""
    rnd = random.Random(seed)
    gpus = []
    for n in range(nodes):
        model = _model("A100-80GB" if n < nodes // 2 else "H100-80GB")
        for index in range(gpus_per_node):
            roll = rnd.random()
            pins = {}
            layout = Layout()
            if roll < busy:
                layout = Layout.parse(rnd.choice(BUSY_LAYOUTS))
                used = [i for i in layout.instances if rnd.random() < 0.6] or [layout.instances[0]]
                pins = {i: f"team-{n % 7}/job-{n}-{index}-{k}" for k, i in enumerate(used)}
            elif roll < busy + idle:
                layout = Layout.parse(rnd.choice(IDLE_LAYOUTS))
            gpus.append(
                GpuState(
                    node=f"node-{n:04d}",
                    index=index,
                    uuid=None,
                    model=model,
                    layout=layout,
                    pins=pins,
                )
            )
    counts = Counter(rnd.choices(FLEET_PROFILES, weights=FLEET_MIX, k=requests))
    demand = [DemandItem(p, counts[p], 1, DemandKind.FREE) for p in FLEET_PROFILES]
    return gpus, demand


@dataclass(frozen=True)
class TracePod:
    """One GPU pod of the trace, as MIG profile requests."""

    name: str
    profile: str
    count: int
    created: int
    deleted: int


def profile_for(gpu_milli: int) -> str:
    """The smallest H100-80GB profile whose compute share covers `gpu_milli`."""
    for compute, profile in ((1, "1g.10gb"), (2, "2g.20gb"), (3, "3g.40gb"), (4, "4g.40gb")):
        if gpu_milli * 7 <= compute * 1000:
            return profile
    return "7g.80gb"


def trace_pods(trace_dir: Path = TRACE_DIR, name: str = "default") -> list[TracePod]:
    """GPU pods of `openb_pod_list_<name>.csv`, mapped to profiles (see the module doc)."""
    pods = []
    with (trace_dir / f"openb_pod_list_{name}.csv").open() as handle:
        for row in csv.DictReader(handle):
            gpus, milli = int(row["num_gpu"]), int(row["gpu_milli"])
            if gpus == 0 or milli == 0:
                continue
            shared = gpus == 1 and milli < 1000
            pods.append(
                TracePod(
                    name=row["name"],
                    profile=profile_for(milli) if shared else "7g.80gb",
                    count=1 if shared else gpus,
                    created=int(row["creation_time"]),
                    deleted=int(row["deletion_time"] or 2**62),
                )
            )
    return pods


def alive(pods: list[TracePod], t: int) -> list[TracePod]:
    """Pods running at time `t`."""
    return [p for p in pods if p.created <= t < p.deleted]


def busiest_time(pods: list[TracePod]) -> int:
    """The creation time at which the most GPU slices are requested at once."""
    events = sorted({p.created for p in pods})
    return max(events, key=lambda t: sum(int(p.profile[0]) * p.count for p in alive(pods, t)))


def demand_of(pods: list[TracePod]) -> list[DemandItem]:
    """FREE demand items for `pods`."""
    counts: Counter[str] = Counter()
    for p in pods:
        counts[p.profile] += p.count
    return [DemandItem(p, counts[p], 1, DemandKind.FREE) for p in sorted(counts)]


def empty_h100_fleet(gpu_count: int) -> list[GpuState]:
    """`gpu_count` empty H100-80GB GPUs, 8 per node."""
    model = _model("H100-80GB")
    return [
        GpuState(node=f"h100-{n // 8:04d}", index=n % 8, uuid=None, model=model, layout=Layout())
        for n in range(gpu_count)
    ]


def slice_lower_bound(demand: list[DemandItem], model: GpuModel) -> int:
    """GPUs needed at least: by compute slices, by memory slices, and one per 7g."""
    compute = sum(d.count * model.profile(d.profile).compute_slices for d in demand)
    memory = sum(d.count * model.profile(d.profile).size for d in demand)
    whole = sum(d.count for d in demand if model.profile(d.profile).size == model.memory_slices)
    return max(-(-compute // model.compute_slices), -(-memory // model.memory_slices), whole)


def lp_lower_bound(demand: list[DemandItem], model: GpuModel) -> float:
    """GPUs needed at least: the LP relaxation of covering the demand with maximal layouts.

    Minimise the number of GPUs (fractional counts y_L >= 0 per maximal layout L) such that
    every profile's demand is covered (Gilmore-Gomory's cutting-stock relaxation), solved
    with GLOP independently of the CP-SAT planner.
    """
    from ortools.linear_solver import pywraplp

    from migplan.planner.hardware.enumeration import enumerate_layouts

    wanted = {d.profile: 0 for d in demand}
    for d in demand:
        wanted[d.profile] += d.count
    solver = pywraplp.Solver.CreateSolver("GLOP")
    layouts = enumerate_layouts(model, profiles=list(wanted), maximal=True)
    y = [solver.NumVar(0, solver.infinity(), f"y{n}") for n in range(len(layouts))]
    for profile, count in wanted.items():
        solver.Add(
            sum(v * lay.profile_counts()[profile] for v, lay in zip(y, layouts, strict=True))
            >= count
        )
    solver.Minimize(sum(y))
    if solver.Solve() != pywraplp.Solver.OPTIMAL:
        raise RuntimeError("LP bound: GLOP found no optimum")
    return float(solver.Objective().Value())


# ---- fragmented: a busy fleet where almost every GPU differs -------------------------------

FRAGMENTED_MIXES = {
    "a100-h100": (("A100-40GB", 0.6), ("H100-80GB", 0.4)),
    "three-model": (("A100-40GB", 0.4), ("H100-80GB", 0.3), ("H200-141GB", 0.3)),
}
"""GPU models by share of nodes."""


def _standard_profiles(model: GpuModel) -> list[str]:
    """Profiles without media-engine suffixes: what pods usually ask for."""
    return [p.name for p in model.profiles if "+" not in p.name and "-me" not in p.name]


def _group_into_gangs(
    pending: list[dict[str, object]], *, share: float, seed: int
) -> list[dict[str, object]]:
    """Group `share` of the pending pods of each namespace into gangs of 2-16 pods (in
    place: each member names its gang and asks what the gang's first pod asks); the gangs."""
    rnd = random.Random(seed + 1)  # its own sequence: the pods stay as drawn
    by_namespace: dict[str, list[dict[str, object]]] = {}
    for pod in pending:
        by_namespace.setdefault(str(pod["namespace"]), []).append(pod)
    found: list[dict[str, object]] = []
    for namespace, pods in sorted(by_namespace.items()):
        chosen = rnd.sample(pods, round(share * len(pods)))
        while len(chosen) >= 2:
            size = min(rnd.randint(2, 16), len(chosen))
            members, chosen = chosen[:size], chosen[size:]
            name = f"gang-{len(found)}"
            for member in members:
                member["gang"] = name
                member["requests"] = dict(members[0]["requests"])  # type: ignore[arg-type]
            least = size if rnd.random() < 0.75 else (size + 1) // 2
            found.append({"namespace": namespace, "name": name, "minCount": least})
    return found


def fragmented(
    *,
    nodes: int = 1000,
    gpus_per_node: int = 8,
    mix: str = "a100-h100",
    partitioned: float = 0.85,
    in_use: float = 0.5,
    pods_per_node: int = 12,
    policy: str = "none",
    seed: int = SEED,
    several: float = 0.0,
    gangs: float = 0.0,
) -> tuple[dict[str, object], dict[str, object]]:
    """A busy, fragmented fleet as an inventory file and a plan manifest (both plain data).

    `partitioned` of the GPUs hold a maximal layout drawn from all of their model's standard
    layouts, `in_use` of those instances run a pod; the rest of the GPUs are empty. Every node
    has `pods_per_node` pending single-instance pods over nine profiles (small ones more
    often), and the plan adds one explicit demand row at a higher priority. With 12 pods per
    node the demand exceeds what fits (over-demand); with 3 it does not (under-demand).
    A `several` share of the pods asks for 2 or 3 instances of its profile, which must all be
    on one node (a bundle: multi-instance pods, DRA claims with `count > 1`). A `gangs` share
    of the pods is grouped, per namespace, into PodGroups of 2-16 pods that all ask what
    their first pod asks (minCount all of them, or half for one gang in four).
    """
    from migplan.planner.hardware.enumeration import enumerate_layouts

    rnd = random.Random(seed)
    models = [(_model(key), share) for key, share in FRAGMENTED_MIXES[mix]]
    maximal = {
        m.model: enumerate_layouts(m, profiles=_standard_profiles(m), maximal=True)
        for m, _ in models
    }
    union = sorted({p for m, _ in models for p in _standard_profiles(m)}, key=_profile_order)
    profiles = sorted(rnd.sample(union, min(9, len(union))), key=_profile_order)
    # Smaller profiles are asked for more often, as in shared inference pools.
    weights = [1.0 / int(p.split("g.", 1)[0]) for p in profiles]
    inventory_nodes = []
    pending = []
    bounds = [round(sum(s for _, s in models[: k + 1]) * nodes) for k in range(len(models))]
    for n in range(nodes):
        model = next(m for (m, _), b in zip(models, bounds, strict=True) if n < b)
        gpus = []
        for index in range(gpus_per_node):
            entry: dict[str, object] = {"index": index, "model": model.model}
            if rnd.random() < partitioned:
                layout = rnd.choice(maximal[model.model])
                entry["layout"] = str(layout)
                used = [i for i in layout.instances if rnd.random() < in_use]
                entry["inUse"] = {
                    str(i): f"team-{n % 5}/run-{n}-{index}-{k}" for k, i in enumerate(used)
                }
            gpus.append(entry)
        inventory_nodes.append(
            {
                "name": f"node-{n:04d}",
                "labels": {"migplan.io/pool": "fragmented", "gpu": model.model},
                "gpus": gpus,
            }
        )
        for k, profile in enumerate(rnd.choices(profiles, weights=weights, k=pods_per_node)):
            # Drawn only for bundle scenarios, so the others keep their random sequence.
            count = rnd.choice((2, 3)) if several and rnd.random() < several else 1
            pending.append(
                {
                    "namespace": f"team-{k % 5}",
                    "name": f"wait-{n}-{k}",
                    "requests": {f"nvidia.com/mig-{profile}": count},
                }
            )
    inventory = {
        "apiVersion": "migplan.io/v1alpha1",
        "kind": "Inventory",
        "nodes": inventory_nodes,
        "pendingPods": pending,
    }
    if gangs:
        inventory["gangs"] = _group_into_gangs(pending, share=gangs, seed=seed)
    explicit = profiles[len(profiles) // 2]
    plan = {
        "apiVersion": "migplan.io/v1alpha1",
        "kind": "GPUPartitionPlan",
        "metadata": {"name": f"fragmented-{nodes}"},
        "spec": {
            "nodeSelector": {"matchLabels": {"migplan.io/pool": "fragmented"}},
            "demand": {
                "profiles": [
                    {"resource": f"nvidia.com/mig-{explicit}", "count": nodes, "priority": 3}
                ],
                "fromPendingPods": {"priority": 1},
            },
            "policy": {"disruption": policy},
            "dryRun": True,
        },
    }
    return inventory, plan


def _profile_order(name: str) -> tuple[int, int]:
    compute, _, memory = name.partition("g.")
    return int(compute), int(memory.removesuffix("gb"))


def a_minute_later(
    inventory: dict[str, object], *, share: float = 0.02, seed: int = SEED
) -> dict[str, object]:
    """`inventory` (a `fragmented` one) a minute later, its plan still waiting for the
    window: `share` of the running pods have finished (their instances are free, the
    layouts as they were) and as many new pods are pending, each asking what a pending pod
    outside the gangs asks. A copy; `inventory` is left as it is."""
    rnd = random.Random(seed + 2)
    nodes = []
    finished = 0
    for node in inventory["nodes"]:  # type: ignore[attr-defined]
        gpus = []
        for gpu in node["gpus"]:
            in_use = {i: pod for i, pod in gpu.get("inUse", {}).items() if rnd.random() >= share}
            finished += len(gpu.get("inUse", {})) - len(in_use)
            gpus.append({**gpu, **({"inUse": in_use} if "inUse" in gpu else {})})
        nodes.append({**node, "gpus": gpus})
    pending = list(inventory["pendingPods"])  # type: ignore[call-overload]
    alone = [pod for pod in pending if "gang" not in pod]
    arrived = [{**rnd.choice(alone), "name": f"arrived-{k}"} for k in range(finished) if alone]
    return {**inventory, "nodes": nodes, "pendingPods": [*pending, *arrived]}
