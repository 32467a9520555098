"""DRA `steer` mode: keep DynamicMIG's scheduler on the plan with device taints.

DynamicMIG publishes every place an instance could be (a slot) and the scheduler takes the
first free slot that fits a claim, which scatters and fragments. migplan plans layouts as
usual; a planned layout here is the set of slots the GPU should use. Every other slot of the
GPU gets a DeviceTaintRule with effect NoSchedule (taint key `migplan.io/off-plan`), so no new
claim is allocated outside the plan; slots held by running claims are never tainted unless
the plan evicts their pods. Nothing touches NVML: the driver still creates and destroys the
instances per claim.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from migplan.operator.dra.devices import DRIVER, DeviceKind, SliceDevice, slice_devices
from migplan.operator.dra.inventory import DraState
from migplan.operator.kube.dra import DRA_GROUP, TAINT_RULES
from migplan.operator.kube.seam import Kube
from migplan.planner.api.labels import label_value
from migplan.planner.hardware.layout import Layout

TAINT_KEY = "migplan.io/off-plan"
PLAN_LABEL = "migplan.io/plan"
NODE_LABEL = "migplan.io/node"
NAME_LIMIT = 253
WRITERS = 8
"""Rule writes in flight at once (one at a time: about 12 a second on the test control
plane, so 7,400 rules for 200 H100s took 10 minutes)."""


def rule_name(*, plan: str, node: str, device: str) -> str:
    """`<plan>.<node>.<device>`, or a digest of it where that is too long for a name."""
    name = f"{plan}.{node}.{device}"
    if len(name) <= NAME_LIMIT:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:20]
    return f"migplan.{digest}"


def desired_rules(
    *, plan: str, node: str, targets: Mapping[int, str], devices: Sequence[SliceDevice]
) -> dict[str, dict[str, Any]]:
    """The DeviceTaintRules that keep `node`'s GPUs (by minor) to their target layouts: one
    per slot outside the target."""
    wanted = {minor: set(Layout.parse(layout).instances) for minor, layout in targets.items()}
    rules = {}
    for d in devices:
        if d.node != node or d.kind is not DeviceKind.SLOT or d.minor not in wanted:
            continue
        if d.instance in wanted[d.minor]:
            continue
        name = rule_name(plan=plan, node=node, device=d.name)
        rules[name] = {
            "apiVersion": f"{DRA_GROUP}/{TAINT_RULES[0]}",
            "kind": "DeviceTaintRule",
            "metadata": {
                "name": name,
                "labels": {PLAN_LABEL: label_value(plan), NODE_LABEL: label_value(node)},
            },
            "spec": {
                "deviceSelector": {"driver": DRIVER, "pool": d.pool, "device": d.name},
                "taint": {"key": TAINT_KEY, "value": label_value(plan), "effect": "NoSchedule"},
            },
        }
    return rules


def node_devices(api: Kube, *, node: str) -> list[SliceDevice]:
    """The devices NVIDIA's driver publishes on `node`."""
    return slice_devices(node_slices(api, node=node))


def node_slices(api: Kube, *, node: str) -> list[dict[str, Any]]:
    """The ResourceSlices of `node` (a field selector: a fleet's slices are megabytes)."""
    return api.dra.list_objects(plural="resourceslices", field_selector=f"spec.nodeName={node}")


def observed(
    api: Kube, *, node: str, claims: Sequence[Mapping[str, Any]] | None = None
) -> tuple[dict[int, str], dict[int, dict[str, str]]]:
    """Per GPU minor of a DynamicMIG node: the instances claims hold now, and their pods
    (`claims`: every ResourceClaim, where the caller has read them already)."""
    state = DraState.of(
        slices=node_slices(api, node=node),
        claims=claims if claims is not None else api.dra.list_objects(plural="resourceclaims"),
        templates=(),
        classes=(),
    )
    layouts: dict[int, list[Any]] = {
        d.minor: []
        for d in state.devices
        if d.node == node and d.kind is DeviceKind.GPU and d.minor is not None
    }
    in_use: dict[int, dict[str, str]] = {minor: {} for minor in layouts}
    for held in state.held():
        if held.node == node and held.gpu_minor in layouts:
            layouts[held.gpu_minor].append(held.instance)
            in_use[held.gpu_minor][str(held.instance)] = held.pod
    return {m: str(Layout.of(found)) for m, found in layouts.items()}, in_use


def existing(api: Kube, *, plan: str, node: str | None = None) -> dict[str, dict[str, Any]]:
    """The plan's DeviceTaintRules (on `node`, if given), by name."""
    selector = f"{PLAN_LABEL}={label_value(plan)}"
    if node is not None:
        selector += f",{NODE_LABEL}={label_value(node)}"
    return {r["metadata"]["name"]: r for r in api.dra.list_taint_rules(label_selector=selector)}


def _each(call: Callable[[str], None], names: Sequence[str]) -> None:
    """`call` for every name, WRITERS at a time: a 200-node plan writes thousands of rules."""
    if len(names) <= 1:
        for name in names:
            call(name)
        return
    with ThreadPoolExecutor(min(WRITERS, len(names)), thread_name_prefix="taint-rules") as pool:
        list(pool.map(call, names))


def sync(
    api: Kube, *, plan: str, node: str, desired: Mapping[str, dict[str, Any]]
) -> tuple[int, int]:
    """Make the plan's rules on `node` exactly `desired`: untaint first (slots the plan now
    wants become usable before others close), then taint. (created, deleted)."""
    have = existing(api, plan=plan, node=node)
    stale = sorted(set(have) - set(desired))
    _each(lambda name: api.dra.delete_taint_rule(name=name), stale)
    missing = sorted(set(desired) - set(have))
    _each(lambda name: api.dra.create_taint_rule(body=dict(desired[name])), missing)
    return len(missing), len(stale)


def remove(api: Kube, *, plan: str) -> int:
    """Delete every DeviceTaintRule of `plan` (the plan is gone: the driver's own order
    rules again). How many."""
    names = sorted(existing(api, plan=plan))
    _each(lambda name: api.dra.delete_taint_rule(name=name), names)
    return len(names)
