"""The fleet as the planner sees it: nodes, their GPUs, layouts, in-use instances, pending pods.

`Inventory` is the file format (an offline snapshot, or what the operator builds from the API);
`resolve_inventory` checks it against the catalog and yields one `GpuState` per GPU.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Annotated, Literal

import orjson
from pydantic import Field

from migplan.planner.api.group import API_VERSION, ApiVersion
from migplan.planner.errors import MigplanInputError
from migplan.planner.hardware.catalog import PROFILE_NAME, Catalog, GpuModel
from migplan.planner.hardware.layout import Instance, Layout, check_layout
from migplan.planner.hardware.resources import is_mig_resource
from migplan.planner.schema import CamelModel

MAX_GPU_INDEX = 1023
"""NVML numbers a node's GPUs from 0; no node has a thousand."""
MAX_REQUEST = 1024
"""Instances of one profile one pod may ask for."""
MAX_NODES = 20_000
"""Four times the largest cluster Kubernetes supports (5,000 nodes)."""
MAX_GPUS_PER_NODE = 64
MAX_SHARERS = 256
"""Pods one instance can serve at once: a ResourceClaim's reservedFor holds at most 256."""
MAX_PENDING_PODS = 500_000
"""More than the 150,000 pods Kubernetes supports in one cluster."""
MAX_WORKLOADS = 100_000
MAX_NAMESPACES = 100_000

PodName = Annotated[
    str, Field(pattern=r"^[a-z0-9][-a-z0-9.]*/[a-z0-9][-a-z0-9.]*$", max_length=317)
]
"""A pod as `namespace/name`."""
DnsName = Annotated[
    str, Field(pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", min_length=1, max_length=253)
]
"""A node, namespace or pod name as Kubernetes allows it (nothing a terminal would obey)."""


class GpuInfo(CamelModel):
    """One GPU of a node."""

    index: Annotated[int, Field(ge=0, le=MAX_GPU_INDEX)]
    model: Annotated[str, Field(max_length=128, description="catalog key or product name")]
    uuid: Annotated[str, Field(pattern=r"^[A-Za-z0-9-]{1,64}$")] | None = None
    mig_enabled: bool = True
    layout: str = Field(
        default="-",
        min_length=1,
        max_length=4096,
        description="current layout in canonical form (- for an empty GPU)",
    )
    in_use: dict[str, PodName] = Field(
        default_factory=dict, description="instance (profile@start) -> pod using it"
    )
    whole_gpu_pod: PodName | None = Field(
        default=None, description="pod using the whole GPU (MIG disabled)"
    )
    shared_with: dict[
        str, Annotated[tuple[PodName, ...], Field(min_length=1, max_length=MAX_SHARERS - 1)]
    ] = Field(
        default_factory=dict,
        description="in-use instance -> the other pods using it (a ResourceClaim several pods "
        "share): destroying the instance evicts them all",
    )


class NodeInfo(CamelModel):
    """A GPU node."""

    name: DnsName
    labels: dict[str, str] = Field(default_factory=dict)
    gpus: Annotated[tuple[GpuInfo, ...], Field(max_length=MAX_GPUS_PER_NODE)] = ()


class ClaimRequest(CamelModel):
    """MIG devices a pending pod asks for through a DRA ResourceClaim: `count` devices, each
    of any of `profiles` (those whose attributes the claim's selectors accept)."""

    claim: DnsName = Field(description="the ResourceClaim (in the pod's namespace)")
    request: Annotated[str, Field(max_length=63)] = Field(
        default="", description="the request's name inside the claim"
    )
    count: Annotated[int, Field(ge=0, le=MAX_REQUEST)] = 1
    profiles: Annotated[
        tuple[Annotated[str, Field(pattern=PROFILE_NAME.pattern, max_length=32)], ...],
        Field(max_length=64),
    ] = Field(default=(), description="MIG profiles any of which serves a device (empty: none)")


class PendingPod(CamelModel):
    """A pod waiting for MIG resources."""

    namespace: DnsName
    name: DnsName
    requests: dict[str, Annotated[int, Field(ge=0, le=MAX_REQUEST)]] = Field(
        default_factory=dict, description="MIG extended resources (device plugin)"
    )
    claims: Annotated[tuple[ClaimRequest, ...], Field(max_length=64)] = Field(
        default=(), description="MIG devices asked for through DRA ResourceClaims"
    )
    labels: dict[str, str] = Field(default_factory=dict)
    gang: DnsName | Literal[""] = Field(
        default="",
        description="the gang (a `gangs` entry in the pod's namespace) the pod belongs to: "
        "its pods are scheduled all together or not at all",
    )


GangKind = Literal["PodGroup", "VolcanoPodGroup", "CoschedulingPodGroup"]


class Gang(CamelModel):
    """Pods scheduled all or nothing: a Kubernetes PodGroup with the gang policy
    (`scheduling.k8s.io`, pods joined by `spec.schedulingGroup.podGroupName`), a Volcano
    PodGroup (`minMember`) or a scheduler-plugins coscheduling PodGroup (`minMember`)."""

    namespace: DnsName
    name: DnsName
    kind: GangKind = "PodGroup"
    min_count: Annotated[int, Field(ge=0, le=MAX_PENDING_PODS)] = Field(
        description="pods of the gang that must be scheduled together (minCount, minMember)"
    )
    scheduled: Annotated[int, Field(ge=0, le=MAX_PENDING_PODS)] = Field(
        default=0,
        description="pods of the gang already bound to nodes: they count towards minCount",
    )


DnsLabel = Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)]
"""A name Kubernetes allows as a label (a pod set's): nothing a terminal would obey."""


