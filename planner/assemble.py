"""Build a Plan from target layouts: operations, evictions, demand met, summary.

Shared by the CP-SAT planner and the baseline heuristics, so every plan is reported (and
validated) the same way.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

import orjson
from pydantic import BaseModel

from migplan.planner.allocation import (
    EXACT_NODES,
    Allocation,
    Available,
    allocate,
    take_scattered,
)
from migplan.planner.api.inventory import GpuState, Inventory, NodeInfo
from migplan.planner.demand import (
    DemandItem,
    DemandKind,
    gang_met,
    gangs_of,
    is_workload_gang,
)
from migplan.planner.diff import operations, removed_instances
from migplan.planner.fleet import Counted, Fleet, fleet_of
from migplan.planner.hardware.layout import Instance, Layout
from migplan.planner.plan import (
    DemandResult,
    GangResult,
    GpuPlan,
    Operation,
    Plan,
    PlanSummary,
    PodPart,
    SolverReport,
)
from migplan.planner.schema import constructed

GpuKey = tuple[str, int]


def gpu_key(gpu: GpuState) -> GpuKey:
    """(node, index): how targets are keyed."""
    return (gpu.node, gpu.index)


@dataclass(frozen=True)
class Supply:
    """Per profile: instances in the targets, in use (kept), and evicted pods to rehost; per
    node, the instances nobody keeps."""

    total: Counter[str]
    kept_in_use: Counter[str]
    evicted: Counter[str]
    unkept: dict[str, Counter[str]]

    def bundle_nodes(self) -> dict[str, Counter[str]]:
        """Per node, the free instances bundles may take: those nobody keeps where the
        allocation is exact (evicted pods go wherever single instances are left, which the
        fleet-wide count settles), else `node_free`."""
        if len(self.unkept) <= EXACT_NODES:
            return {name: Counter(free) for name, free in self.unkept.items()}
        return self.node_free()

    def node_free(self) -> dict[str, Counter[str]]:
        """Per node: free instances for pending pods, once evicted pods are rehosted (on the
        nodes with the least free first, as `allocation` places single instances)."""
        nodes = {name: Counter(free) for name, free in self.unkept.items()}
        for profile, count in sorted(self.evicted.items()):
            take_scattered(nodes, profile, count)
        return nodes

    def free_for_pending(self, profile: str) -> int:
        """Free instances left for pending pods once evicted pods are rehosted."""
        return max(self.free_unclamped(profile), 0)

    def free_unclamped(self, profile: str) -> int:
        """Instances of `profile` less those kept in use and those evicted pods need: negative
        where the evicted pods cannot all be rehosted (what a mix of several nodes' supplies
        adds up before clamping)."""
        return self.total[profile] - self.kept_in_use[profile] - self.evicted[profile]

    def available(self) -> Available:
        """What each kind of demand may take: explicit totals all of it, pending pods the
        free instances."""
        return {
            DemandKind.TOTAL: self.total,
            DemandKind.FREE: {p: self.free_for_pending(p) for p in self.total},
        }


@lru_cache(maxsize=65536)
def gpu_change(
    before: Layout, after: Layout, mig_enabled: bool, rebuild: bool
) -> tuple[tuple[Operation, ...], frozenset[Instance]]:
    """One GPU's operations (immutable, so plans may share them) and destroyed instances;
    GPUs repeat (8,216 empty GPUs of the trace snapshot take a few dozen layouts), so this
    is cached for assembly and scoring alike."""
    steps = operations(before, after, mig_enabled=mig_enabled, rebuild=rebuild)
    return tuple(steps), frozenset(removed_instances(before, after, rebuild=rebuild))


def supply_of(
    gpus: Sequence[GpuState],
    targets: Mapping[GpuKey, Layout],
    *,
    rebuild: bool = False,
    per_node: bool = False,
    counted: Counted | None = None,
) -> Supply:
    """What the target layouts supply, given which in-use instances they keep; with
    `per_node`, also each node's instances nobody keeps (what bundles need). Counted per
    situation and target (`fleet.py`): pass a `Fleet` where many plans of one fleet are
    measured, and `counted` where the caller has them counted already."""
    fleet = fleet_of(gpus)
    afters, cases = counted or fleet.counted(targets)
    total: Counter[str] = Counter()
    kept: Counter[str] = Counter()
    evicted: Counter[str] = Counter()
    layouts: Counter[Layout] = Counter()
    for (number, after), gpu_count in cases.items():
        layouts[after] += gpu_count
        case = fleet.situations[number]
        if not case.pins:
            continue
        removed = gpu_change(case.layout, after, case.mig_enabled, rebuild)[1]
        for instance in case.pins:
            (evicted if instance in removed else kept)[instance.profile] += gpu_count
    for layout, gpu_count in layouts.items():
        for profile, count in layout.profile_counts().items():
            total[profile] += count * gpu_count
    unkept = _unkept(fleet, afters, rebuild=rebuild) if per_node else {}
    return Supply(total, kept, evicted, unkept)


def _unkept(fleet: Fleet, afters: Sequence[Layout], *, rebuild: bool) -> dict[str, Counter[str]]:
    """Per node, the instances in the targets `afters` that no kept pod uses."""
    unkept: dict[str, Counter[str]] = {}
    for (name, number, after), gpu_count in fleet.node_cases(afters).items():
        case = fleet.situations[number]
        node = unkept.setdefault(name, Counter())
        for instance in after.instances:
            node[instance.profile] += gpu_count
        if case.pins:
            removed = gpu_change(case.layout, after, case.mig_enabled, rebuild)[1]
            for instance in case.pins:
                if instance not in removed:
                    node[instance.profile] -= gpu_count
    return unkept


def demand_supply(
    demand: Sequence[DemandItem],
    gpus: Sequence[GpuState],
    targets: Mapping[GpuKey, Layout],
    *,
    rebuild: bool = False,
    counted: Counted | None = None,
) -> tuple[Supply, Allocation]:
    """What the targets supply and how `allocation.allocate` gives it to `demand`, per node
    where bundles need it (`counted`: as `supply_of`)."""
    bundles = any(item.per_pod for item in demand)
    supply = supply_of(gpus, targets, rebuild=rebuild, per_node=bundles, counted=counted)
    nodes = supply.bundle_nodes() if bundles else None
    return supply, allocate(demand, supply.available(), nodes=nodes)


class Explains(Protocol):
    """Reasons for unmet demand (the solver's `Explainer`)."""

    def __call__(self, item: DemandItem, met: int) -> str | None:
        """Why `item` got only `met` of its count."""

    def gang(self, items: Sequence[DemandItem]) -> str:
        """Why the gang of `items` is not met."""


def input_hash(
    *parts: BaseModel | Sequence[BaseModel] | None,
    nodes: Callable[[NodeInfo], orjson.Fragment] | None = None,
) -> str:
    """A stable digest of the planner's inputs (sha256 of their canonical JSON): the same
    inputs give the same digest however their mappings are ordered (an inventory written as
    YAML with sorted keys, or as JSON in any order). orjson writes the sorted JSON in 0.04 s
    where `json.dumps` took 0.25 s on 40,000 GPUs, the same bytes for ASCII text (other text
    it writes as UTF-8, not escaped). pydantic's own serialiser would be faster still, but
    writes mappings in their own order.

    `nodes`: each node of an Inventory part as canonical JSON, written beforehand
    (`ResolvedNodes.canonical`, which keeps it while the node is unchanged): the same digest,
    without dumping and writing every node again (the operator's passes at 40,000 GPUs:
    0.2 s to 0.02 s)."""

    def plain(part: BaseModel | Sequence[BaseModel] | None) -> object:
        if part is None:
            return None
        if nodes is not None and isinstance(part, Inventory):
            document = part.model_dump(mode="json", by_alias=True, exclude={"nodes"})
            document["nodes"] = [nodes(node) for node in part.nodes]
            return document
        if isinstance(part, BaseModel):
            return part.model_dump(mode="json", by_alias=True)
        return [p.model_dump(mode="json", by_alias=True) for p in part]

    document = [plain(p) for p in parts]
    try:
        text = orjson.dumps(document, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:  # an integer beyond 64 bits, which orjson refuses
        if nodes is not None:
            return input_hash(*parts)
        text = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(text).hexdigest()


def assemble_plan(
    *,
    gpus: Sequence[GpuState],
    targets: Mapping[GpuKey, Layout],
    demand: Sequence[DemandItem],
    solver: SolverReport,
    digest: str,
    rebuild: bool = False,
    explain: Explains | None = None,
) -> Plan:
    """The Plan that takes every GPU of `gpus` to its layout in `targets`.

    `explain(item, met)` gives the reason for an item that is not fully met.
    """
    gpu_plans = []
    # A fleet repeats a few hundred layouts over thousands of GPUs: each written out once,
    # and the in-use instances of each situation ordered and written once.
    text: dict[Layout, str] = {}
    fleet = fleet_of(gpus)
    ordered: dict[int, list[tuple[Instance, str]]] = {}
    for gpu, number in zip(fleet, fleet.numbers, strict=True):
        after = targets[gpu_key(gpu)]
        pins = ordered.get(number)
        if pins is None:
            pins = ordered[number] = [(i, str(i)) for i in sorted(gpu.pins)]
        steps, removed = gpu_change(gpu.layout, after, gpu.mig_enabled, rebuild)
        evict = gpu.holders(removed) if removed else []
        if gpu.whole_gpu_pod and after:
            evict.append(gpu.whole_gpu_pod)
        # Built from typed data the planner made itself: construct without re-validation
        # (8,000 GPUs: 0.7 s -> 0.1 s); validate() checks the plan afterwards.
        gpu_plans.append(
            constructed(
                GpuPlan,
                node=gpu.node,
                gpu=gpu.index,
                uuid=gpu.uuid,
                model=gpu.model.model,
                before=text.get(gpu.layout) or text.setdefault(gpu.layout, str(gpu.layout)),
                after=text.get(after) or text.setdefault(after, str(after)),
                in_use={name: gpu.pins[i] for i, name in pins},
                operations=steps,
                evict=tuple(evict),
            )
        )
    _, allocation = demand_supply(demand, fleet, targets, rebuild=rebuild)
    gangs = gang_results(demand, allocation.met, explain=explain)
    unmet_gang = {g.name: g.reason for g in gangs if not g.admitted}
    results = tuple(
        DemandResult(
            resource=item.resource,
            profile=item.profile,
            alternatives=item.alternatives,
            kind=item.kind.value,
            priority=item.priority,
            requested=item.count,
            met=got,
            served=served if item.alternatives or item.per_pod else None,
            per_pod=tuple(PodPart(profiles=p.profiles, count=p.count) for p in item.per_pod),
            reason=(
                unmet_gang[item.gang]
                if item.gang in unmet_gang
                else explain(item, got)
                if explain and got < item.count
                else None
            ),
            pods=item.pods,
            gang=item.gang or None,
            min_count=item.minimum if is_workload_gang(item.gang) else None,
        )
        for item, got, served in zip(demand, allocation.met, allocation.served, strict=True)
    )
    changed = [g for g in gpu_plans if g.changed]
    summary = PlanSummary(
        gpus=len(gpu_plans),
        gpus_changed=len(changed),
        nodes_touched=len({g.node for g in changed}),
        evictions=len({pod for g in gpu_plans for pod in g.evict}),
        requested=sum(r.requested * r.per_unit for r in results),
        met=sum(r.met * r.per_unit for r in results),
    )
    return Plan(
        input_hash=digest,
        gpus=tuple(gpu_plans),
        demand=results,
        gangs=gangs,
        summary=summary,
        solver=solver,
    )


def gang_results(
    demand: Sequence[DemandItem], met: Sequence[int], *, explain: Explains | None = None
) -> tuple[GangResult, ...]:
    """Per gang in `demand`: its pods requested and met, whether it is met, and (where
    `explain` can say) why not."""
    results = []
    for gang, members in gangs_of(demand).items():
        items = [demand[n] for n in members]
        admitted = gang_met(demand, met, members)
        shape = " + ".join(
            f"{i.count} x ({i.shape})" if i.per_pod else f"{i.count} x {' or '.join(i.profiles)}"
            for i in items
        )
        why = None
        if not admitted:
            why = explain.gang(items) if explain else None
            why = f"gang {gang.split(' ', 1)[1]}: {shape}, all or none — not met" + (
                f": {why}" if why else ""
            )
        results.append(
            GangResult(
                name=gang,
                shape=shape,
                min_count=items[0].gang_minimum,
                requested=sum(i.count for i in items),
                met=sum(met[n] for n in members),
                admitted=admitted,
                reason=why,
            )
        )
    return tuple(results)
