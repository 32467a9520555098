"""The executable specification of a correct plan, independent of how the plan was found.

`validate(plan, gpus, demand, policy)` lists every way the plan breaks the rules; tests run it
on every plan they make and the operator runs it before anything is applied.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain

from migplan.planner.allocation import EXACT_NODES, allocate, hostable, take_scattered
from migplan.planner.api.inventory import GpuState
from migplan.planner.api.offers import Offer
from migplan.planner.api.spec import Disruption, PolicySpec
from migplan.planner.demand import (
    DemandItem,
    DemandKind,
    demand_weight,
    gang_met,
    gang_problem,
    gangs_of,
)
from migplan.planner.errors import MigplanInputError
from migplan.planner.hardware.catalog import GpuModel
from migplan.planner.hardware.layout import Instance, Layout, check_layout
from migplan.planner.plan import (
    DemandResult,
    GpuPlan,
    Operation,
    OperationKind,
    Plan,
    ScaleOutPlan,
)


class InvalidPlanError(RuntimeError):
    """A plan broke the specification (a planner bug); the message lists how."""


@dataclass(frozen=True)
class Problem:
    """One way a plan is wrong."""

    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


class _Replay:
    """A GPU's instances under NVML's rules while operations are applied one by one."""

    def __init__(self, model: GpuModel, gpu: GpuState) -> None:
        self.model = model
        self.instances: dict[Instance, bool] = dict.fromkeys(gpu.layout.instances, True)
        self.mig = gpu.mig_enabled
        self.creating = False
        self.errors: list[str] = []

    def apply(self, n: int, op: Operation) -> None:
        """Apply operation number `n`, recording a refusal instead of raising."""
        if op.kind is OperationKind.ENABLE_MIG:
            if n != 0 or self.mig:
                self.errors.append("enable-mig must come first, and only when MIG is off")
            self.mig = True
            return
        if not self.mig:
            self.errors.append(f"{op}: MIG is not enabled")
            return
        try:
            instance = Instance.parse(op.instance or "")
        except MigplanInputError:
            self.errors.append(f"{op}: not an instance")
            return
        if op.kind in (OperationKind.DESTROY_CI, OperationKind.DESTROY_GI):
            self._destroy(op, instance)
        else:
            self._create(op, instance)

    def _destroy(self, op: Operation, instance: Instance) -> None:
        has_ci = self.instances.get(instance)
        if self.creating:
            self.errors.append(f"{op}: destroys must all come before the first create")
        elif op.kind is OperationKind.DESTROY_CI:
            if not has_ci:
                self.errors.append(f"{op}: no compute instance there")
            else:
                self.instances[instance] = False
        elif has_ci is None:
            self.errors.append(f"{op}: no GPU instance there")
        elif has_ci:
            self.errors.append(f"{op}: its compute instance must be destroyed first")
        else:
            del self.instances[instance]

    def _create(self, op: Operation, instance: Instance) -> None:
        if op.kind is OperationKind.CREATE_GI:
            self.creating = True
            grown = Layout.of([*self.instances, instance])
            if instance in self.instances or check_layout(self.model, grown):
                self.errors.append(f"{op}: does not fit next to {self.layout()}")
            else:
                self.instances[instance] = False
        elif self.instances.get(instance, True):
            self.errors.append(f"{op}: needs its GPU instance, without a compute instance")
        else:
            self.instances[instance] = True

    def layout(self) -> Layout:
        """The instances now."""
        return Layout.of(list(self.instances))


def _replay(model: GpuModel, gpu: GpuState, ops: Sequence[Operation]) -> tuple[Layout, list[str]]:
    """Apply `ops` to the GPU's current layout as NVML would; the result and any refusals."""
    replay = _Replay(model, gpu)
    for n, op in enumerate(ops):
        replay.apply(n, op)
    missing_ci = [str(i) for i, has_ci in replay.instances.items() if not has_ci]
    if missing_ci:
        replay.errors.append(f"instances left without a compute instance: {', '.join(missing_ci)}")
    return replay.layout(), replay.errors


OpsKey = tuple[tuple[OperationKind, str | None], ...]
CaseKey = tuple[str, Layout, bool, str, str, str, OpsKey]
"""What the checks of a GPU's plan read but for its pods: the GPU's model, layout and MIG
mode, and the plan's model, layouts and operations."""


@dataclass(frozen=True)
class _Case:
    """The problems a GPU's plan has whoever its pods are, and the instances it destroys."""

    problems: tuple[str, ...]
    destroyed: frozenset[Instance]
    has_instances: bool
    """Whether the target layout holds any instance (a whole-GPU pod must then go)."""


