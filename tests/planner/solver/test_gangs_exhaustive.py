"""Gangs met all or nothing: on small random clusters the plan's weighted demand met equals
the best that any combination of layouts admits, found by brute force over every pod.

The brute force is independent of the planner: it knows pods (not demand items), places each
on an instance of one of its profiles or leaves it out, and counts a gang only when it is
met as a whole (a Kubernetes PodGroup: at least minCount of its pods; a Kueue Workload: every
pod set at its minCount or more). Pods scheduled one by one count each. The weight of a pod
is its priority times the compute slices of its smallest profile (DESIGN.md's objective).
"""

from __future__ import annotations

import random
from collections import Counter
from itertools import product

import pytest

from migplan.planner.api.inventory import (
    ClaimRequest,
    Gang,
    GpuInfo,
    Inventory,
    NodeInfo,
    PendingPod,
    PendingWorkload,
    WorkloadPodSet,
)
from migplan.planner.api.offers import Offer
from migplan.planner.api.spec import GPUPartitionPlan, PolicySpec
from migplan.planner.demand import build_demand
from migplan.planner.hardware.catalog import default_catalog
from migplan.planner.hardware.enumeration import enumerate_layouts
from migplan.planner.pipeline import plan_fleet
from migplan.planner.solver.scale_out import plan_scale_out
from migplan.planner.validate import validate_scale_out

PROFILES = ("1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")
CASES = 40


def _slices(profile: str) -> int:
    return int(profile.split("g.", 1)[0])


# ---- the brute force -----------------------------------------------------------------------


def _supplies(model_name: str, profiles: tuple[str, ...]) -> set[tuple[int, ...]]:
    """Instances of each of `profiles` one empty GPU can hold, per layout (the undominated)."""
    model = default_catalog().model(model_name)
    vectors = {
        tuple(layout.profile_counts()[p] for p in profiles)
        for layout in enumerate_layouts(model, profiles=list(profiles))
    }
    return {
        v
        for v in vectors
        if not any(w != v and all(a >= b for a, b in zip(w, v, strict=True)) for w in vectors)
    }


def brute_force(nodes: list[list[str]], pods: list[dict], profiles: tuple[str, ...]) -> int:
    """The most weighted demand any combination of layouts meets on `nodes` (GPU models per
    node), each pod placed whole on one node or left out, gangs all or nothing."""
    if all(len(pod["parts"]) == 1 and pod["parts"][0][1] == 1 for pod in pods):
        nodes = [[m for models in nodes for m in models]]  # any node serves a single instance
    capacities = []
    for models in nodes:
        sums = {
            tuple(map(sum, zip(*combo, strict=True)))
            for combo in product(*(sorted(_supplies(m, profiles)) for m in models))
        }
        capacities.append(sorted(_undominated(sums)))
    units = tuple(sorted({p["unit"] for p in pods}))
    search = _Search(pods, units, profiles, capacities)
    search.walk(0, tuple(tuple(0 for _ in profiles) for _ in nodes), tuple(0 for _ in units), 0)
    return search.best


class _Search:
    """Depth-first over pods: each left out, or put on a node taking instances for every
    part, as long as some layout of the node's GPUs holds all the node's pods took; cut where
    even every remaining pod would not beat the best found."""

    def __init__(
        self,
        pods: list[dict],
        units: tuple[str, ...],
        profiles: tuple[str, ...],
        capacities: list[list[tuple[int, ...]]],
    ):
        self.pods, self.units, self.profiles = pods, units, profiles
        self.capacities = capacities
        self.rest = [sum(p["weight"] for p in pods[i:]) for i in range(len(pods) + 1)]
        self.best = 0
        self.seen: set[tuple] = set()

    def fits(self, n: int, used: tuple[int, ...]) -> bool:
        return any(
            all(c >= u for c, u in zip(cap, used, strict=True)) for cap in self.capacities[n]
        )

    def walk(self, i: int, used: tuple, placed: tuple[int, ...], value: int) -> None:
        if value + self.rest[i] <= self.best or (i, used, placed, value) in self.seen:
            return
        self.seen.add((i, used, placed, value))
        if i == len(self.pods):
            if _gangs_hold(placed, self.units, self.pods):
                self.best = value
            return
        pod = self.pods[i]
        u = self.units.index(pod["unit"])
        bumped = (*placed[:u], placed[u] + 1, *placed[u + 1 :])
        for n, there in enumerate(used):
            for after in set(_takes(there, pod["parts"], self.profiles)):
                if self.fits(n, after):
                    moved = (*used[:n], after, *used[n + 1 :])
                    self.walk(i + 1, moved, bumped, value + pod["weight"])
        self.walk(i + 1, used, placed, value)  # left out