class WorkloadPodSet(CamelModel):
    """A Kueue Workload's pod set: `count` pods, each asking for `requests` and `claims`."""

    name: DnsLabel
    count: Annotated[int, Field(ge=0, le=MAX_REQUEST)]
    min_count: Annotated[int, Field(ge=0, le=MAX_REQUEST)] | None = Field(
        default=None,
        description="Kueue partial admission: the fewest pods of the set the Workload may be "
        "admitted with (none: all `count`)",
    )
    requests: dict[str, Annotated[int, Field(ge=0, le=MAX_REQUEST)]] = Field(
        default_factory=dict, description="MIG extended resources each pod asks for"
    )
    claims: Annotated[tuple[ClaimRequest, ...], Field(max_length=64)] = Field(
        default=(), description="MIG devices each pod asks for through DRA claims"
    )


class PendingWorkload(CamelModel):
    """A Kueue Workload not yet admitted: its pods do not exist (the Job is suspended) or are
    held by Kueue's scheduling gate, so only the Workload says what they will need."""

    namespace: DnsName
    name: DnsName
    cluster_queue: DnsName | Literal[""] = Field(
        default="", description="the ClusterQueue its LocalQueue points at"
    )
    quota_reserved: bool = False
    check_plan: DnsName | Literal[""] = Field(
        default="",
        description="the GPUPartitionPlan named by a migplan AdmissionCheck the Workload "
        "waits on (quota reserved, check Pending); empty when none",
    )
    pod_sets: Annotated[tuple[WorkloadPodSet, ...], Field(max_length=8)] = ()


class Inventory(CamelModel):
    """A snapshot of the cluster's GPU nodes (file kind `Inventory`)."""

    api_version: ApiVersion = API_VERSION
    kind: Literal["Inventory"] = "Inventory"
    namespaces: Annotated[dict[str, dict[str, str]], Field(max_length=MAX_NAMESPACES)] = Field(
        default_factory=dict, description="namespace -> its labels (for namespace selectors)"
    )
    nodes: Annotated[tuple[NodeInfo, ...], Field(max_length=MAX_NODES)]
    pending_pods: Annotated[tuple[PendingPod, ...], Field(max_length=MAX_PENDING_PODS)] = ()
    workloads: Annotated[tuple[PendingWorkload, ...], Field(max_length=MAX_WORKLOADS)] = Field(
        default=(), description="Kueue Workloads waiting for admission"
    )
    gangs: Annotated[tuple[Gang, ...], Field(max_length=MAX_WORKLOADS)] = Field(
        default=(), description="pod groups scheduled all or nothing (pending pods name theirs)"
    )


