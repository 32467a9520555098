"""A plan as an NVIDIA mig-parted configuration (`version: v1`, `mig-configs`).

mig-parted (and the GPU Operator's mig-manager, which runs it) takes per node a list of GPU
groups, each with `devices` (indices or `all`), `mig-enabled` and `mig-devices` (profile ->
count). It places instances itself and rebuilds every instance of a changed GPU, so the
counts are what carries over, not migplan's placements; plan with `wholeGpuRebuild` (the
mig-manager actuator does) so the planner drains what mig-parted will destroy.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any

from migplan.planner.errors import MigplanInputError
from migplan.planner.hardware.catalog import GpuModel
from migplan.planner.hardware.layout import Instance, Layout, is_valid
from migplan.planner.plan import Plan

CONFIG_PREFIX = "migplan-"


LABEL_VALUE_MAX = 63
"""Kubernetes label values: at most 63 characters, alphanumeric at both ends."""
NODE_PART_MAX = 26
NODE_HASH_LENGTH = 10
"""40 bits of the node name's sha256: names stay unique across any real fleet."""
DIGEST_LENGTH = 8


def _node_hash(node: str) -> str:
    return hashlib.sha256(node.encode()).hexdigest()[:NODE_HASH_LENGTH]


def config_name(node: str, entries: list[dict[str, Any]] | None = None, *, attempt: int = 0) -> str:
    """The mig-configs entry for `node` (what `nvidia.com/mig.config` is set to).

    Without `entries` (an export for `nvidia-mig-parted apply`), `migplan-<node>` when that
    is a valid label value. With `entries` (the mig-manager actuator) it is always
    `migplan-<node, cut to 26>-<node hash>-<digest of entries>`: at most 54 characters,
    so a valid label value for any node name; the node hash tells whose entry it is (a name
    prefix would also match other nodes: `gpu` is a prefix of `gpu-2`); the digest makes
    every new target a new label value (mig-manager acts on label changes, not on edits of a
    config it already applied). `attempt` > 0 gives the same entries a fresh name, for a
    retry.
    """
    plain = CONFIG_PREFIX + node
    if entries is None and len(plain) <= LABEL_VALUE_MAX:
        return plain
    name = f"{plain[: len(CONFIG_PREFIX) + NODE_PART_MAX]}-{_node_hash(node)}"
    if entries is None:
        return name
    text = json.dumps(entries, sort_keys=True) + (f"#{attempt}" if attempt else "")
    digest = hashlib.sha256(text.encode()).hexdigest()
    return f"{name}-{digest[:DIGEST_LENGTH]}"


def owned_by(name: str, node: str) -> bool:
    """Whether mig-configs entry `name` is one the actuator wrote for `node`."""
    parts = name.rsplit("-", 2)
    return (
        name.startswith(CONFIG_PREFIX)
        and len(parts) == 3
        and parts[1] == _node_hash(node)
        and len(parts[2]) == DIGEST_LENGTH
    )


def first_fit_layout(model: GpuModel, counts: dict[str, int]) -> Layout:
    """A layout with `counts` instances placed as mig-parted does: larger profiles first,
    each at its first free allowed start. Raises MigplanInputError if they do not fit."""
    layout = Layout()
    wanted = sorted(counts.items(), key=lambda item: -model.profile(item[0]).size)
    for name, count in wanted:
        profile = model.profile(name)
        for _ in range(count):
            for start in profile.starts:
                candidate = layout.with_instance(Instance(profile=name, start=start))
                if is_valid(model, candidate):
                    layout = candidate
                    break
            else:
                raise MigplanInputError(f"{dict(counts)} does not fit on {model.model}")
    return layout


def _counts(layout: str) -> dict[str, int]:
    counts = Counter(i.profile for i in Layout.parse(layout).instances)
    return dict(sorted(counts.items()))


def node_config(targets: dict[int, str]) -> list[dict[str, Any]]:
    """mig-parted entries for one node: GPU index -> target layout, GPUs with equal counts
    grouped (in index order)."""
    groups: dict[tuple[tuple[str, int], ...], list[int]] = {}
    for index, layout in sorted(targets.items()):
        groups.setdefault(tuple(_counts(layout).items()), []).append(index)
    return [
        {"devices": devices, "mig-enabled": True, "mig-devices": dict(counts)}
        for counts, devices in sorted(groups.items(), key=lambda item: item[1][0])
    ]


def mig_parted_config(plan: Plan) -> dict[str, Any]:
    """One mig-configs entry per node of the plan, with every GPU's target counts."""
    nodes: dict[str, dict[int, str]] = {}
    for gpu in plan.gpus:
        nodes.setdefault(gpu.node, {})[gpu.gpu] = gpu.after
    return {
        "version": "v1",
        "mig-configs": {
            config_name(node): node_config(targets) for node, targets in sorted(nodes.items())
        },
    }