def _undominated(vectors: set[tuple[int, ...]]) -> set[tuple[int, ...]]:
    return {
        v
        for v in vectors
        if not any(w != v and all(a >= b for a, b in zip(w, v, strict=True)) for w in vectors)
    }


def _takes(used: tuple[int, ...], parts, profiles: tuple[str, ...]):
    """Every way one pod's parts add instances to `used`: the node's use after each."""
    if not parts:
        yield used
        return
    (options, count), rest = parts[0], parts[1:]
    for split in _splits(count, len(options)):
        after = list(used)
        for profile, n in zip(options, split, strict=True):
            after[profiles.index(profile)] += n
        yield from _takes(tuple(after), rest, profiles)


def _splits(count: int, ways: int):
    if ways == 1:
        yield (count,)
        return
    for first in range(count + 1):
        for rest in _splits(count - first, ways - 1):
            yield (first, *rest)


def _gangs_hold(placed: tuple[int, ...], units: tuple[str, ...], pods: list[dict]) -> bool:
    """Every gang has nothing placed, or all it needs: its total, each unit its least."""
    count = dict(zip(units, placed, strict=True))
    gangs: dict[str, list[str]] = {}
    for pod in pods:
        if pod["gang"]:
            gangs.setdefault(pod["gang"], [])
            if pod["unit"] not in gangs[pod["gang"]]:
                gangs[pod["gang"]].append(pod["unit"])
    for gang, members in gangs.items():
        got = sum(count[u] for u in members)
        if not got:
            continue
        first = next(p for p in pods if p["gang"] == gang)
        if got < first["gang_least"]:
            return False
        if any(count[u] < next(p for p in pods if p["unit"] == u)["unit_least"] for u in members):
            return False
    return True


# ---- random small clusters ---------------------------------------------------------------


Parts = tuple[tuple[tuple[str, ...], int], ...]


def _request(rng: random.Random, *, bundles: bool) -> tuple[dict, tuple[ClaimRequest, ...], Parts]:
    """One pod's ask: a MIG resource, or a DRA claim any of two profiles serves; with
    `bundles`, sometimes two instances (of one profile, of either of two, or one each of
    two profiles), which must all be on the pod's node."""
    roll = rng.random()
    pair = tuple(sorted(rng.sample(PROFILES[:3], 2), key=_slices))
    if bundles and roll < 0.15:
        return {f"nvidia.com/mig-{pair[0]}": 2}, (), (((pair[0],), 2),)
    if bundles and roll < 0.25:
        return {}, (ClaimRequest(claim="c", count=2, profiles=pair),), ((pair, 2),)
    if bundles and roll < 0.35:
        requests = {f"nvidia.com/mig-{p}": 1 for p in pair}
        return requests, (), tuple(((p,), 1) for p in pair)
    if roll < 0.55:
        return {}, (ClaimRequest(claim="c", profiles=pair),), ((pair, 1),)
    profile = rng.choice(PROFILES)
    return {f"nvidia.com/mig-{profile}": 1}, (), (((profile,), 1),)