@dataclass
class _Memo:
    """The checks that depend on a GPU's model, layouts and operations alone, once per
    distinct case (policy is the call's): 40,000 GPUs are a few thousand cases. Replaying the
    operations and checking the target once per case saved 1 s there; every check but the
    pods' once per case, the GPUs' checks took 0.16 s instead of 0.29 s."""

    policy: PolicySpec
    cases: dict[CaseKey, _Case] = field(default_factory=dict)
    layouts: dict[tuple[str, Layout], list[str]] = field(default_factory=dict)

    def layout_problems(self, model: GpuModel, layout: Layout) -> list[str]:
        key = (model.model, layout)
        if key not in self.layouts:
            self.layouts[key] = [
                f"target layout {layout} is not valid: {v}" for v in check_layout(model, layout)
            ]
        return self.layouts[key]

    def case(self, gpu: GpuState, gp: GpuPlan) -> _Case:
        ops = tuple((op.kind, op.instance) for op in gp.operations)
        key = (gpu.model.model, gpu.layout, gpu.mig_enabled, gp.model, gp.before, gp.after, ops)
        found = self.cases.get(key)
        if found is None:
            found = self.cases[key] = _check_case(gpu, gp, self)
        return found


def _check_case(gpu: GpuState, gp: GpuPlan, memo: _Memo) -> _Case:
    policy = memo.policy
    problems: list[str] = []
    model = gpu.model
    if gp.model != model.model or gp.before != str(gpu.layout):
        problems.append(
            f"plan says {gp.model} {gp.before}, inventory has {model.model} {gpu.layout}"
        )
    after = Layout.parse(gp.after)
    problems += memo.layout_problems(model, after)
    allowed = policy.allowed_profiles.get(model.model)
    if allowed is not None:
        problems += [
            f"new instance {instance} uses a profile policy.allowedProfiles excludes"
            for instance in set(after.instances) - set(gpu.layout.instances)
            if instance.profile not in allowed
        ]
    result, refusals = _replay(model, gpu, gp.operations)
    problems += refusals
    if result != after:
        problems.append(f"operations lead to {result}, not to the target {after}")
    destroyed = frozenset(
        Instance.parse(op.instance or "")
        for op in gp.operations
        if op.kind is OperationKind.DESTROY_GI
    )
    if policy.whole_gpu_rebuild and gp.operations and destroyed != set(gpu.layout.instances):
        problems.append("whole-GPU rebuild: a changed GPU must destroy every instance")
    return _Case(problems=tuple(problems), destroyed=destroyed, has_instances=bool(after))


def _check_gpu(gpu: GpuState, gp: GpuPlan, memo: _Memo) -> list[str]:
    case = memo.case(gpu, gp)
    problems = list(case.problems)
    must_go = gpu.holders(case.destroyed) if case.destroyed else []
    if gpu.whole_gpu_pod and case.has_instances:
        must_go.append(gpu.whole_gpu_pod)
    if sorted(gp.evict) != sorted(must_go):
        problems.append(
            f"evicts {list(gp.evict)} but destroying in-use instances needs exactly {must_go}"
        )
    if must_go and memo.policy.disruption is not Disruption.EVICT:
        problems.append(f"destroys instances in use by {must_go} under disruption: none")
    return problems


def _served(item: DemandItem, result: DemandResult) -> tuple[dict[str, int], list[str]]:
    """What each profile gave an item, as its result reports it, and what is wrong there."""
    if not item.alternatives and not item.per_pod:
        if result.served is not None:
            return {}, ["reports served per profile for an item of one profile"]
        return {item.profile: result.met}, []
    served = result.served or {}
    problems = [
        f"served by {p}, which is not one of its profiles" for p in served if p not in item.profiles
    ]
    instances = result.met * item.per_unit
    if any(n < 0 for n in served.values()) or sum(served.values()) != instances:
        problems.append(f"served {served} does not add up to {instances} instances met")
    return served, problems


