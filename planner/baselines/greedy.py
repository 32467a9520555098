"""nos-style greedy planning (nebuly-ai/nos `internal/partitioning/core/planner.go`, as
documented in shared/reference/peers.md): walk nodes in name order; on each GPU pick the valid
geometry that keeps every used instance and supplies the most still-missing demand (priority
weighted), keeping the current geometry on ties; stop when nothing is missing.

The scoring runs over the layout tables (every valid layout as arrays) rather than a Python
loop per layout; the choice, the first best layout in enumeration order, is the same.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from migplan.planner.api.inventory import GpuState
from migplan.planner.assemble import GpuKey
from migplan.planner.baselines.common import heuristic_plan, missing_demand, priority_of
from migplan.planner.demand import DemandItem
from migplan.planner.fleet import fleet_of
from migplan.planner.hardware.layout import Layout
from migplan.planner.hardware.tables import layout_table, mask_of, rows_within
from migplan.planner.plan import Plan

ALL = (1 << 64) - 1
"""Every instance of the layout table allowed."""


@dataclass(frozen=True)
class _Choices:
    """What a GPU of one situation can become while the missing profiles stay the same: its
    candidate layouts (those keeping every in-use instance, in enumeration order), what each
    adds per missing profile, and the best of them wherever no profile is missing fewer than
    a candidate adds (then the scores do not depend on how many are missing)."""

    layouts: tuple[Layout, ...]
    """The layout table's, of which `rows` are the candidates."""
    rows: npt.NDArray[np.intp]
    gained: npt.NDArray[np.int64]
    cap: npt.NDArray[np.int64]
    """Per missing profile, the most any candidate adds."""
    best: int
    """The first best candidate (its place in `rows`) while `cap` is missing or more."""
    best_score: int

    def pick(self, missing: _Missing) -> Layout | None:
        """The candidate supplying the most missing demand (priority weighted), the first
        such; None where none supplies any."""
        if not len(self.rows):
            return None
        if (missing.want >= self.cap).all():
            best, top = self.best, self.best_score
        else:
            scores = (np.minimum(self.gained, missing.want) * missing.weights).sum(axis=1)
            best = int(np.argmax(scores))
            top = int(scores[best])
        return self.layouts[self.rows[best]] if top > 0 else None


def _choices(gpu: GpuState, missing: _Missing) -> _Choices:
    model = gpu.model
    current = gpu.layout.profile_counts()
    names = (set(missing.counts) | set(current)) & set(model.profiles_by_name)
    table = layout_table(model, frozenset(names))
    rows = np.flatnonzero(rows_within(table, keep=mask_of(model, gpu.pins), allowed=ALL))
    have = np.array([current.get(p, 0) for p in missing.profiles], dtype=np.int64)
    gained = np.maximum(table.supply(missing.profiles)[rows] - have, 0)
    if not len(rows):
        return _Choices(table.layouts, rows, gained, gained.sum(axis=0), 0, 0)
    scores = (gained * missing.weights).sum(axis=1)
    best = int(np.argmax(scores))
    return _Choices(table.layouts, rows, gained, gained.max(axis=0), best, int(scores[best]))


class _Missing:
    """The instances per profile still missing as the greedy walk supplies them, also as
    arrays over the missing profiles (`profiles`, sorted) for scoring candidates."""

    def __init__(self, missing: Counter[str], weight: Callable[[str], int]) -> None:
        self.counts = missing
        self.weight = weight
        self._arrays()

    def _arrays(self) -> None:
        self.profiles = tuple(sorted(self.counts))
        self.column = {p: j for j, p in enumerate(self.profiles)}
        self.weights = np.array([self.weight(p) for p in self.profiles], dtype=np.int64)
        self.want = np.array([self.counts[p] for p in self.profiles], dtype=np.int64)

    def supply(self, added: Iterable[tuple[str, int]]) -> bool:
        """Take `added` (profile, instances) off; whether a profile stopped missing (then
        candidates must be worked out anew: they depend on which profiles are missing)."""
        for p, n in added:
            if p in self.counts:
                self.counts[p] -= min(n, self.counts[p])
                self.want[self.column[p]] = self.counts[p]
                if not self.counts[p]:
                    del self.counts[p]
        if len(self.counts) == len(self.profiles):
            return False
        self._arrays()
        return True


def greedy_targets(gpus: Sequence[GpuState], demand: Sequence[DemandItem]) -> dict[GpuKey, Layout]:
    """The layouts the nos-style greedy planner changes (never evicts).

    A GPU's candidates depend on its situation (`fleet.py`) and on which profiles are
    missing, not on how many: they are worked out once per situation until a profile stops
    missing (40,000 fragmented GPUs are 4,462 situations: 0.9 s instead of 1.25 s), and
    while every profile is missing more than any candidate adds, the best of them is known
    without scoring them again."""
    fleet = fleet_of(gpus)
    missing = _Missing(missing_demand(fleet, demand), priority_of(demand))
    targets: dict[GpuKey, Layout] = {}
    memo: dict[int, _Choices] = {}
    added: dict[tuple[int, Layout], tuple[tuple[str, int], ...]] = {}
    for key, number, gpu in sorted(zip(fleet.keys, fleet.numbers, fleet, strict=True)):
        if not missing.counts:
            break
        if not gpu.mig_enabled and gpu.whole_gpu_pod:
            continue
        choices = memo.get(number)
        if choices is None:
            choices = memo[number] = _choices(gpu, missing)
        layout = choices.pick(missing)
        if layout is None:
            continue
        targets[key] = layout
        more = added.get((number, layout))
        if more is None:
            more = added[(number, layout)] = tuple(
                (layout.profile_counts() - gpu.layout.profile_counts()).items()
            )
        if missing.supply(more):
            memo.clear()
    return targets


def greedy_plan(gpus: Sequence[GpuState], demand: Sequence[DemandItem]) -> Plan:
    """The nos-style greedy plan (never evicts)."""
    started = time.monotonic()
    targets = greedy_targets(gpus, demand)
    return heuristic_plan(
        method="greedy (nos)",
        gpus=gpus,
        targets=targets,
        demand=demand,
        seconds=time.monotonic() - started,
    )
