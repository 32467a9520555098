"""Make one GPU's MIG instances match the desired layout, without destroying running work.

Every pass starts from what NVML reports, never from memory, so a pass interrupted at any
point (agent killed, NVML error) is finished by the next one without repeating a destroy:
instances the target keeps are never touched, a GPU instance left without its compute
instance is repaired, and destroys and creates follow from the difference that is left.

Safety: an instance the target drops is destroyed only if no process runs on it and no pod
holds it, unless the operator has evicted that pod (and its processes are gone). If any
instance of a GPU must stay for that reason, nothing on that GPU is changed in this pass.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from migplan.operator.nvml.adapter import MigModeChange, NvmlAdapter
from migplan.operator.nvml.errors import NvmlError
from migplan.planner.diff import added_instances, removed_instances
from migplan.planner.hardware.catalog import GpuModel
from migplan.planner.hardware.layout import Instance, Layout, check_layout


class GpuPhase(StrEnum):
    """Where one GPU stands after a pass."""

    CONVERGED = "Converged"
    BLOCKED = "Blocked"
    """An instance that must go is still in use; nothing was changed."""
    RESET_REQUIRED = "ResetRequired"
    """MIG mode is pending until the GPU is reset."""
    FAILED = "Failed"
    """NVML refused a step; the next pass continues from what NVML shows."""
    INVALID = "Invalid"
    """The desired layout is not valid on this GPU."""


@dataclass
class GpuOutcome:
    """The result of one pass over one GPU."""

    index: int
    desired: Layout
    before: Layout = field(default_factory=Layout)
    after: Layout = field(default_factory=Layout)
    phase: GpuPhase = GpuPhase.CONVERGED
    steps: list[str] = field(default_factory=list)
    """NVML changes made, in order (`destroy 1g.10gb@3`, `create 3g.40gb@0`, ...)."""
    reasons: list[str] = field(default_factory=list)
    stopping: bool = False
    """Blocked only by processes of pods already evicted: they are stopping, and a later pass
    goes on once they are gone."""


def _blockers(
    removed: list[Instance],
    pids: Mapping[Instance, tuple[int, ...]],
    assigned: Mapping[Instance, str],
    evicted: Collection[str],
) -> tuple[list[str], bool]:
    """Why `removed` cannot go yet, and whether only evicted pods' processes (stopping) hold
    them."""
    reasons = []
    stopping = True
    for instance in removed:
        pod = assigned.get(instance)
        if pod and pod not in evicted:
            reasons.append(f"{instance} is used by pod {pod}, which has not been evicted")
            stopping = False
        elif pids.get(instance):
            who = f" (pod {pod} was evicted; waiting for it to stop)" if pod else ""
            reasons.append(f"{instance} still runs processes {list(pids[instance])}{who}")
            stopping = stopping and pod is not None
    return reasons, stopping


def reconcile_gpu(
    nvml: NvmlAdapter,
    *,
    index: int,
    model: GpuModel,
    desired: Layout,
    assigned: Mapping[Instance, str] | None = None,
    evicted: Collection[str] = (),
    rebuild: bool = False,
    on_step: Callable[[str], None] | None = None,
) -> GpuOutcome:
    """One pass that brings GPU `index` toward `desired` (see the module doc).

    `assigned` maps instances to the pods holding them (kubelet PodResources, or the simulated
    device plugin); `evicted` lists pods the operator has evicted; `rebuild` recreates every
    instance of a changed GPU (the mig-manager semantics). `on_step` is told each change
    before it is made.
    """
    outcome = GpuOutcome(index=index, desired=desired)
    problems = check_layout(model, desired)
    if problems:
        outcome.phase = GpuPhase.INVALID
        outcome.reasons = [str(p) for p in problems]
        return outcome
    try:
        _pass(
            nvml,
            outcome,
            model=model,
            assigned=assigned or {},
            evicted=evicted,
            rebuild=rebuild,
            on_step=on_step or (lambda _: None),
        )
    except NvmlError as exc:
        outcome.phase = GpuPhase.FAILED
        outcome.reasons.append(str(exc))
        try:
            outcome.after = nvml.layout(index, model)[0]
        except NvmlError:
            outcome.after = outcome.before
    return outcome


def _pass(
    nvml: NvmlAdapter,
    outcome: GpuOutcome,
    *,
    model: GpuModel,
    assigned: Mapping[Instance, str],
    evicted: Collection[str],
    rebuild: bool,
    on_step: Callable[[str], None],
) -> None:
    index, desired = outcome.index, outcome.desired
    device = next(d for d in nvml.devices() if d.index == index)
    if not device.mig_enabled:
        if not desired:
            return
        on_step("enable MIG")
        change = nvml.set_mig_mode(index, enabled=True)
        outcome.steps.append("enable MIG")
        if change is MigModeChange.RESET_REQUIRED:
            outcome.phase = GpuPhase.RESET_REQUIRED
            outcome.reasons.append("MIG mode is pending until the GPU is reset")
            return
    actual, by_instance = nvml.layout(index, model)
    outcome.before = actual
    for instance in sorted(set(actual.instances) & set(desired.instances)):
        if not by_instance[instance].compute_instances:
            on_step(f"repair {instance}")
            if nvml.ensure_compute_instance(index, by_instance[instance].id):
                outcome.steps.append(f"repair {instance}")
    removed = removed_instances(actual, desired, rebuild=rebuild)
    added = added_instances(actual, desired, rebuild=rebuild)
    pids = {i: gi.pids for i, gi in by_instance.items()}
    blockers, stopping = _blockers(removed, pids, assigned, evicted)
    if blockers:
        outcome.phase = GpuPhase.BLOCKED
        outcome.reasons = blockers
        outcome.stopping = stopping
        outcome.after = actual
        return
    for instance in removed:
        on_step(f"destroy {instance}")
        nvml.destroy_instance(index, by_instance[instance].id)
        outcome.steps.append(f"destroy {instance}")
    for instance in added:
        profile = model.profile(instance.profile)
        on_step(f"create {instance}")
        nvml.create_instance(index, profile_id=profile.id, start=instance.start, size=profile.size)
        outcome.steps.append(f"create {instance}")
    outcome.after = nvml.layout(index, model)[0]
    if outcome.after != desired:
        outcome.phase = GpuPhase.FAILED
        outcome.reasons.append(f"NVML shows {outcome.after} after the pass, not {desired}")