def random_case(seed: int, *, bundles: bool = False) -> tuple[Inventory, list[dict]]:
    """1-3 empty GPUs on 1-3 nodes; pending pods in PodGroups, Kueue Workloads (some with
    minCount) and alone (with `bundles`, some needing two instances on their node); with
    the brute force's view of every pod."""
    rng = random.Random(seed)
    gpu_count = rng.choice([1, 2, 2, 3])
    node_count = rng.randint(1, gpu_count)
    models = [rng.choice(["H100-80GB", "A100-80GB"]) for _ in range(gpu_count)]
    nodes = [
        NodeInfo(
            name=f"n{n}",
            gpus=tuple(
                GpuInfo(index=i, model=m)
                for i, m in enumerate(models[g] for g in range(gpu_count) if g % node_count == n)
            ),
        )
        for n in range(node_count)
    ]
    pods: list[dict] = []
    pending: list[PendingPod] = []
    gangs: list[Gang] = []
    workloads: list[PendingWorkload] = []
    for g in range(rng.randint(2, 5)):
        shape = rng.random()
        if shape < 0.4:  # a PodGroup, one or two shapes, minCount up to its size
            size = rng.randint(2, 4)
            least = rng.randint(1, size)
            gangs.append(Gang(namespace="ml", name=f"pg{g}", min_count=least))
            asks = [_request(rng, bundles=bundles) for _ in range(rng.randint(1, 2))]
            for p in range(size):
                requests, claims, parts = asks[p % len(asks)]
                pending.append(
                    PendingPod(
                        namespace="ml",
                        name=f"pg{g}-{p}",
                        requests=requests,
                        claims=claims,
                        gang=f"pg{g}",
                    )
                )
                pods.append(
                    _pod(parts, 1, f"pg{g}", f"pg{g}:{parts}", gang_least=least, unit_least=0)
                )
        elif shape < 0.75:  # a Kueue Workload: one or two pod sets, some with minCount
            sets = []
            shapes = {}
            for s in range(rng.randint(1, 2)):
                requests, claims, parts = _request(rng, bundles=bundles)
                shapes[f"s{s}"] = parts
                count = rng.randint(1, 3)
                least = rng.choice([None, rng.randint(1, count)])
                sets.append(
                    WorkloadPodSet(
                        name=f"s{s}",
                        count=count,
                        min_count=least,
                        requests=requests,
                        claims=claims,
                    )
                )
            workloads.append(
                PendingWorkload(namespace="ml", name=f"wl{g}", check_plan="p", pod_sets=tuple(sets))
            )
            total = sum(s.count if s.min_count is None else s.min_count for s in sets)
            for s in sets:
                least = s.count if s.min_count is None else s.min_count
                for _ in range(s.count):
                    pods.append(
                        _pod(
                            shapes[s.name],
                            10,
                            f"wl{g}",
                            f"wl{g}/{s.name}",
                            gang_least=total,
                            unit_least=least,
                        )
                    )
        else:  # pods alone
            for p in range(rng.randint(1, 2)):
                requests, claims, parts = _request(rng, bundles=bundles)
                pending.append(
                    PendingPod(
                        namespace="ml", name=f"solo{g}-{p}", requests=requests, claims=claims
                    )
                )
                pods.append(_pod(parts, 1, "", f"solo{g}-{p}", gang_least=0, unit_least=0))
    inventory = Inventory(
        nodes=tuple(nodes),
        pending_pods=tuple(pending),
        gangs=tuple(gangs),
        workloads=tuple(workloads),
    )
    return inventory, pods


def _pod(parts: Parts, priority, gang, unit, *, gang_least, unit_least) -> dict:
    return {
        "parts": parts,
        "weight": priority * sum(n * min(_slices(p) for p in options) for options, n in parts),
        "priority": priority,
        "gang": gang,
        "unit": unit,
        "gang_least": gang_least,
        "unit_least": unit_least,
    }


def bundle_case(seed: int) -> tuple[Inventory, list[dict]]:
    """2-3 nodes of 1-2 empty GPUs and 5-9 pending pods, no gangs: plain, either/or, bundle
    and either/or-bundle requests (the issue's second family)."""
    rng = random.Random(seed)
    nodes = tuple(
        NodeInfo(
            name=f"n{n}",
            gpus=tuple(
                GpuInfo(index=i, model=rng.choice(["H100-80GB", "A100-80GB"]))
                for i in range(rng.randint(1, 2))
            ),
        )
        for n in range(rng.randint(2, 3))
    )
    pending, pods = [], []
    for p in range(rng.randint(5, 9)):
        requests, claims, parts = _request(rng, bundles=rng.random() < 0.8)
        pending.append(PendingPod(namespace="ml", name=f"p{p}", requests=requests, claims=claims))
        pods.append(_pod(parts, 1, "", f"p{p}", gang_least=0, unit_least=0))
    return Inventory(nodes=nodes, pending_pods=tuple(pending)), pods


MANIFEST = GPUPartitionPlan.model_validate(
    {
        "apiVersion": "migplan.io/v1alpha1",
        "kind": "GPUPartitionPlan",
        "metadata": {"name": "p"},
        "spec": {
            "dryRun": True,
            "demand": {"fromPendingPods": {"priority": 1}, "fromKueue": {"priority": 10}},
            "policy": {"disruption": "none"},
            "solver": {"timeLimitSeconds": 20, "workers": 1},
        },
    }
)


@pytest.mark.parametrize("bundles", [False, True], ids=["single", "bundles"])
@pytest.mark.parametrize("seed", range(CASES))
def test_the_plan_meets_as_much_as_the_best_geometry_admits(seed: int, bundles: bool) -> None:
    inventory, pods = random_case(seed, bundles=bundles)
    plan = plan_fleet(MANIFEST, inventory, default_catalog()).plan
    nodes = [[g.model for g in n.gpus] for n in inventory.nodes]
    profiles = tuple(
        sorted({p for pod in pods for options, _ in pod["parts"] for p in options}, key=_slices)
    )
    best = brute_force(nodes, pods, profiles)
    assert plan.solver.objective == best, (seed, [g.after for g in plan.gpus], plan.gangs)
    assert plan.solver.status == "OPTIMAL"
    for gang in plan.gangs:
        items = [r for r in plan.demand if r.gang == gang.name]
        if not gang.admitted:
            assert all(r.met == 0 for r in items)
            assert gang.reason
            assert "all or none" in gang.reason


