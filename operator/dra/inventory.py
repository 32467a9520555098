"""What DRA adds to the planner's Inventory: instances claims hold, GPUs only DRA describes,
and pending pods' claims as either/or demand.

- Static MIG devices: the node's agent reports GPUs and layouts (NodePartition) as without
  DRA; an instance allocated to a claim is in use by the claim's pod, so the plan keeps it.
- DynamicMIG: the node runs no migplan agent; its GPUs are the driver's full-GPU devices and
  its instances the slots claims hold.
- Pending pods: each ResourceClaim (or claim template) they wait on, and each extended
  resource a DeviceClass stands for, becomes a ClaimRequest with the profiles that satisfy it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from migplan.operator.dra.claims import (
    ClaimReader,
    ClassInfo,
    Held,
    candidates,
    claim_from_template,
    device_classes,
    held_instances,
    pod_claims,
)
from migplan.operator.dra.devices import DeviceKind, SliceDevice, slice_devices
from migplan.operator.kube.seam import Kube
from migplan.operator.skipped import why_invalid
from migplan.planner.api.inventory import ClaimRequest, GpuInfo, NodeInfo
from migplan.planner.errors import UnknownModelError
from migplan.planner.hardware.catalog import Catalog
from migplan.planner.hardware.layout import Layout

Key = tuple[str, str]


def _by_key(objects: Iterable[Mapping[str, Any]]) -> dict[Key, Mapping[str, Any]]:
    return {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objects}


@dataclass
class DraState:
    """The cluster's DRA objects, as read once per planning pass."""

    devices: list[SliceDevice]
    claims: dict[Key, Mapping[str, Any]]
    templates: dict[Key, Mapping[str, Any]]
    classes: dict[str, ClassInfo]
    notes: list[str] = field(default_factory=list)

    @classmethod
    def of(
        cls,
        *,
        slices: Iterable[Mapping[str, Any]],
        claims: Iterable[Mapping[str, Any]],
        templates: Iterable[Mapping[str, Any]],
        classes: Iterable[Mapping[str, Any]],
    ) -> DraState:
        """The state from lists of plain API objects."""
        return cls(
            devices=slice_devices(slices),
            claims=_by_key(claims),
            templates=_by_key(templates),
            classes=device_classes(classes),
        )

    def held(self) -> list[Held]:
        """Instances allocated claims hold."""
        return held_instances(self.claims.values(), self.devices)


def with_held(nodes: Sequence[NodeInfo], held: Sequence[Held]) -> list[NodeInfo]:
    """`nodes` with every instance a claim holds marked in use by its pod (GPUs matched by
    UUID, else by index = minor); a held instance outside the reported layout is left to the
    agent's next report."""
    by_node: dict[str, list[Held]] = {}
    for h in held:
        by_node.setdefault(h.node, []).append(h)
    result = []
    for node in nodes:
        mine = by_node.get(node.name)
        if not mine:
            result.append(node)
            continue
        gpus = []
        for gpu in node.gpus:
            layout = set(Layout.parse(gpu.layout).instances) if gpu.layout != "-" else set()
            in_use = dict(gpu.in_use)
            shared = dict(gpu.shared_with)
            for h in mine:
                same = (
                    h.gpu_uuid == gpu.uuid if h.gpu_uuid and gpu.uuid else h.gpu_minor == gpu.index
                )
                if same and h.instance in layout:
                    first = in_use.setdefault(str(h.instance), h.pod)
                    others = tuple(p for p in h.pods if p != first)
                    if others:
                        shared[str(h.instance)] = others
            gpus.append(gpu.model_copy(update={"in_use": in_use, "shared_with": shared}))
        result.append(node.model_copy(update={"gpus": tuple(gpus)}))
    return result


def _dynamic_gpus(state: DraState, skipped: set[str]) -> dict[tuple[str, int], SliceDevice]:
    """Per (node, minor), a device that describes a DynamicMIG GPU: its full-GPU device, or
    where the driver publishes none (Ampere with MIG on) one of its slots."""
    dynamic = {d.node for d in state.devices if d.kind is DeviceKind.SLOT} - skipped
    found: dict[tuple[str, int], SliceDevice] = {}
    for d in state.devices:
        if d.node not in dynamic or d.minor is None:
            continue
        if d.kind is DeviceKind.GPU or (
            d.kind is DeviceKind.SLOT and (d.node, d.minor) not in found
        ):
            found[(d.node, d.minor)] = d
    return found


def nodes_from_slices(
    state: DraState, *, labels: Mapping[str, Mapping[str, str]], skip: Iterable[str]
) -> list[NodeInfo]:
    """GPU nodes described by DynamicMIG slices alone (no agent report): each GPU (its
    full-GPU device, or its slots' parent) with the slots claims hold as its instances."""
    held = state.held()
    gpus: dict[str, list[GpuInfo]] = {}
    for (node, minor), d in sorted(_dynamic_gpus(state, set(skip)).items()):
        mine = [h for h in held if h.node == node and h.gpu_minor == minor]
        try:
            gpu = GpuInfo(
                index=minor,
                model=str(d.attribute("productName") or ""),
                uuid=d.uuid if d.kind is DeviceKind.GPU else d.parent_uuid,
                layout=str(Layout.of([h.instance for h in mine])),
                in_use={str(h.instance): h.pod for h in mine},
                shared_with={str(h.instance): h.others for h in mine if h.others},
            )
        except (ValidationError, ValueError) as exc:
            why = why_invalid(exc) if isinstance(exc, ValidationError) else str(exc)
            state.notes.append(f"node {node} GPU {minor} (DRA) skipped: {why}")
            continue
        gpus.setdefault(node, []).append(gpu)
    return [
        NodeInfo(
            name=node,
            labels=dict(labels.get(node, {})),
            gpus=tuple(sorted(found, key=lambda g: g.index)),
        )
        for node, found in sorted(gpus.items())
    ]