def _targets_supply(
    plan: Plan, gpus: Sequence[GpuState]
) -> tuple[Counter[str], Counter[str], dict[str, Counter[str]]]:
    """Per profile: instances in the targets and in use now; per node: instances free for
    pending pods, once evicted pods are rehosted (where `allocation` rehosts them)."""
    pinned: Counter[str] = Counter()
    evicted: Counter[str] = Counter()
    # The profiles listed GPU by GPU and counted once per node by Counter's C loop: a fleet
    # repeats a few hundred layouts, and counting instance by instance took 0.14-0.19 s of
    # the 0.32-0.42 s that validating 40,000 GPUs took.
    profiles: dict[str, list[str]] = {}
    listed: dict[str, list[str]] = {}
    for gp in plan.gpus:
        after = profiles.get(gp.after)
        if after is None:
            after = profiles[gp.after] = [i.profile for i in Layout.parse(gp.after).instances]
        listed.setdefault(gp.node, []).extend(after)
    nodes = {node: Counter(names) for node, names in listed.items()}
    total = Counter(chain.from_iterable(profiles[gp.after] for gp in plan.gpus))
    for gpu, gp in zip(gpus, plan.gpus, strict=True):
        for instance, pod in gpu.pins.items():
            pinned[instance.profile] += 1
            if pod in gp.evict:
                evicted[instance.profile] += 1
            else:
                nodes[gp.node][instance.profile] -= 1
    if len(nodes) > EXACT_NODES:  # as `Supply.bundle_nodes`
        for profile, count in sorted(evicted.items()):
            take_scattered(nodes, profile, count)
    return total, pinned, nodes


def _bundle_hosted(
    item: DemandItem, result: DemandResult, nodes: dict[str, Counter[str]]
) -> list[str]:
    """A bundle's pods each need a node that holds all their instances."""
    if not item.per_pod or result.met <= (hosts := hostable(item.per_pod, nodes)):
        return []
    return [
        f"reports {result.met} pods of {item.shape} met; one node each, the targets host {hosts}"
    ]


def _against_allocation(
    demand: Sequence[DemandItem],
    plan: Plan,
    could: Sequence[int],
    *,
    short: tuple[int, int] | None,
) -> list[Problem]:
    """Items the plan reports below the allocation the targets allow (when its weighted
    demand met falls `short`: (reported, possible)), and bundles reported above it."""
    found = []
    for item, result, best in zip(demand, plan.demand, could, strict=True):
        where = f"demand {result.resource} ({item.kind.value})"
        if short and result.met < best:
            found.append(
                Problem(
                    where,
                    f"reports {result.met} met; the targets allow {best} for {item.count} "
                    f"requested (weighted demand met {short[0]}, possible {short[1]})",
                )
            )
        if item.per_pod and result.met > best:
            found.append(
                Problem(
                    where,
                    f"reports {result.met} pods of {item.shape} met; placed one node each, "
                    f"the targets host {best} beside the other demand",
                )
            )
    return found


def _check_gangs(plan: Plan, demand: Sequence[DemandItem]) -> list[Problem]:
    """Each gang met all together or not at all, and reported as its items say."""
    met = [r.met for r in plan.demand]
    groups = gangs_of(demand)
    problems = [
        Problem("demand", wrong)
        for members in groups.values()
        if (wrong := gang_problem(demand, met, members))
    ]
    reported = {g.name: g for g in plan.gangs}
    if set(reported) != set(groups) or len(plan.gangs) != len(groups):
        return [
            *problems,
            Problem("gangs", f"reports {sorted(reported)}, the demand has {sorted(groups)}"),
        ]
    for gang, members in groups.items():
        result = reported[gang]
        pods = sum(met[n] for n in members)
        admitted = gang_met(demand, met, members)
        if (result.met, result.admitted) != (pods, admitted):
            problems.append(
                Problem(
                    f"gang {gang}",
                    f"reports {result.met} pods met (admitted: {result.admitted}); its items "
                    f"say {pods} (admitted: {admitted})",
                )
            )
    return problems