SituationKey = tuple[
    GpuModel, Layout, bool, frozenset[Instance], tuple[tuple[Instance, int], ...], bool
]
"""`GpuState.situation`: model, layout, MIG mode, in-use instances, (instance, pods sharing
it besides the first) pairs, and whether no pod holds the whole GPU."""


@dataclass(frozen=True)
class GpuState:
    """One GPU, resolved against the catalog: the unit the planner decides about."""

    node: str
    index: int
    uuid: str | None
    model: GpuModel
    layout: Layout
    pins: Mapping[Instance, str] = field(default_factory=dict)
    """In-use instances and the pod on each."""
    mig_enabled: bool = True
    whole_gpu_pod: str | None = None
    sharers: Mapping[Instance, tuple[str, ...]] = field(default_factory=dict)
    """In-use instances several pods share: the pods besides the one in `pins`."""

    def holders(self, instances: Iterable[Instance]) -> list[str]:
        """Every pod using any of `instances`, sorted: what destroying them evicts."""
        chosen = set(instances)
        return sorted(
            {pod for inst, pod in self.pins.items() if inst in chosen}
            | {pod for inst, pods in self.sharers.items() if inst in chosen for pod in pods}
        )

    @property
    def name(self) -> str:
        """`node/gpu-N`, for messages."""
        return f"{self.node}/gpu-{self.index}"

    @property
    def situation(self) -> SituationKey:
        """What decides the GPU's part in any plan but its target (`fleet.Situation`): model,
        layout, MIG mode, in-use instances, how many pods share each, whether a pod holds
        the whole GPU. Worked out once (kept beside the fields, which it does not join): the
        operator's passes reuse a node's states while its report stays the same (numbering
        40,000 GPUs' situations: 57 ms to 24 ms a pass)."""
        known: SituationKey | None = self.__dict__.get("_situation")
        if known is not None:
            return known
        shared = tuple(sorted((i, len(p)) for i, p in self.sharers.items()))
        known = self.__dict__["_situation"] = (
            self.model,
            self.layout,
            self.mig_enabled,
            frozenset(self.pins),
            shared,
            self.whole_gpu_pod is None,
        )
        return known


_Case = tuple[GpuModel, Layout, tuple[Instance, ...], tuple[Instance, ...]]
_CaseKey = tuple[str, str, tuple[str, ...], tuple[str, ...], bool, bool]


@dataclass
class Checked:
    """What `resolve_node` has checked, across nodes: each layout's first problem (or None),
    and per GPU case (model and layout as written, in-use and shared instances, MIG mode, a
    whole-GPU pod or not) the model, layout and instances parsed. The bench's 40,000 GPUs are
    4,463 cases (resolving them: 0.43-0.49 s to 0.34-0.41 s)."""

    layouts: dict[tuple[str, Layout], str | None] = field(default_factory=dict)
    cases: dict[_CaseKey, _Case] = field(default_factory=dict)


def _resolve_gpu(node: NodeInfo, gpu: GpuInfo, catalog: Catalog, checked: Checked) -> GpuState:
    case = (
        gpu.model,
        gpu.layout,
        tuple(gpu.in_use),
        tuple(gpu.shared_with),
        gpu.mig_enabled,
        bool(gpu.whole_gpu_pod),
    )
    known = checked.cases.get(case)
    if known is None:
        known = checked.cases[case] = _check_gpu_case(node, gpu, catalog, checked.layouts)
    model, layout, pinned, shared = known
    return GpuState(
        node=node.name,
        index=gpu.index,
        uuid=gpu.uuid,
        model=model,
        layout=layout,
        pins=dict(zip(pinned, gpu.in_use.values(), strict=True)),
        mig_enabled=gpu.mig_enabled,
        whole_gpu_pod=gpu.whole_gpu_pod,
        sharers=dict(zip(shared, gpu.shared_with.values(), strict=True)),
    )


