"""The planner's Inventory, read from the live cluster.

GPU nodes are the nodes GPU feature discovery marks MIG-capable; each node's GPUs, layouts
and the pods holding instances come from the status its agent wrote in the NodePartition.
A node whose agent has not reported yet is left out (its layout is unknown, so planning it
could destroy running work) and named in the result. Pods count as demand when they are
Pending and unschedulable (or not yet scheduled) and ask for `nvidia.com/mig-*` resources,
or (DRA) for MIG devices through ResourceClaims; see `dra/inventory.py` for what DRA adds.
Where Kueue is installed, its Workloads not admitted yet are read too (`kueue/workloads.py`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from pydantic import ValidationError

from migplan.operator.dra.inventory import DraReading, read_dra
from migplan.operator.kube.bodies import NodePartitionBody
from migplan.operator.kube.quantities import extended_requests
from migplan.operator.kube.seam import Kube
from migplan.operator.kueue.workloads import read_pending
from migplan.operator.pod_groups import GangReading
from migplan.operator.skipped import Skipped, guarded, why_invalid
from migplan.planner.api.inventory import (
    Checked,
    GpuInfo,
    Inventory,
    NodeInfo,
    PendingPod,
    resolve_node,
)
from migplan.planner.api.spec import LabelSelector
from migplan.planner.errors import MigplanInputError
from migplan.planner.hardware.catalog import Catalog, default_catalog
from migplan.planner.hardware.resources import is_mig_resource

MIG_CAPABLE_LABEL = "nvidia.com/mig.capable"
MIG_CAPABLE = f"{MIG_CAPABLE_LABEL}=true"


@dataclass(frozen=True)
class ClusterSnapshot:
    """The inventory, and the GPU nodes it had to leave out (with why)."""

    inventory: Inventory
    left_out: dict[str, str]
    left_out_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    """Labels of the nodes left out, so a plan can tell which of them it covers."""
    notes: tuple[str, ...] = ()
    """What could not be read as demand, and why (a claim's class missing, selectors that
    fail on every profile, objects skipped)."""
    skipped: tuple[Skipped, ...] = ()
    """Objects left out of the pass because they break the planner's bounds."""

    def left_out_of(self, selector: LabelSelector) -> dict[str, str]:
        """The left-out nodes that `selector` picks, with why."""
        return {
            name: why
            for name, why in self.left_out.items()
            if selector.matches(self.left_out_labels.get(name, {}))
        }


def _gpus(partition: NodePartitionBody | None) -> tuple[GpuInfo, ...] | None:
    """The GPUs an agent reported; raises ValidationError on a report out of bounds."""
    status = (partition or {}).get("status") or {}
    if not status.get("gpus"):
        return None
    return tuple(
        GpuInfo(
            index=g["index"],
            model=g.get("model") or "",
            uuid=g.get("uuid"),
            mig_enabled=bool(g.get("migEnabled", True)),
            layout=g.get("layout", "-"),
            in_use=dict(g.get("inUse") or {}),
        )
        for g in status["gpus"]
    )


ReportKey = tuple[str, str, str]
"""A NodePartition's uid and resourceVersion, and its node's product label: one report, as
read against one product name."""


class CheckedReports:
    """The agents' reports read and checked on the last pass, by `ReportKey`: the informer
    cache hands a pass the same unchanged NodePartitions as the pass before, and reading and
    checking 40,000 GPUs' reports again took a second a pass. Only the reports of the latest
    pass are kept, so the memo never outgrows the fleet."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[ReportKey, tuple[GpuInfo, ...]] = {}

    def get(self, key: ReportKey | None) -> tuple[GpuInfo, ...] | None:
        """The GPUs of the report `key` names, if a pass checked it."""
        if key is None:
            return None
        with self._lock:
            return self._known.get(key)

    def keep(self, fresh: dict[ReportKey, tuple[GpuInfo, ...]]) -> None:
        """The reports a pass read and found valid, instead of the last pass's."""
        with self._lock:
            self._known = fresh


_CHECKED = CheckedReports()


def _report_key(partition: NodePartitionBody | None, product: str) -> ReportKey | None:
    """The memo's key for `partition` (None where it has no uid or resourceVersion: a
    report read from anywhere but the API server)."""
    meta = (partition or {}).get("metadata") or {}
    uid, version = meta.get("uid"), meta.get("resourceVersion")
    return (str(uid), str(version), product) if uid and version else None


