"""From a GPUPartitionPlan and an inventory to a validated Plan: the whole planning job.

The same function serves the offline preview and the operator, so both see identical plans.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from migplan.planner.api.inventory import GpuState, Inventory, resolve_inventory
from migplan.planner.api.offers import Offer, resolve_offers
from migplan.planner.api.spec import Actuator, GPUPartitionPlan, PolicySpec
from migplan.planner.assemble import GpuKey, input_hash
from migplan.planner.demand import DemandItem, build_demand, left_unmet
from migplan.planner.errors import MigplanInputError
from migplan.planner.gc_pause import gc_paused
from migplan.planner.hardware.catalog import Catalog
from migplan.planner.pass_memo import PassMemo
from migplan.planner.plan import Plan, ScaleOutPlan
from migplan.planner.solver import plan as solve
from migplan.planner.solver.scale_out import plan_scale_out
from migplan.planner.validate import validate, validate_scale_out

SCALE_OUT_SHARE = 0.2
"""Share of the time limit the scale-out model gets, where the plan has spec.scaleOut: the
covered GPUs' plan gets the rest."""
SCALE_OUT_SECONDS = 0.5
"""...and at least this, so a pass that used its whole share still asks for nodes."""


@dataclass(frozen=True)
class PlanOutcome:
    """A plan with the inputs it was made and checked against."""

    plan: Plan
    gpus: list[GpuState]
    demand: list[DemandItem]
    kept: bool = False
    """The last pass's plan, taken again: the inputs were the same (`PassMemo`)."""


def covered(inventory: Inventory, manifest: GPUPartitionPlan) -> Inventory:
    """The inventory restricted to the nodes the plan's node selector matches."""
    selector = manifest.spec.node_selector
    nodes = tuple(n for n in inventory.nodes if selector.matches(n.labels))
    return inventory.model_copy(update={"nodes": nodes})


def check_policy(policy: PolicySpec, catalog: Catalog) -> None:
    """Raise MigplanInputError if allowedProfiles names an unknown model or profile."""
    for key, profiles in policy.allowed_profiles.items():
        try:
            model = catalog.model(key)
        except MigplanInputError as exc:
            raise MigplanInputError(f"spec.policy.allowedProfiles: {exc}") from None
        if model.model != key:
            raise MigplanInputError(
                f"spec.policy.allowedProfiles: use the catalog key {model.model!r}, not {key!r}"
            )
        for name in profiles:
            try:
                model.profile(name)
            except MigplanInputError as exc:
                raise MigplanInputError(f"spec.policy.allowedProfiles: {exc}") from None


def plan_fleet(
    manifest: GPUPartitionPlan,
    inventory: Inventory,
    catalog: Catalog,
    *,
    progress: Callable[[str], None] | None = None,
    started: float | None = None,
    resolved: Sequence[GpuState] | None = None,
    previous: Mapping[GpuKey, str] | None = None,
    memo: PassMemo | None = None,
) -> PlanOutcome:
    """Plan the GPUs `manifest` covers in `inventory`, then validate the plan.

    `spec.solver.timeLimitSeconds` counts from `started` (time.monotonic()) when given: the
    moment the caller began the pass, reading its inputs included, so a preview returns about
    when the limit says; from this call otherwise.

    `resolved`: every GPU of `inventory` as `resolve_inventory` gave it, where the caller has
    checked the whole inventory already (the CLI checks a whole file): the covered nodes'
    GPUs are taken from it rather than resolved again (0.6 s on 40,000 GPUs). `memo`: what
    the last pass of the same GPUPartitionPlan kept (the operator's, pass after pass): the
    nodes it resolved, reused where a node's GPUs are the same objects, and its plan, taken
    again where this pass's inputs are the same and that plan is proven best (`PassMemo`).

    `previous`: an earlier plan's layouts for these GPUs (canonical text by node and GPU
    index; `previous_layouts` reads them from a plan), which the solver may start from and
    the plan is never worse than (`solver/previous.py`).

    The mig-manager actuator rebuilds whole GPUs, so the policy is tightened to say so.
    Raises MigplanInputError for bad inputs and InvalidPlanError if the plan fails validation
    (which would be a planner bug). `progress` hears what a long pass is doing. The cyclic
    collector is paused meanwhile (`gc_pause.py`).
    """
    with gc_paused():
        return _plan_fleet(
            manifest,
            inventory,
            catalog,
            progress=progress,
            started=started,
            resolved=resolved,
            previous=previous,
            memo=memo,
        )


