"""Demand: how many instances of which profile the plan should provide, and how much it matters.

Two kinds, kept apart because they count differently:
- explicit counts from the plan (`demand.profiles`) are totals: the selected GPUs should hold
  that many instances of the profile, in use or free, so re-planning later is stable;
- pending pods want free instances, on top of whatever is in use.

A pending pod that needs more than one instance (`nvidia.com/mig-1g.10gb: 2`, a claim asking
for two devices, two claims) needs them all on one node: its item is a bundle, counted in
pods, each pod's parts listed in `per_pod`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from migplan.planner.api.inventory import Gang, Inventory, PendingPod, WorkloadPodSet
from migplan.planner.api.spec import DemandSpec
from migplan.planner.hardware.resources import is_mig_resource, part_text, profile_of, resource_name


class DemandKind(StrEnum):
    """How a demand item counts supply."""

    TOTAL = "total"
    """Instances of the profile on the covered GPUs, in use or free."""
    FREE = "free"
    """Free instances of the profile (for pending pods)."""


@dataclass(frozen=True, slots=True, order=True)
class Part:
    """`count` instances, each of any of `profiles`: one piece of what a bundle pod needs."""

    profiles: tuple[str, ...]
    count: int

    @property
    def text(self) -> str:
        """`2 x 1g.10gb`, `1 x (1g.10gb or 2g.20gb)`."""
        return part_text(self.profiles, self.count)


@dataclass(frozen=True, slots=True)
class DemandItem:
    """`count` instances of `profile` (or of one of its alternatives), weighted by `priority`;
    for a bundle, `count` pods each needing every part of `per_pod` on one node."""

    profile: str
    count: int
    priority: int
    kind: DemandKind
    pods: tuple[str, ...] = ()
    """Pending pods behind a FREE item (namespace/name)."""
    alternatives: tuple[str, ...] = ()
    """Other profiles that serve this item as well (either/or demand, such as a DRA claim
    whose selectors several profiles satisfy); empty for a plain profile count."""
    per_pod: tuple[Part, ...] = ()
    """A bundle's parts (what each of its pods needs on one node); empty for an item that
    counts single instances."""
    gang: str = ""
    """The gang the item's pods belong to (`PodGroup ml/train`, `Workload ml/job-1`): its
    items are met together or not at all; empty for pods scheduled one by one."""
    minimum: int = 0
    """Units this item must get when its gang is met (a Kueue pod set's count, or its
    minCount under partial admission)."""
    gang_minimum: int = 0
    """Units the whole gang must get when met (the same on each of its items): a PodGroup's
    minCount less its pods already scheduled, a Workload's pod sets' minima added up."""

    @property
    def resource(self) -> str:
        """The Kubernetes resource name of the (first) profile."""
        return resource_name(self.profile)

    @property
    def profiles(self) -> tuple[str, ...]:
        """Every profile that serves this item, the first one first."""
        if self.per_pod:
            found = dict.fromkeys(p for part in self.per_pod for p in part.profiles)
            return (self.profile, *sorted(found.keys() - {self.profile}, key=profile_order))
        return (self.profile, *self.alternatives)

    @property
    def parts(self) -> tuple[Part, ...]:
        """What one unit of `count` needs: a bundle's parts, else one instance of `profiles`."""
        return self.per_pod or (Part(self.profiles, 1),)

    @property
    def per_unit(self) -> int:
        """Instances one unit of `count` takes (a bundle's instances per pod, else 1)."""
        return sum(part.count for part in self.parts)

    @property
    def shape(self) -> str:
        """What one unit needs, as a person reads it: `2 x 1g.10gb + 1 x 2g.20gb`."""
        return " + ".join(part.text for part in self.parts)


def gangs_of(demand: Sequence[DemandItem]) -> dict[str, list[int]]:
    """Per gang, the indices of its items in `demand` (in order)."""
    found: dict[str, list[int]] = {}
    for n, item in enumerate(demand):
        if item.gang:
            found.setdefault(item.gang, []).append(n)
    return found


def gang_met(demand: Sequence[DemandItem], met: Sequence[int], members: Sequence[int]) -> bool:
    """Whether the gang of items `members` is met by `met` (units per item): each item has
    at least its minimum and the gang at least its own."""
    got = [met[n] for n in members]
    first = demand[members[0]]
    return all(met[n] >= demand[n].minimum for n in members) and sum(got) >= first.gang_minimum