@pytest.mark.parametrize("seed", range(CASES))
def test_pods_needing_several_instances_get_them_on_one_node_as_the_best_geometry(
    seed: int,
) -> None:
    inventory, pods = bundle_case(seed)
    plan = plan_fleet(MANIFEST, inventory, default_catalog()).plan
    nodes = [[g.model for g in n.gpus] for n in inventory.nodes]
    profiles = tuple(
        sorted({p for pod in pods for options, _ in pod["parts"] for p in options}, key=_slices)
    )
    assert plan.solver.objective == brute_force(nodes, pods, profiles), (
        seed,
        [(g.node, g.after) for g in plan.gpus],
    )
    assert plan.solver.status == "OPTIMAL"


def test_the_issue_example_admits_the_two_workloads_that_fit_whole() -> None:
    """One empty H100; Workloads of 3 x 3g.40gb, 2 x 2g.20gb and 1 x 1g.10gb: only two
    3g.40gb fit, so the big one cannot run and the other two are met."""
    sets = {"a-big": ("3g.40gb", 3), "b-pair": ("2g.20gb", 2), "c-one": ("1g.10gb", 1)}
    inventory = Inventory(
        nodes=(NodeInfo(name="n", gpus=(GpuInfo(index=0, model="H100-80GB"),)),),
        workloads=tuple(
            PendingWorkload(
                namespace="ml",
                name=name,
                check_plan="p",
                pod_sets=(
                    WorkloadPodSet(name="main", count=n, requests={f"nvidia.com/mig-{profile}": 1}),
                ),
            )
            for name, (profile, n) in sets.items()
        ),
    )
    plan = plan_fleet(MANIFEST, inventory, default_catalog()).plan
    met = {g.name: (g.admitted, g.met) for g in plan.gangs}
    assert met == {
        "Workload ml/a-big": (False, 0),
        "Workload ml/b-pair": (True, 2),
        "Workload ml/c-one": (True, 1),
    }
    (big,) = [g for g in plan.gangs if not g.admitted]
    assert big.reason == (
        "gang ml/a-big: 3 x 3g.40gb, all or none — not met: at most 2 of its pods fit on the "
        "covered GPUs, 3 are needed"
    )
    assert "3g.40gb" not in plan.gpus[0].after
    assert Counter(plan.gpus[0].after.replace("+", " ").split()).total() == 3


# ---- scale-out: the cheapest new nodes, by brute force over how many of each offer ---------

SCALE_OFFERS = (
    Offer("h1", default_catalog().model("H100-80GB"), gpus=1, cost=1, max_nodes=2),
    Offer("a2", default_catalog().model("A100-80GB"), gpus=2, cost=3, max_nodes=1),
)


@pytest.mark.parametrize("seed", range(CASES // 2))
def test_scale_out_asks_for_the_cheapest_nodes_that_meet_the_most(seed: int) -> None:
    """Every pending pod left for new nodes (none covered): the weighted demand the new nodes
    meet is the most any number of nodes within the offers and budget admits, gangs all or
    none and bundles on one node, and their cost the least that meets it."""
    inventory, pods = random_case(seed, bundles=True)
    demand = build_demand(MANIFEST.spec.demand, inventory, plan="p")
    left = list(enumerate(demand))
    budget = (None, 2)[seed % 2]
    scale = plan_scale_out(SCALE_OFFERS, left, PolicySpec(), budget=budget, time_limit=20)
    validate_scale_out(scale, left, SCALE_OFFERS, budget=budget)
    profiles = tuple(
        sorted({p for pod in pods for options, _ in pod["parts"] for p in options}, key=_slices)
    )
    best, cheapest = 0, 0
    for small, large in product(range(3), range(2)):
        if budget is not None and small + large > budget:
            continue
        nodes = [["H100-80GB"]] * small + [["A100-80GB", "A100-80GB"]] * large
        value = brute_force(nodes, pods, profiles) if nodes else 0
        cost = small + 3 * large
        if value > best or (value == best and cost < cheapest):
            best, cheapest = value, cost
    assert (scale.weighted_met, scale.cost) == (best, cheapest), (seed, scale.nodes)
    assert scale.status == "OPTIMAL"
