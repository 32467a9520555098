"""Placing bundles: pods that need several instances on one node.

The model counts a bundle's instances fleet-wide (a relaxation), so its plan may leave the
instances a bundle needs spread over nodes: two nodes with one free `1g.10gb` each serve no
pod that needs two. `place_bundles` is the repair: for each bundle still short (highest
priority first), node by node (those the plan touches already first), it gives GPUs the
layout that lets the node host the most of the bundle's pods, keeping every used instance
and, among equals, changing the GPU's planned supply least. The facade keeps the repaired
plan only where it scores better on the whole objective and the policy allows it, so this
can only help.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from migplan.planner.allocation import hostable
from migplan.planner.api.inventory import GpuState
from migplan.planner.api.spec import Disruption, PolicySpec
from migplan.planner.assemble import GpuKey, Supply, demand_supply, gpu_key
from migplan.planner.demand import DemandItem
from migplan.planner.hardware.catalog import GpuModel
from migplan.planner.hardware.layout import Instance, Layout
from migplan.planner.hardware.tables import (
    IntArray,
    layout_table,
    mask_of,
    profile_mask,
    rows_within,
)
from migplan.planner.solver.pools import allowed_new_profiles


def place_bundles(
    gpus: Sequence[GpuState],
    targets: Mapping[GpuKey, Layout],
    demand: Sequence[DemandItem],
    policy: PolicySpec,
) -> dict[GpuKey, Layout] | None:
    """`targets` with GPUs reshaped so short bundles get nodes that host their pods; None
    where no bundle is short or no reshaping hosts another pod."""
    if not any(item.per_pod for item in demand):
        return None
    rebuild = policy.whole_gpu_rebuild
    supply, allocation = demand_supply(demand, gpus, targets, rebuild=rebuild)
    short = sorted(
        (n for n, item in enumerate(demand) if item.per_pod and allocation.met[n] < item.count),
        key=lambda n: (-demand[n].priority, n),
    )
    if not short:
        return None
    reshaper = _Reshaper(gpus, targets, supply, policy)
    for n in short:
        left = demand[n].count - allocation.met[n]
        for node in reshaper.node_order():
            if left <= 0:
                break
            left -= reshaper.reshape(node, demand[n], left)
    return reshaper.placed if reshaper.changed else None


class _Reshaper:
    """The plan's targets, per node the free instances and the GPUs that may be reshaped."""

    def __init__(
        self,
        gpus: Sequence[GpuState],
        targets: Mapping[GpuKey, Layout],
        supply: Supply,
        policy: PolicySpec,
    ) -> None:
        self.placed = dict(targets)
        self.policy = policy
        self.free = supply.node_free()
        self.gpus: dict[str, list[GpuState]] = {}
        self.touched: set[str] = set()
        self.changed = False
        self._spaces: dict[
            tuple[str, frozenset[str], frozenset[Instance]],
            tuple[Sequence[Layout], tuple[str, ...], npt.NDArray[np.bool_], IntArray] | None,
        ] = {}
        for gpu in gpus:
            if targets[gpu_key(gpu)] != gpu.layout:
                self.touched.add(gpu.node)
            if self._may_reshape(gpu):
                self.gpus.setdefault(gpu.node, []).append(gpu)

    def _may_reshape(self, gpu: GpuState) -> bool:
        if not gpu.mig_enabled or gpu.whole_gpu_pod:
            return False
        rebuilt_pins = self.policy.whole_gpu_rebuild and gpu.pins
        return not (rebuilt_pins and self.policy.disruption is Disruption.NONE)

    def node_order(self) -> list[str]:
        """Nodes the plan touches first (reshaping there touches no other node)."""
        return sorted(self.gpus, key=lambda node: (node not in self.touched, node))

    def reshape(self, node: str, item: DemandItem, pods: int) -> int:
        """Reshape GPUs of `node` towards hosting `pods` more pods of bundle `item`; the
        pods it now hosts beyond what it did."""
        free = self.free[node]
        start = hostable(item.per_pod, {node: free})
        best = start
        for gpu in self.gpus[node]:
            if best >= start + pods:
                break
            current = self.placed[gpu_key(gpu)]
            layout, hosted = self._best_layout(gpu, current, item, free)
            if layout is None or hosted <= best:
                continue
            free.update(layout.profile_counts())
            free.subtract(current.profile_counts())
            self.placed[gpu_key(gpu)] = layout
            self.touched.add(node)
            self.changed = True
            best = hostable(item.per_pod, {node: free})
        return min(best, start + pods) - start

    def _best_layout(
        self, gpu: GpuState, current: Layout, item: DemandItem, free: Counter[str]
    ) -> tuple[Layout | None, int]:
        """The layout of `gpu` (keeping its used instances, new ones of allowed profiles) under
        which its node hosts the most pods of `item`, the closest to `current` among those;
        with the pods hosted."""
        model = gpu.model
        counts = current.profile_counts()
        wanted = {p for part in item.per_pod for p in part.profiles[:1]}
        names = frozenset(
            (wanted & allowed_new_profiles(model, self.policy))
            | set(counts)
            | {i.profile for i in gpu.pins}
        ) & set(model.profiles_by_name)
        space = self._space(model, names, gpu.pins)
        if space is None:
            return None, 0
        layouts, profiles, rows, supply = space
        have = np.array([counts[p] for p in profiles], dtype=np.int64)
        others = np.array([free[p] for p in profiles], dtype=np.int64) - have
        hosted = _pods(supply + others, profiles, item)
        hosted[~rows] = -1
        distance = np.abs(supply - have).sum(axis=1)
        order = np.lexsort((distance, -hosted))
        row = int(order[0])
        return layouts[row], int(hosted[row])

    def _space(
        self, model: GpuModel, names: frozenset[str], pins: Collection[Instance]
    ) -> tuple[Sequence[Layout], tuple[str, ...], npt.NDArray[np.bool_], IntArray] | None:
        """The layouts of `model` over profiles `names`, which of them keep `pins`, and what
        each supplies of `names` (sorted); None where none keeps them. Measured once per
        (model, profiles, pins): the reshaping asks 3,510 times on 2,000 fragmented GPUs."""
        key = (model.model, names, frozenset(pins))
        if key not in self._spaces:
            table = layout_table(model, names)
            profiles = tuple(sorted(names))
            rows = rows_within(table, keep=mask_of(model, pins), allowed=profile_mask(model, names))
            self._spaces[key] = (
                (table.layouts, profiles, rows, table.supply(profiles)) if rows.any() else None
            )
        return self._spaces[key]


def _pods(available: IntArray, profiles: tuple[str, ...], item: DemandItem) -> IntArray:
    """Per row of `available` (instances per profile on the node), pods of `item` it hosts,
    each part served by its first profile (a lower bound where parts have alternatives)."""
    need = Counter({part.profiles[0]: 0 for part in item.per_pod})
    for part in item.per_pod:
        need[part.profiles[0]] += part.count
    pods = np.full(len(available), np.iinfo(np.int64).max, dtype=np.int64)
    for profile, count in need.items():
        if profile not in profiles:
            return np.zeros(len(available), dtype=np.int64)
        column = np.maximum(available[:, profiles.index(profile)], 0)
        pods = np.minimum(pods, column // count)
    return pods