def gang_problem(demand: Sequence[DemandItem], met: Sequence[int], members: Sequence[int]) -> str:
    """What is wrong with `met` for the gang of items `members` (empty: nothing): a gang is
    met all together (every minimum) or not at all (nothing)."""
    if not any(met[n] for n in members) or gang_met(demand, met, members):
        return ""
    first = demand[members[0]]
    return (
        f"gang {first.gang} is part met ({sum(met[n] for n in members)} pods; all or none: at "
        f"least {first.gang_minimum}, each item its minimum)"
    )


def left_unmet(demand: Sequence[DemandItem], met: Sequence[int]) -> list[tuple[int, DemandItem]]:
    """The pending demand (FREE items) that `met` (units per item) leaves, with each item's
    index: a gang not met whole, as it was; of a gang met or an item outside gangs, the units
    not met, as ordinary demand (pods beyond a gang's minimum are scheduled one by one)."""
    admitted = {g for g, members in gangs_of(demand).items() if gang_met(demand, met, members)}
    left = []
    for n, item in enumerate(demand):
        if item.kind is not DemandKind.FREE:
            continue
        if item.gang and item.gang not in admitted:
            left.append((n, item))
        elif item.count > met[n]:
            rest = replace(item, count=item.count - met[n], gang="", minimum=0, gang_minimum=0)
            left.append((n, rest))
    return left


def compute_slices(profile: str) -> int:
    """`3g.40gb` -> 3."""
    return int(profile.split("g.", 1)[0])


def profile_order(profile: str) -> tuple[int, int, str]:
    """Smallest first: compute slices, then memory, then name (`1g.10gb` before `1g.20gb`)."""
    compute, _, rest = profile.partition("g.")
    memory = rest.partition("gb")[0]
    return (int(compute), int(memory) if memory.isdigit() else 0, profile)


def demand_weight(item: DemandItem) -> int:
    """Priority times compute slices: capacity delivered, weighted by how much it matters.

    An either/or item is worth the same whichever profile serves it, counted at its smallest
    profile, so the solver never prefers a larger instance for the weight alone; a bundle is
    worth the sum of its parts, per pod.
    """
    return item.priority * sum(
        part.count * min(compute_slices(p) for p in part.profiles) for part in item.parts
    )


def pod_parts(pod: PendingPod | WorkloadPodSet) -> tuple[Part, ...]:
    """What `pod` (or each pod of a Workload's pod set) needs, as parts: each MIG resource it
    requests, and each set of profiles its claims' devices may take (requests for the same
    set added up), sorted."""
    counts: Counter[tuple[str, ...]] = Counter()
    for resource, quantity in pod.requests.items():
        if is_mig_resource(resource) and quantity > 0:
            counts[(profile_of(resource),)] += quantity
    for claim in pod.claims:
        if claim.profiles and claim.count > 0:
            counts[tuple(sorted(set(claim.profiles), key=profile_order))] += claim.count
    return tuple(sorted(Part(profiles, n) for profiles, n in counts.items()))


def pending_demand(spec: DemandSpec, inventory: Inventory) -> list[DemandItem]:
    """FREE items from the inventory's pending pods that the spec's namespace selector admits.

    A pod that needs one instance counts in the item of the profiles that could serve it
    (either/or for a claim several profiles satisfy); a pod that needs more counts in the
    bundle item of its shape, because the device plugin and the DRA scheduler give a pod
    devices of one node only.
    """
    wanted = spec.from_pending_pods
    if wanted is None:
        return []
    gangs = {(g.namespace, g.name): g for g in inventory.gangs}
    owners = {gang_key(g): g for g in inventory.gangs}
    pods: dict[tuple[str, tuple[Part, ...]], list[str]] = {}
    # Tens of thousands of pending pods come from a few namespaces and a few shapes of request.
    admitted: dict[str, bool] = {}
    shapes: dict[tuple[object, ...], tuple[Part, ...]] = {}
    for pod in inventory.pending_pods:
        if pod.namespace not in admitted:
            labels = _namespace_labels(inventory, pod.namespace)
            admitted[pod.namespace] = wanted.namespace_selector.matches(labels)
        if not admitted[pod.namespace]:
            continue
        shape = (*pod.requests.items(), *((tuple(c.profiles), c.count) for c in pod.claims))
        parts = shapes.get(shape)
        if parts is None:
            parts = shapes[shape] = pod_parts(pod)
        if not parts:
            continue
        key = gang_key(gangs[pod.namespace, pod.gang]) if pod.gang else ""
        pods.setdefault((key, parts), []).append(f"{pod.namespace}/{pod.name}")
    items = []
    for key, parts in sorted(pods, key=lambda k: (k[0], len(k[1]) > 1 or k[1][0].count > 1, k)):
        names = tuple(pods[key, parts])
        item = _item(parts, len(names), wanted.priority, names)
        if key:
            owner = owners[key]
            least = max(owner.min_count - owner.scheduled, 0)
            item = replace(item, gang=key, gang_minimum=least)
        items.append(item)
    return items


