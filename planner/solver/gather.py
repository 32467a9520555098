"""Gathering stranded instances: a repair for pods that need several instances on one node.

On fleets past `EXACT_NODES` the model counts a bundle's instances fleet-wide, so its plan
may leave the instances a short bundle needs stranded one or two to a node: on the bench's
multi-instance fleets, 27-30 whole-GPU `7g.40gb` instances stayed free in ones and twos while
pods needing three waited (0.5-1.9 % of the weighted demand the model counted). Two GPUs of
one model may swap targets without changing what the fleet supplies; `gather` swaps targets
so that a short bundle's spare instances pile up on fewer nodes, each swap keeping both GPUs'
in-use instances as their targets did (the evictions stay as they are) and creating only
profiles the policy allows anew (where it caps GPUs or nodes changed, only GPUs changed
either way swap). An item's swaps are kept only where the packing then hosts more weighted
demand; the facade still ranks the result on the whole objective and keeps it only where
the model can express it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from migplan.planner.allocation import spare_instances
from migplan.planner.api.inventory import GpuState
from migplan.planner.api.spec import PolicySpec
from migplan.planner.assemble import GpuKey, demand_supply, gpu_change, gpu_key
from migplan.planner.demand import DemandItem
from migplan.planner.hardware.layout import Instance, Layout
from migplan.planner.solver.pools import allowed_new_profiles


def gather(
    gpus: Sequence[GpuState],
    targets: Mapping[GpuKey, Layout],
    demand: Sequence[DemandItem],
    policy: PolicySpec,
) -> dict[GpuKey, Layout] | None:
    """`targets` with GPUs of one model swapping targets so that short bundles of one
    profile find their spare instances on fewer nodes; None where no swap hosts more demand."""
    rebuild = policy.whole_gpu_rebuild
    supply, allocation = demand_supply(demand, gpus, targets, rebuild=rebuild)
    best = allocation.weighted(demand)
    short = [
        n
        for n, item in enumerate(demand)
        if item.per_pod and allocation.met[n] < item.count and len(item.profiles) == 1
    ]
    if not short:
        return None
    trades = _Trades(gpus, dict(targets), policy)
    changed = False
    for n in sorted(short, key=lambda n: (-demand[n].per_unit, n)):
        item = demand[n]
        spare = spare_instances(demand, supply.available(), supply.bundle_nodes())
        made = len(trades.swaps)
        if not trades.pile_up(item.profile, item.per_unit, spare):
            continue
        found = demand_supply(demand, gpus, trades.targets, rebuild=rebuild)
        if found[1].weighted(demand) > best:
            supply, best, changed = found[0], found[1].weighted(demand), True
        else:
            trades.undo(since=made)
    return trades.targets if changed else None


PILE_ROUNDS = 3
"""Rounds of trades per short bundle (each tries every node with spare instances, or none
left, as a receiver)."""


@dataclass
class _Trades:
    """The targets being traded, and the GPUs of each node."""

    gpus: Sequence[GpuState]
    targets: dict[GpuKey, Layout]
    policy: PolicySpec
    on_node: dict[str, list[GpuState]] = field(default_factory=dict)
    swaps: list[tuple[GpuKey, GpuKey]] = field(default_factory=list)
    """The swaps made, in order (a receiver left short has its own undone)."""

    def __post_init__(self) -> None:
        for gpu in self.gpus:
            self.on_node.setdefault(gpu.node, []).append(gpu)

    def pile_up(self, profile: str, size: int, spare: Mapping[str, Counter[str]]) -> bool:
        """Move spare `profile` instances between nodes so that nodes holding some but fewer
        than `size` (those closest to `size` first) reach it; in later rounds, nodes left
        with none (filled, or given away) may take `size` more. Whether any trade was made."""
        left = {node: free[profile] for node, free in spare.items() if 0 < free[profile] < size}
        traded = False
        for _ in range(PILE_ROUNDS):
            receivers = sorted(left, key=lambda node: (-left[node], node))
            filled = [node for node in receivers if self._fill(profile, size, node, left)]
            if not filled:
                break
            traded = True
        return traded

    def _fill(self, profile: str, size: int, receiver: str, left: dict[str, int]) -> bool:
        """Trade spare instances from other nodes to `receiver` until it holds `size` more
        than it uses; all or nothing."""
        need = size - left[receiver]
        if not need:
            return False
        donors = sorted(
            (n for n in left if n != receiver and left[n] > 0), key=lambda n: (left[n], n)
        )
        made = len(self.swaps)
        taken: dict[str, int] = {}
        for donor in donors:
            if got := self._trade(profile, donor, receiver, min(need, left[donor])):
                taken[donor] = got
                need -= got
            if not need:
                break
        if need:
            self.undo(since=made)
            return False
        for donor, got in taken.items():
            left[donor] -= got
        left[receiver] = 0
        return True

    def _trade(self, profile: str, donor: str, receiver: str, most: int) -> int:
        """Swap the targets of GPUs on `donor` and `receiver` so that at most `most`
        instances of `profile` move to `receiver`; how many moved."""
        moved = 0
        for x in self.on_node.get(donor, ()):
            for y in self.on_node.get(receiver, ()):
                kx, ky = gpu_key(x), gpu_key(y)
                delta = self._count(kx, profile) - self._count(ky, profile)
                if 0 < delta <= most - moved and self._tradeable(x, y):
                    self._swap(kx, ky)
                    self.swaps.append((kx, ky))
                    moved += delta
                    break
            if moved == most:
                break
        return moved

    def undo(self, *, since: int) -> None:
        """Undo the swaps made after the first `since`, latest first."""
        while len(self.swaps) > since:
            self._swap(*self.swaps.pop())

    def _swap(self, kx: GpuKey, ky: GpuKey) -> None:
        self.targets[kx], self.targets[ky] = self.targets[ky], self.targets[kx]

    def _tradeable(self, x: GpuState, y: GpuState) -> bool:
        """Whether `x` and `y` may swap targets: the same model, each keeping the same in-use
        instances under the other's target (the evictions stay as they are), new instances
        only of profiles the policy allows; where the policy caps GPUs or nodes changed,
        both changed before and after (those counts stay as they are too)."""
        tx, ty = self.targets[gpu_key(x)], self.targets[gpu_key(y)]
        if x.model.model != y.model.model or tx == ty:
            return False
        if not (x.mig_enabled and y.mig_enabled) or x.whole_gpu_pod or y.whole_gpu_pod:
            return False
        capped = (
            self.policy.max_gpus_changed is not None or self.policy.max_nodes_changed is not None
        )
        if capped and (x.layout in (tx, ty) or y.layout in (tx, ty)):
            return False
        return (
            self._removed(x, ty) == self._removed(x, tx)
            and self._removed(y, tx) == self._removed(y, ty)
            and self._allowed(x, ty)
            and self._allowed(y, tx)
        )

    def _allowed(self, gpu: GpuState, after: Layout) -> bool:
        """Whether the instances `after` creates on `gpu` are of profiles the policy allows."""
        if after == gpu.layout:
            return True
        rebuilt = self.policy.whole_gpu_rebuild
        new = {i.profile for i in after.instances if rebuilt or i not in gpu.layout.instances}
        return new <= allowed_new_profiles(gpu.model, self.policy)

    def _removed(self, gpu: GpuState, after: Layout) -> frozenset[Instance]:
        """The in-use instances of `gpu` that `after` destroys."""
        if not gpu.pins:
            return frozenset()
        removed = gpu_change(gpu.layout, after, gpu.mig_enabled, self.policy.whole_gpu_rebuild)[1]
        return frozenset(i for i in removed if i in gpu.pins)

    def _count(self, key: GpuKey, profile: str) -> int:
        return self.targets[key].profile_counts()[profile]
