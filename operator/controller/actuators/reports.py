"""What a node's agent and its device plugin (or DRA kubelet plugin) report, as the agent
and mig-manager actuators read them."""

from __future__ import annotations

from collections import Counter

from migplan.operator.controller.actuators.base import Observed
from migplan.operator.dra import steer
from migplan.operator.dra.devices import DeviceKind
from migplan.operator.kube.quantities import mig_counts
from migplan.operator.kube.seam import Kube
from migplan.planner.api.spec import DraMode
from migplan.planner.hardware.layout import Layout
from migplan.planner.hardware.resources import resource_name


def reported(api: Kube, *, node: str) -> Observed:
    """The layouts, in-use instances and status the node's agent wrote in its NodePartition."""
    found = api.plans.get_node_partition(name=node) or {}
    status = found.get("status") or {}
    gpus = status.get("gpus") or []
    return Observed(
        layouts={int(g["index"]): str(g.get("layout", "-")) for g in gpus},
        in_use={int(g["index"]): dict(g.get("inUse") or {}) for g in gpus},
        status=status,
    )


def offered_mismatch(
    api: Kube, *, node: str, layouts: dict[int, str], dra_mode: DraMode | None
) -> str | None:
    """What the node offers to pods that NVML does not have (or the reverse), or None when
    they agree: the device plugin's allocatable, or the DRA driver's published devices."""
    if dra_mode is DraMode.STATIC:
        return _published_mismatch(api, node=node, layouts=layouts)
    want: Counter[str] = Counter()
    for layout in layouts.values():
        want.update(resource_name(i.profile) for i in Layout.parse(layout).instances)
    allocatable = api.core.get_node(name=node).status.allocatable or {}
    have = mig_counts(allocatable)
    if have == want:
        return None
    return f"waiting for the device plugin: node offers {dict(have)}, NVML has {dict(want)}"


def _published_mismatch(api: Kube, *, node: str, layouts: dict[int, str]) -> str | None:
    """Whether NVIDIA's DRA driver publishes the node's instances (static MIG devices)."""
    devices = [d for d in steer.node_devices(api, node=node) if d.kind is DeviceKind.MIG]
    have = sorted(f"{d.minor}:{d.instance}" for d in devices)
    want = sorted(
        f"{i}:{x}" for i, layout in layouts.items() for x in Layout.parse(layout).instances
    )
    if have == want:
        return None
    return f"waiting for the DRA kubelet plugin: it publishes {have}, NVML has {want}"