def gang_key(gang: Gang | None) -> str:
    """How demand names a gang: `PodGroup ml/train` (empty for none)."""
    return f"{gang.kind} {gang.namespace}/{gang.name}" if gang else ""


WORKLOAD = "Workload"
"""The kind in the key of a Kueue Workload's gang (`Workload ml/job-a`)."""


def workload_gang(namespace_name: str) -> str:
    """How demand names the gang of the Kueue Workload `namespace/name`."""
    return f"{WORKLOAD} {namespace_name}"


def is_workload_gang(key: str) -> bool:
    """Whether gang `key` is a Kueue Workload's (whose pod sets may have a minCount)."""
    return key.startswith(f"{WORKLOAD} ")


def _namespace_labels(inventory: Inventory, namespace: str) -> dict[str, str]:
    """A namespace's labels as a namespace selector sees them (its name label included)."""
    return {"kubernetes.io/metadata.name": namespace, **inventory.namespaces.get(namespace, {})}


def _item(parts: tuple[Part, ...], units: int, priority: int, pods: tuple[str, ...]) -> DemandItem:
    """A FREE item of `units` pods (named `pods`) needing `parts` each: an either/or item of
    `units` instances where each needs one, else a bundle."""
    single = len(parts) == 1 and parts[0].count == 1
    first = parts[0].profiles
    return DemandItem(
        first[0],
        units,
        priority,
        DemandKind.FREE,
        pods,
        alternatives=first[1:] if single else (),
        per_pod=() if single else parts,
    )


def workload_demand(spec: DemandSpec, inventory: Inventory, *, plan: str) -> list[DemandItem]:
    """FREE items from Kueue Workloads: those waiting on a migplan AdmissionCheck that names
    `plan`, and, with `fromKueue.clusterQueues`, the pending Workloads of those queues whose
    namespace the selector admits. One item per pod set, named by its Workload
    (`namespace/name`), so the operator can tell each Workload whether it was met."""
    wanted = spec.from_kueue
    priority = wanted.priority if wanted is not None else 1
    items = []
    for workload in inventory.workloads:
        queued = (
            wanted is not None
            and workload.cluster_queue in wanted.cluster_queues
            and wanted.namespace_selector.matches(_namespace_labels(inventory, workload.namespace))
        )
        if workload.check_plan and workload.check_plan != plan:
            continue  # another plan's AdmissionCheck serves it
        if not (plan and workload.check_plan == plan) and not queued:
            continue
        who = f"{workload.namespace}/{workload.name}"
        sets = [(s, parts) for s in workload.pod_sets if (parts := pod_parts(s)) and s.count > 0]
        minima = [s.count if s.min_count is None else s.min_count for s, _ in sets]
        for (pod_set, parts), least in zip(sets, minima, strict=True):
            item = _item(parts, pod_set.count, priority, (who,))
            items.append(
                replace(item, gang=workload_gang(who), minimum=least, gang_minimum=sum(minima))
            )
    return items


def build_demand(spec: DemandSpec, inventory: Inventory, *, plan: str = "") -> list[DemandItem]:
    """All demand items of plan `plan`: explicit totals first, then pending pods, then Kueue
    Workloads."""
    explicit = [
        DemandItem(
            profile_of(p.resource),
            p.count,
            p.priority,
            DemandKind.TOTAL,
            alternatives=tuple(profile_of(r) for r in p.alternatives),
        )
        for p in spec.profiles
    ]
    return explicit + pending_demand(spec, inventory) + workload_demand(spec, inventory, plan=plan)