def _check_gpu_case(
    node: NodeInfo, gpu: GpuInfo, catalog: Catalog, checked: dict[tuple[str, Layout], str | None]
) -> _Case:
    """The GPU's model, layout, in-use and shared instances, parsed and checked; raises
    MigplanInputError naming the node and GPU."""
    where = f"inventory: node {node.name} gpu {gpu.index}"
    try:
        model = catalog.model(gpu.model)
        layout = Layout.parse(gpu.layout)
        pins = tuple(Instance.parse(text) for text in gpu.in_use)
        sharers = tuple(Instance.parse(text) for text in gpu.shared_with)
    except MigplanInputError as exc:
        raise MigplanInputError(f"{where}: {exc}") from None
    if (model.model, layout) not in checked:  # a fleet repeats a few hundred layouts
        problems = check_layout(model, layout)
        checked[model.model, layout] = str(problems[0]) if problems else None
    problem = checked[model.model, layout]
    if problem:
        raise MigplanInputError(
            f"{where}: current layout {layout} is not valid on {model.model}: {problem}"
        )
    for instance in pins:
        if instance not in layout.instances:
            raise MigplanInputError(
                f"{where}: in-use instance {instance} is not in the current layout {layout}"
            )
    for instance in sharers:
        if instance not in pins:
            raise MigplanInputError(
                f"{where}: shared instance {instance} is not in use (sharedWith needs inUse)"
            )
    if not gpu.mig_enabled and (layout or pins):
        raise MigplanInputError(f"{where}: MIG is disabled, so layout and inUse must be empty")
    if gpu.whole_gpu_pod and gpu.mig_enabled:
        raise MigplanInputError(f"{where}: wholeGpuPod is only possible with MIG disabled")
    return model, layout, pins, sharers


def resolve_node(
    node: NodeInfo, catalog: Catalog, checked: Checked | None = None
) -> list[GpuState]:
    """The node's GPUs checked against `catalog` (`checked` caches layout checks across
    nodes); raises MigplanInputError naming the node and GPU, as `resolve_inventory` does."""
    checked = Checked() if checked is None else checked
    indices = [g.index for g in node.gpus]
    if len(set(indices)) != len(indices):
        raise MigplanInputError(f"inventory: node {node.name} lists a GPU index twice")
    return [_resolve_gpu(node, gpu, catalog, checked) for gpu in node.gpus]


def _node_pods(node: NodeInfo) -> tuple[str, ...]:
    """Every pod holding one of the node's GPUs (or an instance on it)."""
    pods: list[str] = []
    for gpu in node.gpus:
        pods += gpu.in_use.values()
        for sharing in gpu.shared_with.values():
            pods += sharing
        if gpu.whole_gpu_pod:
            pods.append(gpu.whole_gpu_pod)
    return tuple(pods)


def _check_pods_on_one_node(inventory: Inventory, held: Sequence[tuple[str, ...]]) -> None:
    """A pod runs on one node: the same pod on two nodes is a broken snapshot. `held`: each
    node's pods (`_node_pods`), in the inventory's order."""
    every = list(chain.from_iterable(held))
    if len(set(every)) == len(every):
        return
    where: dict[str, str] = {}
    for node, pods in zip(inventory.nodes, held, strict=True):
        for pod in pods:
            if where.setdefault(pod, node.name) != node.name:
                raise MigplanInputError(
                    f"inventory: pod {pod} holds GPUs on two nodes, {where[pod]} and "
                    f"{node.name}; a pod runs on one node"
                )


def _check_gangs(inventory: Inventory) -> None:
    """Every gang a pending pod names exists, once; every pod set's minCount is within its
    count."""
    gangs: set[tuple[str, str]] = set()
    for gang in inventory.gangs:
        if (gang.namespace, gang.name) in gangs:
            raise MigplanInputError(f"inventory: gang {gang.namespace}/{gang.name} is listed twice")
        gangs.add((gang.namespace, gang.name))
    for pod in inventory.pending_pods:
        if pod.gang and (pod.namespace, pod.gang) not in gangs:
            raise MigplanInputError(
                f"inventory: pending pod {pod.namespace}/{pod.name} names gang {pod.gang!r}, "
                f"which is not in gangs (namespace {pod.namespace})"
            )
    for workload in inventory.workloads:
        for pod_set in workload.pod_sets:
            if pod_set.min_count is not None and pod_set.min_count > pod_set.count:
                raise MigplanInputError(
                    f"inventory: workload {workload.namespace}/{workload.name} pod set "
                    f"{pod_set.name}: minCount {pod_set.min_count} is above count {pod_set.count}"
                )