def _plan_fleet(
    manifest: GPUPartitionPlan,
    inventory: Inventory,
    catalog: Catalog,
    *,
    progress: Callable[[str], None] | None,
    started: float | None,
    resolved: Sequence[GpuState] | None,
    previous: Mapping[GpuKey, str] | None,
    memo: PassMemo | None,
) -> PlanOutcome:
    spec = manifest.spec
    policy = spec.policy
    check_policy(policy, catalog)
    if spec.actuator is Actuator.MIG_MANAGER and not policy.whole_gpu_rebuild:
        policy = policy.model_copy(update={"whole_gpu_rebuild": True})
    scope = covered(inventory, manifest)
    if resolved is None:
        gpus = resolve_inventory(scope, catalog, memo=None if memo is None else memo.nodes)
    else:
        names = {node.name for node in scope.nodes}
        gpus = [gpu for gpu in resolved if gpu.node in names]
    demand = build_demand(spec.demand, scope, plan=manifest.metadata.name)
    offers = None if spec.scale_out is None else resolve_offers(spec.scale_out, catalog)
    digest = input_hash(spec, scope, nodes=None if memo is None else memo.nodes.canonical)
    kept = None if memo is None else memo.kept(digest=digest, catalog=catalog, previous=previous)
    if kept is not None:
        if progress:
            progress("the inputs are the last pass's: its plan, proven best, kept")
        validate(kept, gpus, demand, policy)
        if kept.scale_out is not None and offers is not None and spec.scale_out is not None:
            left = left_unmet(demand, [r.met for r in kept.demand])
            validate_scale_out(kept.scale_out, left, offers, budget=spec.scale_out.max_nodes)
        return PlanOutcome(plan=kept, gpus=gpus, demand=demand, kept=True)
    limit = spec.solver.time_limit_seconds
    started = time.monotonic() if started is None else started
    result = solve(
        gpus,
        demand,
        policy,
        time_limit=limit if offers is None else limit * (1 - SCALE_OUT_SHARE),
        workers=spec.solver.resolved_workers(),
        deterministic=spec.solver.deterministic,
        progress=progress,
        digest=digest,
        started=started,
        previous=previous,
    )
    validate(result, gpus, demand, policy)
    update: dict[str, object] = {"name": manifest.metadata.name}
    if offers is not None and spec.scale_out is not None:
        seconds = max(started + limit - time.monotonic(), SCALE_OUT_SECONDS)
        update["scale_out"] = _scale_out(
            result,
            demand=demand,
            offers=offers,
            policy=policy,
            budget=spec.scale_out.max_nodes,
            seconds=seconds,
        )
    named = result.model_copy(update=update)
    if memo is not None:
        memo.remember(digest=digest, catalog=catalog, plan=named)
    return PlanOutcome(plan=named, gpus=gpus, demand=demand)


def _scale_out(
    result: Plan,
    *,
    demand: Sequence[DemandItem],
    offers: Sequence[Offer],
    policy: PolicySpec,
    budget: int | None,
    seconds: float,
) -> ScaleOutPlan:
    """The new nodes for what `result` leaves of the pending demand, validated."""
    left = left_unmet(demand, [r.met for r in result.demand])
    scale = plan_scale_out(offers, left, policy, budget=budget, time_limit=seconds)
    validate_scale_out(scale, left, offers, budget=budget)
    return scale