def claim_reader(state: DraState, *, nodes: Sequence[NodeInfo], catalog: Catalog) -> ClaimReader:
    """A reader of claims against the profiles of every GPU model `nodes` hold."""
    models = []
    for node in nodes:
        for gpu in node.gpus:
            try:
                models.append(catalog.model(gpu.model))
            except UnknownModelError:
                continue
    return ClaimReader(state.classes, candidates(models, state.devices, catalog))


def claim_requests(
    pod: Any, *, state: DraState, reader: ClaimReader, extended: Mapping[str, int]
) -> list[ClaimRequest]:
    """What a pending pod asks for through DRA: its unallocated claims, and extended
    resources a DeviceClass stands for; each with the profiles of covered models that serve."""
    where = f"pod {pod.metadata.namespace}/{pod.metadata.name}"
    found = []
    for name, claim in pod_claims(pod, claims=state.claims, templates=state.templates):
        found += reader.requests(claim, where=f"{where} claim {name}")
    found += reader.extended(extended)
    state.notes += [n for n in reader.notes if n not in state.notes]
    return found


def workload_claims(
    namespace: str, template: Mapping[str, Any], where: str, *, state: DraState, reader: ClaimReader
) -> list[ClaimRequest]:
    """What one pod of a Kueue pod set asks for through DRA: the ResourceClaimTemplates its
    template references (its claims are made only once the pod is)."""
    found = []
    for ref in template.get("resourceClaims") or []:
        made = state.templates.get((namespace, str(ref.get("resourceClaimTemplateName", ""))))
        if made is None:
            continue
        name = str(ref.get("name", ""))
        claim = claim_from_template(made, name=name, namespace=namespace)
        found += reader.requests(claim, where=f"{where} claim {name}")
    state.notes += [n for n in reader.notes if n not in state.notes]
    return found


def read_state(api: Kube) -> tuple[DraState | None, str | None]:
    """The cluster's DRA objects; None where the API server serves no DRA or migplan may
    not read it (and then why, for the plan's status)."""
    if not api.dra.served():
        return None, None
    try:
        state = DraState.of(
            slices=api.dra.list_objects(plural="resourceslices"),
            claims=api.dra.list_objects(plural="resourceclaims"),
            templates=api.dra.list_objects(plural="resourceclaimtemplates"),
            classes=api.dra.list_objects(plural="deviceclasses"),
        )
    except ApiException as exc:
        if exc.status != 403:
            raise
        return None, (
            "DRA objects are not readable (RBAC: get/list resource.k8s.io resourceslices, "
            "resourceclaims, resourceclaimtemplates, deviceclasses): claims are not counted"
        )
    return state, None


@dataclass
class DraReading:
    """The inventory reader's one way into DRA: the nodes NVIDIA's driver publishes and the
    instances claims hold, what pending pods and Kueue pod sets ask for through claims, and
    the notes for the plan's status. Nothing happens where DRA is not served."""

    state: DraState | None
    unreadable: str | None = None
    """Why DRA's objects could not be read, where they could not."""
    _reader: ClaimReader | None = field(default=None, init=False)

    def nodes(
        self,
        reported: Sequence[NodeInfo],
        *,
        left_out: dict[str, str],
        left_out_labels: dict[str, dict[str, str]],
        catalog: Catalog,
    ) -> list[NodeInfo]:
        """`reported` (the agents' nodes) with the instances claims hold, and the nodes the
        driver publishes in DynamicMIG mode (no longer left out); claims are read against
        every GPU model among them from here on."""
        nodes = list(reported)
        if self.state is not None:
            nodes = with_held(nodes, self.state.held())
            dynamic = nodes_from_slices(
                self.state, labels=left_out_labels, skip=[n.name for n in nodes]
            )
            for node in dynamic:
                left_out.pop(node.name, None)
                left_out_labels.pop(node.name, None)
            nodes += dynamic
            self._reader = claim_reader(self.state, nodes=nodes, catalog=catalog)
        return nodes

    def pod_claims(self, pod: Any, *, extended: Mapping[str, int]) -> list[ClaimRequest]:
        """What a pending pod asks for through DRA (nothing where DRA is not served)."""
        if self.state is None or self._reader is None:
            return []
        return claim_requests(pod, state=self.state, reader=self._reader, extended=extended)

    def template_claims(
        self,
    ) -> Callable[[str, Mapping[str, Any], str], list[ClaimRequest]] | None:
        """What one pod of a Kueue pod set asks for through DRA; None where DRA is not
        served."""
        if self.state is None or self._reader is None:
            return None
        return partial(workload_claims, state=self.state, reader=self._reader)

    def notes(self) -> list[str]:
        """What the plan's status should say about DRA."""
        if self.state is not None:
            return list(self.state.notes)
        return [self.unreadable] if self.unreadable else []


def read_dra(api: Kube) -> DraReading:
    """DRA as the inventory reader sees it, read once per pass."""
    state, unreadable = read_state(api)
    return DraReading(state, unreadable)
