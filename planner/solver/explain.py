"""Reasons a person understands for demand the plan does not meet."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from migplan.planner.api.inventory import GpuState
from migplan.planner.api.spec import Disruption, PolicySpec
from migplan.planner.demand import DemandItem, DemandKind
from migplan.planner.hardware.catalog import GpuModel
from migplan.planner.hardware.enumeration import enumerate_layouts
from migplan.planner.solver.classes import GpuClass
from migplan.planner.solver.pools import PoolSet, allowed_new_profiles


def _most(model: GpuModel, profile: str) -> int:
    """Most instances of `profile` one GPU of `model` can hold."""
    return max(
        layout.profile_counts()[profile] for layout in enumerate_layouts(model, profiles=[profile])
    )


class Explainer:
    """Works out why an item is short, from the classes and their candidate layouts."""

    def __init__(
        self,
        *,
        gpus: Sequence[GpuState],
        classes: Sequence[GpuClass],
        pools: PoolSet,
        policy: PolicySpec,
    ) -> None:
        self._gpus = gpus
        self._classes = classes
        self._pools = pools
        self._policy = policy
        self._capacity: dict[str, int] = {}
        self._in_use: dict[str, int] = {}
        self._census: tuple[dict[str, GpuModel], Counter[str]] | None = None
        self.limits_reached: list[str] = []
        """Policy limits the chosen plan sits at (set once the plan is known)."""

    def note_plan(self, *, gpus_changed: int, nodes_touched: int) -> None:
        """Record which policy limits the chosen plan reaches."""
        policy = self._policy
        self.limits_reached = [
            f"{name}={limit}"
            for name, limit, used in (
                ("maxGpusChanged", policy.max_gpus_changed, gpus_changed),
                ("maxNodesChanged", policy.max_nodes_changed, nodes_touched),
            )
            if limit is not None and used >= limit
        ]

    def capacity(self, profile: str) -> int:
        """Most instances of `profile` the covered GPUs could hold if nothing else were wanted."""
        if profile not in self._pools.profiles:
            return 0
        if profile not in self._capacity:  # asked once per unmet gang: hundreds of times
            self._capacity[profile] = sum(
                cls.size * self._pools.most(c, profile) for c, cls in enumerate(self._classes)
            )
        return self._capacity[profile]

    def _models(self) -> tuple[dict[str, GpuModel], Counter[str]]:
        """The covered GPU models by catalog key, sorted, and the GPUs of each: counted once
        (each unmet item asked again, walking 40,000 GPUs twice: 10 ms an item, 84 ms for the
        operator bench's eight against 12 ms once)."""
        if self._census is None:
            gpus_per_model = Counter(g.model.model for g in self._gpus)
            by_model = {g.model.model: g.model for g in self._gpus}
            self._census = ({m: by_model[m] for m in sorted(by_model)}, gpus_per_model)
        return self._census

    def capacity_without_pins(self, profile: str) -> int:
        """Most instances of `profile` the covered GPUs could hold if they were all empty."""
        per_model, gpus_per_model = self._models()
        return sum(
            gpus_per_model[key] * _most(model, profile)
            for key, model in per_model.items()
            if profile in model.profiles_by_name
        )

    def in_use(self, profile: str) -> int:
        """Instances of `profile` in use now."""
        if profile not in self._in_use:
            self._in_use[profile] = sum(
                cls.size * sum(i.profile == profile for i in cls.pins) for cls in self._classes
            )
        return self._in_use[profile]

    def __call__(self, item: DemandItem, met: int) -> str | None:
        """Why `item` got only `met` of its count."""
        short = item.count - met
        names = " or ".join(item.profiles)
        what = f"{short} x {names}"
        if not self._gpus:
            return f"{what}: the plan's node selector covers no GPU node"
        if item.per_pod:
            return self._bundle(item, short)
        by_model = self._models()[0]
        models = list(by_model)
        offering = [m for m in models if set(item.profiles) & set(by_model[m].profiles_by_name)]
        if not offering:
            what_has = "this profile" if not item.alternatives else "any of these profiles"
            return f"{what}: no covered GPU model has {what_has} (covered: {', '.join(models)})"
        allowed = [
            m
            for m in offering
            if set(item.profiles) & allowed_new_profiles(by_model[m], self._policy)
        ]
        if not allowed:
            return f"{what}: policy.allowedProfiles excludes it on {', '.join(offering)}"
        # Alternatives share slices, so their capacities add up to an upper bound only.
        capacity = sum(self.capacity(p) for p in item.profiles)
        if item.kind is DemandKind.FREE:
            capacity -= sum(self.in_use(p) for p in item.profiles)
        if capacity < item.count:
            blocked = (
                " with in-use instances kept in place (policy disruption: none)"
                if self._policy.disruption is Disruption.NONE
                and any(self.capacity_without_pins(p) > self.capacity(p) for p in item.profiles)
                else ""
            )
            extra = "free " if item.kind is DemandKind.FREE else ""
            return (
                f"{what}: at most {max(capacity, 0)} {extra}instances of {names} fit "
                f"on the covered {', '.join(allowed)} GPUs{blocked}"
            )
        reason = (
            f"{what}: the slices it needs go to other demand of equal or higher weight "
            "(priority x compute slices)"
        )
        if self.limits_reached:
            reason += f"; the plan is at policy limit {' and '.join(self.limits_reached)}"
        return reason

    def gang(self, items: Sequence[DemandItem]) -> str:
        """Why the gang of `items` is not met: too few pods pending, more pods than the
        covered GPUs can hold (single-instance items, grouped by the profiles that serve
        them), or others of equal or higher weight taking the slices."""
        least = items[0].gang_minimum
        pending = sum(i.count for i in items)
        if pending < least:
            return f"it needs {least} pods together, {pending} are pending"
        fit = 0
        by_profiles: dict[tuple[str, ...], int] = {}
        for item in items:
            if item.per_pod:
                fit += item.count
                continue
            by_profiles[item.profiles] = by_profiles.get(item.profiles, 0) + item.count
        for profiles, count in by_profiles.items():
            capacity = sum(self.capacity(p) - self.in_use(p) for p in profiles)
            fit += min(count, max(capacity, 0))
        if fit < least:
            return f"at most {fit} of its pods fit on the covered GPUs, {least} are needed"
        reason = (
            "its pods fit only with slices that go to other demand of equal or higher weight "
            "(priority x compute slices)"
        )
        if any(i.per_pod for i in items):
            reason = (
                "its pods that need several instances on one node do not all find such a "
                "node, or " + reason.removeprefix("its pods fit only with ")
            )
        if self.limits_reached:
            reason += f"; the plan is at policy limit {' and '.join(self.limits_reached)}"
        return reason

    def _bundle(self, item: DemandItem, short: int) -> str:
        """Why pods that need several instances on one node are short."""
        what = f"{short} pods of {item.shape}"
        by_model = self._models()[0]
        for part in item.per_pod:
            usable = [
                m
                for m, model in sorted(by_model.items())
                if set(part.profiles) & allowed_new_profiles(model, self._policy)
            ]
            if not usable:
                return (
                    f"{what}: no covered GPU model offers {part.text} "
                    "(or policy.allowedProfiles excludes it)"
                )
        return (
            f"{what}: each pod needs its {item.per_unit} instances on one node; the free "
            "instances the plan leaves are spread over nodes or go to other demand of equal "
            "or higher weight (priority x compute slices)"
        )
