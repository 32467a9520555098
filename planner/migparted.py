"""A plan as an NVIDIA mig-parted configuration (`version: v1`, `mig-configs`).

mig-parted (and the GPU Operator's mig-manager, which runs it) takes per node a list of GPU
groups, each with `devices` (indices or `all`), `mig-enabled` and `mig-devices` (profile ->
count). It places instances itself and rebuilds every instance of a changed GPU, so the
counts are what carries over, not migplan's placements; plan with `wholeGpuRebuild` (the
mig-manager actuator does) so the planner drains what mig-parted will destroy.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from migplan.planner.layout import Layout
from migplan.planner.plan import Plan

CONFIG_PREFIX = "migplan-"


def config_name(node: str) -> str:
    """The mig-configs entry for `node` (what `nvidia.com/mig.config` is set to)."""
    return CONFIG_PREFIX + node


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