def _check_demand(
    plan: Plan, gpus: Sequence[GpuState], demand: Sequence[DemandItem]
) -> list[Problem]:
    problems = []
    if len(plan.demand) != len(demand):
        return [Problem("demand", f"{len(plan.demand)} results for {len(demand)} items")]
    total, pinned, nodes = _targets_supply(plan, gpus)
    available = {
        DemandKind.TOTAL: total,
        DemandKind.FREE: Counter({p: max(total[p] - pinned[p], 0) for p in total}),
    }
    taken: dict[DemandKind, Counter[str]] = {kind: Counter() for kind in DemandKind}
    for item, result in zip(demand, plan.demand, strict=True):
        where = f"demand {result.resource} ({item.kind.value})"
        as_reported = (
            result.profile,
            tuple(result.alternatives),
            result.requested,
            tuple((p.profiles, p.count) for p in result.per_pod),
        )
        if as_reported != (
            item.profile,
            item.alternatives,
            item.count,
            tuple((p.profiles, p.count) for p in item.per_pod),
        ):
            problems.append(Problem(where, "does not match the demand item it reports"))
        problems += [Problem(where, message) for message in _bundle_hosted(item, result, nodes)]
        if not 0 <= result.met <= result.requested:
            problems.append(Problem(where, f"met {result.met} of {result.requested}"))
        served, wrong = _served(item, result)
        problems += [Problem(where, message) for message in wrong]
        taken[item.kind].update(served)
    for kind in DemandKind:
        for profile, count in sorted(taken[kind].items()):
            if count > available[kind][profile]:
                problems.append(
                    Problem(
                        f"demand {profile} ({kind.value})",
                        f"reports {count} met; the targets provide {available[kind][profile]}",
                    )
                )
    problems += _check_gangs(plan, demand)
    best = allocate(demand, available, nodes=nodes if any(i.per_pod for i in demand) else None)
    reported = sum(r.met * demand_weight(i) for i, r in zip(demand, plan.demand, strict=True))
    possible = best.weighted(demand)
    short = (reported, possible) if not problems and reported < possible else None
    problems += _against_allocation(demand, plan, best.met, short=short)
    if any(gp.evict for gp in plan.gpus):
        problems += [
            Problem(
                f"profile {profile}",
                f"{count} pods use it but the targets hold only "
                f"{total[profile]}: evicted pods could not be rescheduled",
            )
            for profile, count in sorted(pinned.items())
            if total[profile] < count
        ]
    return problems


def problems_of(
    plan: Plan, gpus: Sequence[GpuState], demand: Sequence[DemandItem], policy: PolicySpec
) -> list[Problem]:
    """Every rule `plan` breaks for these inputs; empty when it is correct."""
    planned = [(g.node, g.gpu) for g in plan.gpus]
    expected = [(g.node, g.index) for g in gpus]
    if planned != expected:
        return [Problem("plan", f"covers GPUs {planned}, the inventory has {expected}")]
    memo = _Memo(policy)
    problems = [
        Problem(f"{gpu.name}", message)
        for gpu, gp in zip(gpus, plan.gpus, strict=True)
        for message in _check_gpu(gpu, gp, memo)
    ]
    changed = [gp for gp in plan.gpus if gp.operations]
    nodes = {gp.node for gp in changed}
    if policy.max_gpus_changed is not None and len(changed) > policy.max_gpus_changed:
        problems.append(
            Problem(
                "policy", f"{len(changed)} GPUs change, maxGpusChanged is {policy.max_gpus_changed}"
            )
        )
    if policy.max_nodes_changed is not None and len(nodes) > policy.max_nodes_changed:
        problems.append(
            Problem(
                "policy",
                f"{len(nodes)} nodes change, maxNodesChanged is {policy.max_nodes_changed}",
            )
        )
    summary = plan.summary
    actual = (
        len(plan.gpus),
        len(changed),
        len(nodes),
        len({p for gp in plan.gpus for p in gp.evict}),
    )
    if (summary.gpus, summary.gpus_changed, summary.nodes_touched, summary.evictions) != actual:
        problems.append(Problem("summary", f"does not match the GPUs: {summary}"))
    return problems + _check_demand(plan, gpus, demand)


def validate(
    plan: Plan, gpus: Sequence[GpuState], demand: Sequence[DemandItem], policy: PolicySpec
) -> None:
    """Raise InvalidPlanError listing every problem of `plan`; return quietly if it is sound."""
    problems = problems_of(plan, gpus, demand, policy)
    if problems:
        raise InvalidPlanError(f"invalid plan: {listing(problems)}")


def _check_new_nodes(
    scale: ScaleOutPlan, offers: Sequence[Offer], budget: int | None
) -> list[Problem]:
    """Each new node of a known offer, with one valid layout per GPU of its model; no offer
    past its maximum, nor all past `budget`; the cost theirs."""
    by_name = {offer.name: offer for offer in offers}
    problems = []
    for node in scale.nodes:
        where = f"scaleOut node {node.name}"
        offer = by_name.get(node.offer)
        if offer is None or node.model != offer.model.model or len(node.gpus) != offer.gpus:
            problems.append(
                Problem(
                    where,
                    f"is no node of an offer ({node.offer}, {node.model}, {len(node.gpus)} GPUs)",
                )
            )
            continue
        for k, text in enumerate(node.gpus):
            try:
                violations = check_layout(offer.model, Layout.parse(text))
            except MigplanInputError as exc:
                violations = [str(exc)]  # type: ignore[list-item]
            problems += [Problem(f"{where} gpu {k}", str(v)) for v in violations]
    counts = scale.offer_counts()
    for name, count in counts.items():
        if name in by_name and count > by_name[name].max_nodes:
            problems.append(
                Problem("scaleOut", f"{count} nodes of {name}, at most {by_name[name].max_nodes}")
            )
    if budget is not None and len(scale.nodes) > budget:
        problems.append(Problem("scaleOut", f"{len(scale.nodes)} new nodes, maxNodes is {budget}"))
    cost = sum(by_name[n.offer].cost for n in scale.nodes if n.offer in by_name)
    if scale.cost != cost:
        problems.append(Problem("scaleOut", f"cost {scale.cost}, the nodes cost {cost}"))
    return problems


