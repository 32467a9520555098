"""Gangs met all or nothing: on small random clusters the plan's weighted demand met equals
the best that any combination of layouts admits, found by brute force over every pod.

The brute force is independent of the planner: it knows pods (not demand items), places each
on an instance of one of its profiles or leaves it out, and counts a gang only when it is
met as a whole (a Kubernetes PodGroup: at least minCount of its pods; a Kueue Workload: every
pod set at its minCount or more). Pods scheduled one by one count each. The weight of a pod
is its priority times the compute slices of its smallest profile (DESIGN.md's objective).
"""

from __future__ import annotations

import functools
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
from migplan.planner.api.spec import GPUPartitionPlan
from migplan.planner.hardware.catalog import default_catalog
from migplan.planner.hardware.enumeration import enumerate_layouts
from migplan.planner.pipeline import plan_fleet

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


def brute_force(gpu_models: list[str], pods: list[dict], profiles: tuple[str, ...]) -> int:
    """The most weighted demand any combination of layouts meets, pods placed one by one
    (single-instance pods go wherever an instance is free, so the fleet's supply is what
    counts)."""
    per_gpu = [sorted(_supplies(m, profiles)) for m in gpu_models]
    fleets = {tuple(map(sum, zip(*combo, strict=True))) for combo in product(*per_gpu)}
    units = sorted({p["unit"] for p in pods})
    best = 0
    for fleet in fleets:
        best = max(best, _best_placement(fleet, tuple(units), pods, profiles))
    return best


def _best_placement(
    fleet: tuple[int, ...], units: tuple[str, ...], pods: list[dict], profiles: tuple[str, ...]
) -> int:
    @functools.cache
    def walk(i: int, left: tuple[int, ...], placed: tuple[int, ...]) -> int:
        if i == len(pods):
            return 0 if _gangs_hold(placed, units, pods) else -(10**9)
        pod = pods[i]
        best = walk(i + 1, left, placed)  # left out
        u = units.index(pod["unit"])
        bumped = (*placed[:u], placed[u] + 1, *placed[u + 1 :])
        for profile in pod["profiles"]:
            k = profiles.index(profile)
            if left[k] > 0:
                after = (*left[:k], left[k] - 1, *left[k + 1 :])
                best = max(best, pod["weight"] + walk(i + 1, after, bumped))
        return best

    return walk(0, fleet, tuple(0 for _ in units))


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


def _request(rng: random.Random) -> tuple[dict, tuple[ClaimRequest, ...], tuple[str, ...]]:
    """One pod's ask: a MIG resource, or a DRA claim any of two profiles serves."""
    if rng.random() < 0.25:
        pair = tuple(sorted(rng.sample(PROFILES[:4], 2), key=_slices))
        return {}, (ClaimRequest(claim="c", profiles=pair),), pair
    profile = rng.choice(PROFILES)
    return {f"nvidia.com/mig-{profile}": 1}, (), (profile,)


def random_case(seed: int) -> tuple[Inventory, list[dict]]:
    """2-3 empty GPUs on 1-3 nodes; pending pods in PodGroups, Kueue Workloads (some with
    minCount) and alone; with the brute force's view of every pod."""
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
            asks = [_request(rng) for _ in range(rng.randint(1, 2))]
            for p in range(size):
                requests, claims, profiles = asks[p % len(asks)]
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
                    _pod(profiles, 1, f"pg{g}", f"pg{g}:{profiles}", gang_least=least, unit_least=0)
                )
        elif shape < 0.75:  # a Kueue Workload: one or two pod sets, some with minCount
            sets = []
            for s in range(rng.randint(1, 2)):
                requests, claims, profiles = _request(rng)
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
                profiles = tuple([_profile_of(r) for r in s.requests] or list(s.claims[0].profiles))
                least = s.count if s.min_count is None else s.min_count
                for _ in range(s.count):
                    pods.append(
                        _pod(
                            profiles,
                            10,
                            f"wl{g}",
                            f"wl{g}/{s.name}",
                            gang_least=total,
                            unit_least=least,
                        )
                    )
        else:  # pods alone
            for p in range(rng.randint(1, 2)):
                requests, claims, profiles = _request(rng)
                pending.append(
                    PendingPod(
                        namespace="ml", name=f"solo{g}-{p}", requests=requests, claims=claims
                    )
                )
                pods.append(_pod(profiles, 1, "", f"solo{g}-{p}", gang_least=0, unit_least=0))
    inventory = Inventory(
        nodes=tuple(nodes),
        pending_pods=tuple(pending),
        gangs=tuple(gangs),
        workloads=tuple(workloads),
    )
    return inventory, pods


def _profile_of(resource: str) -> str:
    return resource.removeprefix("nvidia.com/mig-")


def _pod(profiles, priority, gang, unit, *, gang_least, unit_least) -> dict:
    return {
        "profiles": profiles,
        "weight": priority * min(_slices(p) for p in profiles),
        "gang": gang,
        "unit": unit,
        "gang_least": gang_least,
        "unit_least": unit_least,
    }


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


@pytest.mark.parametrize("seed", range(CASES))
def test_the_plan_meets_as_much_as_the_best_geometry_admits(seed: int) -> None:
    inventory, pods = random_case(seed)
    outcome = plan_fleet(MANIFEST, inventory, default_catalog())
    plan = outcome.plan
    models = [g.model for n in inventory.nodes for g in n.gpus]
    profiles = tuple(sorted({p for pod in pods for p in pod["profiles"]}, key=_slices))
    best = brute_force(models, pods, profiles)
    assert plan.solver.objective == best, (seed, [g.after for g in plan.gpus], plan.gangs)
    assert plan.solver.status == "OPTIMAL"
    for gang in plan.gangs:
        items = [r for r in plan.demand if r.gang == gang.name]
        if not gang.admitted:
            assert all(r.met == 0 for r in items)
            assert gang.reason
            assert "all or none" in gang.reason


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