@dataclass
class KnownNode:
    """What a pass derived from one node's report: its GPUs resolved against a catalog, its
    pods, and (once asked for) its canonical JSON with the labels it was written with."""

    catalog: Catalog
    gpus: tuple[GpuInfo, ...]
    states: list[GpuState]
    pods: tuple[str, ...]
    canonical: tuple[dict[str, str], orjson.Fragment] | None = None


def _same(known: tuple[GpuInfo, ...], gpus: tuple[GpuInfo, ...]) -> bool:
    """Whether `gpus` are the very objects `known` holds, in order."""
    return len(known) == len(gpus) and all(a is b for a, b in zip(known, gpus, strict=True))


class ResolvedNodes:
    """Nodes' GPUs as resolved by one planning pass, for the next: a node whose GPUs are the
    very objects the last pass resolved (the operator keeps an agent's report while its
    NodePartition's resourceVersion stays) is not resolved again (40,000 GPUs: 0.22 s a
    pass), nor are its pods listed again for the one-node check (0.1 s), nor its canonical
    JSON written again for the inputs' digest (`canonical`, 0.2 s). Keyed by identity, so a
    changed report is always resolved anew."""

    def __init__(self) -> None:
        self._known: dict[str, KnownNode] = {}

    def lookup(self, node: NodeInfo, catalog: Catalog) -> KnownNode | None:
        """What the last pass derived from `node`, if its GPUs are the same objects."""
        known = self._known.get(node.name)
        if known is None or known.catalog is not catalog or not _same(known.gpus, node.gpus):
            return None
        return known

    def keep(self, fresh: dict[str, KnownNode]) -> None:
        """This pass's nodes, instead of the last pass's (nodes gone are forgotten)."""
        self._known = fresh

    def canonical(self, node: NodeInfo) -> orjson.Fragment:
        """`node`'s canonical JSON (sorted keys, `input_hash`'s form), written once for as
        long as its GPUs are the objects this pass resolved and its labels the same."""
        known = self._known.get(node.name)
        if known is None or not _same(known.gpus, node.gpus):
            known = None
        elif known.canonical is not None and known.canonical[0] == node.labels:
            return known.canonical[1]
        written = orjson.Fragment(
            orjson.dumps(node.model_dump(mode="json", by_alias=True), option=orjson.OPT_SORT_KEYS)
        )
        if known is not None:
            known.canonical = (dict(node.labels), written)
        return written


def resolve_inventory(
    inventory: Inventory, catalog: Catalog, *, memo: ResolvedNodes | None = None
) -> list[GpuState]:
    """Every GPU of `inventory`, checked against `catalog`, in node then index order (with
    `memo`, nodes unchanged since the last pass are taken from it).

    Raises MigplanInputError naming node and GPU for an unknown model, a malformed or invalid
    layout, an in-use instance missing from the layout, or a duplicate node or GPU index.
    """
    seen_nodes: set[str] = set()
    checked = Checked()
    states = []
    fresh: dict[str, KnownNode] = {}
    for node in inventory.nodes:
        if node.name in seen_nodes:
            raise MigplanInputError(f"inventory: node {node.name} is listed twice")
        seen_nodes.add(node.name)
        known = None if memo is None else memo.lookup(node, catalog)
        if known is None:
            resolved = resolve_node(node, catalog, checked)
            known = KnownNode(catalog, node.gpus, resolved, _node_pods(node))
        fresh[node.name] = known
        states += known.states
    _check_pods_on_one_node(inventory, [fresh[node.name].pods for node in inventory.nodes])
    _check_gangs(inventory)
    for pod in inventory.pending_pods:
        for resource in pod.requests:
            if resource.startswith("nvidia.com/mig-") and not is_mig_resource(resource):
                raise MigplanInputError(
                    f"inventory: pending pod {pod.namespace}/{pod.name}: {resource!r} is not a "
                    "MIG resource name (such as nvidia.com/mig-1g.10gb)"
                )
    if memo is not None:
        memo.keep(fresh)
    return sorted(states, key=lambda s: (s.node, s.index))