def _check_hosting(
    scale: ScaleOutPlan, left: Sequence[tuple[int, DemandItem]]
) -> tuple[list[Problem], Counter[int]]:
    """Each node hosts demand that is left, each unit with every part of what it needs,
    within the node's instances; the units met per item."""
    items = dict(left)
    problems = []
    met: Counter[int] = Counter()
    for node in scale.nodes:
        where = f"scaleOut node {node.name}"
        have: Counter[str] = Counter()
        for text in node.gpus:
            try:
                have.update(Layout.parse(text).profile_counts())
            except MigplanInputError:
                continue  # named by _check_new_nodes
        taken: Counter[str] = Counter()
        for hosted in node.hosts:
            item = items.get(hosted.demand)
            if item is None:
                problems.append(
                    Problem(where, f"hosts demand {hosted.demand}, which is not left unmet")
                )
                continue
            met[hosted.demand] += hosted.units
            if len(hosted.parts) != len(item.parts) or any(
                not set(got) <= set(part.profiles) or sum(got.values()) != part.count * hosted.units
                for part, got in zip(item.parts, hosted.parts, strict=False)
            ):
                problems.append(
                    Problem(where, f"{hosted.units} of {item.shape} take {list(hosted.parts)}")
                )
            taken.update(hosted.served())
        short = {p: n - have[p] for p, n in taken.items() if n > have[p]}
        if short:
            problems.append(Problem(where, f"hosts more than its instances: {short} short"))
    return problems, met


def scale_out_problems(
    scale: ScaleOutPlan,
    left: Sequence[tuple[int, DemandItem]],
    offers: Sequence[Offer],
    *,
    budget: int | None,
) -> list[Problem]:
    """Every rule the new nodes of `scale` break for the demand `left` unmet: valid layouts
    of the offers' models within their maxima and the budget, demand hosted node by node
    within each node's instances, gangs all or none, and the figures as the nodes make them."""
    problems = _check_new_nodes(scale, offers, budget)
    hosting, met = _check_hosting(scale, left)
    problems += hosting
    expected = [(n, item.count, met[n]) for n, item in left]
    reported = [(i.demand, i.left, i.met) for i in scale.items]
    if reported != expected:
        problems.append(Problem("scaleOut", f"items {reported}, the nodes host {expected}"))
    items = [item for _, item in left]
    units = [met[n] for n, _ in left]
    for members in gangs_of(items).values():
        if why := gang_problem(items, units, members):
            problems.append(Problem("scaleOut", why))
    weighted = sum(demand_weight(item) * got for item, got in zip(items, units, strict=True))
    if scale.weighted_met != weighted or scale.bound < weighted:
        problems.append(
            Problem(
                "scaleOut",
                f"weighted met {scale.weighted_met} (bound {scale.bound}), the nodes meet "
                f"{weighted}",
            )
        )
    return problems


def validate_scale_out(
    scale: ScaleOutPlan,
    left: Sequence[tuple[int, DemandItem]],
    offers: Sequence[Offer],
    *,
    budget: int | None,
) -> None:
    """Raise InvalidPlanError listing every problem of the new nodes (`scale_out_problems`)."""
    problems = scale_out_problems(scale, left, offers, budget=budget)
    if problems:
        raise InvalidPlanError(f"invalid scale-out: {listing(problems)}")


SHOWN = 5
"""Problems an InvalidPlanError names; the rest are counted."""


def listing(problems: Sequence[Problem]) -> str:
    """The first SHOWN problems joined by `; `, and how many more there are."""
    more = f" (and {len(problems) - SHOWN} more)" if len(problems) > SHOWN else ""
    return "; ".join(map(str, problems[:SHOWN])) + more