def _unschedulable(pod: Any) -> bool:
    if pod.spec.node_name:
        return False  # bound to a node: waiting for something else
    conditions = pod.status.conditions or []
    scheduled = next((c for c in conditions if c.type == "PodScheduled"), None)
    if scheduled is None:
        return True  # not looked at by the scheduler yet
    if scheduled.reason != "Unschedulable":
        return False
    # The scheduler names what was missing; a pod it turned away for other reasons only
    # (CPU, taints, affinity) would not run on a new MIG instance either.
    message = scheduled.message or ""
    return not message or "nvidia.com/mig-" in message or "claim" in message


def read_inventory(api: Kube, *, catalog: Catalog | None = None) -> ClusterSnapshot:
    """A snapshot of the cluster's GPU nodes and MIG demand, DRA's included where the API
    server serves resource.k8s.io/v1."""
    catalog = catalog or default_catalog()
    partitions = {p["metadata"]["name"]: p for p in api.plans.list_node_partitions()}
    dra = read_dra(api)
    nodes, left_out, left_out_labels = [], {}, {}
    skipped: list[Skipped] = []
    checked = Checked()
    fresh: dict[ReportKey, tuple[GpuInfo, ...]] = {}
    for node in api.core.list_nodes(label_selector=MIG_CAPABLE):
        name = node.metadata.name
        labels = dict(node.metadata.labels or {})
        product = labels.get("nvidia.com/gpu.product", "")
        key = _report_key(partitions.get(name), product)
        known = _CHECKED.get(key)
        if key is not None and known is not None:
            fresh[key] = known
            nodes.append(NodeInfo(name=name, labels=labels, gpus=known))
            continue
        try:
            gpus = _gpus(partitions.get(name))
        except (ValidationError, KeyError, TypeError, ValueError) as exc:
            why = why_invalid(exc) if isinstance(exc, ValidationError) else type(exc).__name__
            left_out[name] = f"its agent's report is not valid ({why})"
            left_out_labels[name] = labels
            continue
        if gpus is None:
            left_out[name] = "its agent has not reported the GPUs (no NodePartition status)"
            left_out_labels[name] = labels
            continue
        gpus = tuple(g if g.model else g.model_copy(update={"model": product}) for g in gpus)
        reported = NodeInfo(name=name, labels=labels, gpus=gpus)
        try:
            resolve_node(reported, catalog, checked)
        except MigplanInputError as exc:  # one agent's report never stops the others' plans
            left_out[name] = (
                f"its agent's report is not valid: {str(exc).removeprefix('inventory: ')}"
            )
            left_out_labels[name] = labels
            continue
        if key is not None:
            fresh[key] = gpus
        nodes.append(reported)
    _CHECKED.keep(fresh)
    nodes = dra.nodes(nodes, left_out=left_out, left_out_labels=left_out_labels, catalog=catalog)
    pending = []
    gangs = GangReading.read(api)
    for pod in api.core.pending_pods():
        if not _unschedulable(pod):
            continue
        found = guarded(
            partial(_pending_pod, pod, dra=dra, gang=gangs.gang_of(pod)),
            skipped=skipped,
            api_version="v1",
            kind="Pod",
            namespace=pod.metadata.namespace,
            name=pod.metadata.name,
            uid=pod.metadata.uid,
        )
        if found is not None:
            pending.append(found)
    inventory = Inventory(
        namespaces=api.core.namespace_labels(),
        nodes=tuple(sorted(nodes, key=lambda n: n.name)),
        pending_pods=tuple(sorted(pending, key=lambda p: (p.namespace, p.name))),
        workloads=tuple(read_pending(api, template_claims=dra.template_claims(), skipped=skipped)),
        gangs=tuple(gangs.gangs[key] for key in sorted(gangs.gangs)),
    )
    notes = [*dra.notes(), *gangs.notes]
    return ClusterSnapshot(
        inventory=inventory,
        left_out=left_out,
        left_out_labels=left_out_labels,
        notes=(*(s.note() for s in skipped), *notes),
        skipped=tuple(skipped),
    )


def _pending_pod(pod: Any, *, dra: DraReading, gang: str) -> PendingPod | None:
    """What a pending pod asks for (None: nothing MIG); raises ValidationError when the pod
    breaks the planner's bounds."""
    extended = extended_requests(pod)
    wanted = {k: v for k, v in extended.items() if is_mig_resource(k)}
    claims = dra.pod_claims(pod, extended=extended)
    if not wanted and not claims:
        return None
    return PendingPod(
        namespace=pod.metadata.namespace,
        name=pod.metadata.name,
        requests=wanted,
        claims=tuple(claims),
        labels=dict(pod.metadata.labels or {}),
        gang=gang,
    )
