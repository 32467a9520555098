"""`plan()`: inventory, demand and policy in; a validated-ready Plan out.

The pass, all inside one time limit:
1. classes of interchangeable GPUs, pools of what changed GPUs can become (`pools.py`);
2. starting points: keep everything, the previous plan where the caller has one
   (`previous.py`), the nos-style greedy, first-fit and static-geometry plans;
3. the CP-SAT stages from the best starting point (`stages.py`);
4. counts to concrete layouts with the fewest operations (`assign.py`);
5. pods that need several instances on one node, where the solver's plan leaves theirs
   spread, get their instances gathered and nodes reshaped for them (`gather.py`,
   `bundles.py`), and the plans at hand are mixed node by node, bundles counted exactly
   (`node_mix.py`);
6. the best of the solver's plan (with and without 5) and the starting points on the whole
   lexicographic objective: whatever the limit, the plan is never worse than a baseline.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from migplan.planner.allocation import EXACT_NODES
from migplan.planner.api.inventory import GpuState
from migplan.planner.api.spec import Disruption, PolicySpec
from migplan.planner.assemble import GpuKey, assemble_plan, gpu_change, gpu_key
from migplan.planner.baselines import first_fit_targets, greedy_targets, static_targets
from migplan.planner.cores import usable_cores
from migplan.planner.demand import DemandItem, demand_weight
from migplan.planner.fleet import Fleet
from migplan.planner.hardware.layout import Layout
from migplan.planner.plan import (
    DEMAND_STAGE,
    SOLVER_METHOD,
    Plan,
    SolverReport,
    SolverStage,
    SolveStatus,
)
from migplan.planner.solver.assign import map_to_gpus
from migplan.planner.solver.background import Background, Forked
from migplan.planner.solver.bundles import place_bundles
from migplan.planner.solver.classes import group_gpus
from migplan.planner.solver.explain import Explainer
from migplan.planner.solver.gather import gather
from migplan.planner.solver.hints import carry_over, hint_from_targets, keeping_more
from migplan.planner.solver.linear import maximize
from migplan.planner.solver.model import PlanningModel, node_groups
from migplan.planner.solver.node_mix import mix_by_node
from migplan.planner.solver.objective import Score, disruption, score
from migplan.planner.solver.pools import PoolSet, build_pools, for_demand_alone
from migplan.planner.solver.previous import PREVIOUS, previous_targets
from migplan.planner.solver.prune import PendingLp, start_lp
from migplan.planner.solver.stages import (
    EVICTIONS,
    GPUS_CHANGED,
    HEADROOM,
    INSTANCES,
    NODES_TOUCHED,
    PRUNE_SHARE,
    STAGES,
    Criterion,
    StagedResult,
    combined,
    solve_stages,
)

SEED = 0
KEEP = "keep everything"
SOLVER = SOLVER_METHOD
BUNDLES = "cp-sat, bundles placed"
GATHERED = "cp-sat, bundle instances gathered"
MIXED = "cp-sat, plans mixed node by node"
Targets = dict[GpuKey, Layout]
STARTS: tuple[tuple[str, Callable[[Sequence[GpuState], Sequence[DemandItem]], Targets]], ...] = (
    ("greedy (nos)", greedy_targets),
    ("first-fit", first_fit_targets),
    ("static geometry", static_targets),
)
ASSEMBLY_SHARE = 0.15
"""Share of the time limit kept back for turning counts into layouts and the plan."""
ASSEMBLY_SECONDS_PER_GPU = 0.075e-3
"""...or, where more, this per GPU: from the stages' deadline to the preview's exit (placing,
scoring, assembling, validating, writing the plan) took about 1.5 s on 40,000 fragmented GPUs
once the cyclic collector stopped interrupting (`gc_pause.py`; 0.15 ms a GPU before, which
left a 40,000-GPU fleet no time to solve); 3 s at 40,000 GPUs is about twice that, for a VM
whose speed varies."""
EVICTIONS_PATH_SECONDS_PER_GPU = 0.06e-3
"""Time the evictions stage needs before it can search, per GPU: after the demand stage, its
LP read from the model, the small model's plan mapped and repaired, and the hint took 2.2 s
on 40,000 fragmented GPUs. With less time left the demand stage's plan is the answer."""
MIX_NODES = 500
"""Fleets of up to this many nodes get the plans at hand mixed node by node where bundles
were counted fleet-wide (`node_mix.py`). Its solve grows faster than the fleet: on the
fragmented bench with multi-instance pods, 0.3-0.4 s at 250 nodes, 5-6 s at 500 (first
answers after 1-2 s) and 12-20 s at 1,000 nodes, where the time limit leaves it none."""
MIX_WORK_PER_NODE = 1e-3
"""CP-SAT's deterministic seconds the mix may take, per node: 0.25 at 250 nodes, where the
bench's multi-instance fleet was proven in 0.11 (0.5 s on the wall clock); 0.5 at 500 nodes,
where it reaches 20,170 of 20,180 (0.59 deterministic seconds took about 2.7 s). A budget in
deterministic time gives the same plan on any machine; the time limit still bounds it (the
time left before the plan's assembly), and where that ends it first the plan may differ from
run to run."""
RESHAPE_SECONDS_PER_GPU = 0.15e-3
"""Time reshaping nodes for bundles (`bundles.py`) takes with the scoring of its plan, per
GPU: 0.9-1.05 s at 8,000 fragmented GPUs on a slow VM, where the repairs after the stages
took 2.4 s and an evicting pass ended at 10.6 s of its 10 s. Where less time is left before
the plan's assembly, it is not tried (the plan may then differ with the machine's speed, as
where the limit ends a stage)."""
BUNDLE_SECONDS_PER_GPU = 0.12e-3
"""Kept back on top, per GPU, where pods need several instances on one node: placing them
node by node (and the repair that reshapes nodes for them) took the time after the stages
on 8,000 fragmented GPUs from 0.55 s to 1.6 s (2.2 s kept back in all)."""

FORKED_STARTS_GPUS = 1_000
"""From this many GPUs the starting plans are made and scored in a forked child
(`background.Forked`) while this process builds the classes, pools and model: 1.2-2.1 s of
Python at 40,000 fragmented GPUs that ran before the first stage could start. There the
fork took 0.006-0.012 s of this process, and the answer came 0.056-0.082 s after the
child's work ended (pickled, sent, read back)."""
FORKED_STARTS_SITUATIONS = 100
"""Nor with fewer distinct GPU situations than this (`Fleet.situations`): a fleet of many
identical nodes gives this process little to do while the child works (few classes, pools
and a small model), and the child takes the memos its scoring fills with it, which this
process then fills again. On 40,000 GPUs of two situations (the operator's 5,000-node bench
fleet) this process waited 0.15-0.41 s for a child it ran beside for 0.14-0.25 s, and the pass
took 1.53-1.86 s and 1.67-2.0 s of CPU forked against 1.47-1.67 s and as much CPU made here;
`bench/planner.py`'s trace snapshot (8,216 GPUs, one situation) took 0.37-0.48 s forked
(median 0.40 s of 9 runs), 0.20-0.45 s made here (median 0.28 s of 11). Its friendly fleet
(8,000 GPUs, 219 situations) showed no difference beyond the spread of runs of one code
(2.2-3.3 s), and still forks; at 4,463 situations (fragmented) this process built for 2.0-2.7
s while the child worked and waited 0.04-0.44 s. A fork also needs a second core to run on
(`cores.usable_cores`)."""

Progress = Callable[[str], None]


def relevant_profiles(
    gpus: Sequence[GpuState], demand: Sequence[DemandItem], policy: PolicySpec
) -> frozenset[str]:
    """Profiles worth creating: demanded ones, and in-use ones whose pods may be rehosted."""
    relevant = {p for item in demand if item.count > 0 for p in item.profiles}
    if policy.disruption is Disruption.EVICT:
        relevant |= {i.profile for g in gpus for i in g.pins}
    return frozenset(relevant)


def _quiet(_: str) -> None:
    pass


def plan(
    gpus: Sequence[GpuState],
    demand: Sequence[DemandItem],
    policy: PolicySpec,
    *,
    time_limit: float = 10.0,
    workers: int = 1,
    deterministic: bool = True,
    digest: str = "",
    progress: Progress | None = None,
    started: float | None = None,
    previous: Mapping[GpuKey, str] | None = None,
) -> Plan:
    """The best plan for `gpus` under `policy`: most weighted demand met, then fewest
    evictions, GPUs changed and nodes touched, then most free headroom and fewest operations.

    `time_limit` bounds the whole pass, model building included, counted from `started`
    (time.monotonic(); default: now) so a caller can count its own input reading.
    Deterministic for the same input and worker count unless `deterministic` is off (see
    `stages.py`). The report says OPTIMAL only when every solver stage was proven optimal, and
    names the plan the solver started from and the one returned.

    `previous`: the layouts (canonical text by node and GPU index) of an earlier plan for the
    same fleet, one more starting point (`previous.py`).
    """
    entered = time.monotonic()
    deadline = (entered if started is None else started) + time_limit
    gpus = Fleet(gpus)  # scored many times over: each situation counted once (`fleet.py`)
    ranked_starts = _ranking(gpus, demand, policy, previous, until=deadline)
    note = progress or _quiet
    rebuild = policy.whole_gpu_rebuild
    bundles = any(item.per_pod for item in demand)
    per_node = bundles and len({g.node for g in gpus}) <= EXACT_NODES
    classes = group_gpus(gpus, by_node=per_node)
    note(f"{len(gpus)} GPUs in {len(classes)} classes; enumerating what each can become")
    pools = build_pools(
        classes,
        profiles=sorted(relevant_profiles(gpus, demand, policy)),
        policy=policy,
        per_node=per_node,
    )
    explain = Explainer(gpus=gpus, classes=classes, pools=pools, policy=policy)
    note(f"{len(pools.pools)} pools, {pools.option_count()} options; building the model")
    reserve = _reserve(time_limit, gpus=len(gpus), bundles=bundles)

    def run(
        model: PlanningModel,
        start_from: dict[int, int],
        stages: Sequence[tuple[Criterion, ...]],
        before: StagedResult | None = None,
        *,
        share: float = 1.0,
        at_most: float = math.inf,
        continued: bool = False,
        lp: PendingLp | None = None,
    ) -> StagedResult:
        """Solve `stages`, taking at most `share` of the time left to the solver and at
        most `at_most` seconds."""
        now = time.monotonic()
        return solve_stages(
            model,
            hint=start_from,
            deadline=now + min(at_most, share * max(0.0, deadline - reserve - now)),
            workers=workers,
            interleave=deterministic,
            seed=SEED,
            progress=note,
            stages=stages,
            before=before,
            continued=continued,
            lp=lp,
        )

    demand_pools = for_demand_alone(pools, classes, policy)
    groups = node_groups(classes)

    def model_of(chosen: PoolSet) -> PlanningModel:
        return PlanningModel(
            classes=classes,
            pools=chosen,
            demand=demand,
            policy=policy,
            per_node=per_node,
            groups=groups,
        ).build()

    pm = early = None
    if demand_pools is None:
        # No smaller model to search for demand beside the full one (policy none, mostly):
        # the full model comes first, and GLOP solves the demand stage's LP on a thread
        # while the starting plans are worked out and scored (on large fleets the child
        # making them shares the second core with it).
        pm = model_of(pools)
        early = _stage_lp(pm, STAGES[0], until=deadline - reserve)
    small = (
        model_of(demand_pools)
        if demand_pools is not None and deadline - reserve - time.monotonic() > 0
        else None
    )
    ranked = ranked_starts()
    demand_first = None if small is None else _demand_stage(small, gpus, ranked, run)
    if pm is None:
        pm = model_of(pools)
    starts = _Starts(pm, gpus, demand, ranked)
    start, hint = starts.first_allowed(ranked)
    note(f"starting from {start}; {pm.variable_count()} variables")
    built = time.monotonic() - entered
    solved_on = pm
    if deadline - reserve - time.monotonic() <= 0:
        # No time left to solve: the best starting plan as it is. Building the staged solve's
        # smaller models would only overrun the limit further (2.6 s at 40,000 GPUs).
        result = StagedResult(values=dict(hint), optimal=False)
    elif demand_first is None:
        result = run(pm, hint, STAGES, lp=early)
    else:
        solved_on, result = _solve_demand_first(
            pm, *demand_first, starts, run, until=deadline - reserve
        )
    note("placing instances on GPUs")
    solved = map_to_gpus(pm=solved_on, result=result, policy=policy)
    chosen_score, chosen, targets = _choose(
        starts,
        solved,
        result,
        repair=bundles and not per_node,
        note=note,
        until=deadline - _reserve(time_limit, gpus=len(gpus), bundles=False),
    )
    moved = [g for g in gpus if targets[gpu_key(g)] != g.layout]
    explain.note_plan(gpus_changed=len(moved), nodes_touched=len({g.node for g in moved}))
    bound = result.bound if result.found else None
    # Bundles counted fleet-wide (large fleets) are a relaxation: its optimum is proven for
    # the plan only where the plan reaches it on every stage.
    relaxed = bundles and not per_node
    proven = result.optimal and (
        not relaxed
        or _reaches_every_stage(result, gpus, (chosen_score, chosen, targets), rebuild=rebuild)
    )
    report = _report(
        pm,
        result_bound=bound,
        chosen_score=chosen_score,
        optimal=proven,
        stages=tuple(result.stages),
        seconds=time.monotonic() - entered,
        workers=workers,
        build_seconds=built,
        start=start,
        chosen=chosen,
    )
    return assemble_plan(
        gpus=gpus,
        targets=targets,
        demand=demand,
        solver=report,
        digest=digest,
        rebuild=rebuild,
        explain=explain,
    )


Ranked = list[tuple[Score, str, Targets]]


def _choose(
    starts: _Starts,
    solved: Targets,
    result: StagedResult,
    *,
    repair: bool,
    note: Progress,
    until: float,
) -> tuple[Score, str, Targets]:
    """The plan to return: the solver's (`solved`), repaired where `repair` (bundles counted
    fleet-wide; the plans at hand then also mixed node by node, until `until` at the latest),
    or a starting plan, whichever ranks best on the whole objective. Never worse than where
    it started: every starting point the policy allows competes. Sorting is stable, so on
    ties the solver's plan (listed first) wins, but for a previous plan as good: re-planning
    keeps a waiting plan that is still the best."""
    gpus, demand, policy = starts.gpus, starts.demand, starts.pm.policy
    mine = (score(gpus, solved, demand, rebuild=policy.whole_gpu_rebuild), SOLVER, solved)
    candidates = [*starts.named(PREVIOUS), mine, *starts.ranked]
    if repair and not _reaches(result, mine[0]):
        note("placing pods that need several instances on one node")
        candidates += _repaired(gpus, solved, demand, policy, until=until)
        candidates += _mixed(starts, candidates, bound=result.bound, until=until, note=note)
    return next(
        c for c in sorted(candidates, key=lambda c: c[0], reverse=True) if _allowed(starts, c)
    )


def _allowed(starts: _Starts, plan: tuple[Score, str, Targets]) -> bool:
    """Whether the policy allows `plan` (the solver's own always; others where the model
    can express them)."""
    return plan[1] == SOLVER or starts.hint(plan[1], plan[2]) is not None


def _mixed(starts: _Starts, plans: Ranked, *, bound: float, until: float, note: Progress) -> Ranked:
    """The `plans` the policy allows mixed node by node (`node_mix.py`), on fleets of up to
    `MIX_NODES` nodes where none of them meets `bound`, in `MIX_WORK_PER_NODE` a node and
    before `until`; empty where no mix was found in time."""
    gpus = starts.gpus
    nodes = starts.pm.node_count()
    now = time.monotonic()
    if nodes > MIX_NODES or until <= now:
        return []
    plans = [p for p in plans if _allowed(starts, p)]
    if any(p[0].weighted_met >= bound for p in plans):
        return []
    note("mixing the plans node by node for pods that need several instances on one node")
    rebuild = starts.pm.policy.whole_gpu_rebuild
    mixed = mix_by_node(
        gpus,
        [t for _, _, t in plans],
        starts.demand,
        rebuild=rebuild,
        work=MIX_WORK_PER_NODE * nodes,
        deadline=until,
    )
    if mixed is None:
        return []
    return [(score(gpus, mixed, starts.demand, rebuild=rebuild), MIXED, mixed)]


def _reaches_every_stage(
    result: StagedResult,
    gpus: Sequence[GpuState],
    plan: tuple[Score, str, Targets],
    *,
    rebuild: bool,
) -> bool:
    """Whether `plan` (its score, name and targets) reaches the value of every stage
    of `result`, solved on the fleet-wide relaxation of bundles: then no plan does better.
    The solver's own plan has the stages' values by construction but for the demand met,
    which its allocation node by node may not reach; another plan must match each one."""
    scored, name, targets = plan
    if not _reaches(result, scored):
        return False
    if name == SOLVER:
        return True
    created = sum(
        len(after.instances)
        for g in gpus
        if gpu_change(g.layout, after := targets[gpu_key(g)], g.mig_enabled, rebuild)[0]
    )
    reached = {
        DEMAND_STAGE: scored.weighted_met,
        EVICTIONS: -scored.evictions,
        GPUS_CHANGED: -scored.gpus_changed,
        NODES_TOUCHED: -scored.nodes_touched,
        HEADROOM: scored.headroom,
        INSTANCES: created,
    }
    return all(s.name in reached and s.value == reached[s.name] for s in result.stages)


def _reaches(result: StagedResult, scored: Score) -> bool:
    """Whether `scored` meets the demand the stages proved the most any plan meets (then no
    repair can meet more, and every later stage was proven too)."""
    return result.optimal and result.found and scored.weighted_met >= result.bound


def _repaired(
    gpus: Sequence[GpuState],
    solved: Targets,
    demand: Sequence[DemandItem],
    policy: PolicySpec,
    *,
    until: float,
) -> Ranked:
    """The solver's plan repaired for pods that need several instances on one node, where
    it counted their instances fleet-wide: stranded instances gathered onto fewer nodes
    (`gather.py`), and nodes reshaped for bundles still short (`bundles.py`) where that can
    be done before `until`."""
    rebuild = policy.whole_gpu_rebuild
    repairs = [(GATHERED, gather(gpus, solved, demand, policy))]
    if time.monotonic() + RESHAPE_SECONDS_PER_GPU * len(gpus) <= until:
        repairs.append((BUNDLES, place_bundles(gpus, solved, demand, policy)))
    return [
        (score(gpus, targets, demand, rebuild=rebuild), name, targets)
        for name, targets in repairs
        if targets is not None
    ]


@dataclass
class _Starts:
    """The starting plans, best first on the whole objective, and each as a solution of the
    model (None where the policy does not allow the plan: it evicts, breaks a limit...)."""

    pm: PlanningModel
    gpus: Sequence[GpuState]
    demand: Sequence[DemandItem]
    ranked: Ranked
    hints: dict[str, dict[int, int] | None] = field(default_factory=dict)

    def hint(self, name: str, targets: Targets) -> dict[int, int] | None:
        """`targets` (named `name`) as a solution of the model; computed once per name."""
        if name not in self.hints:
            self.hints[name] = hint_from_targets(self.pm, targets)
        return self.hints[name]

    def named(self, name: str) -> Ranked:
        """The starting plan called `name`, if there is one."""
        return [r for r in self.ranked if r[1] == name]

    def first_allowed(self, plans: Ranked) -> tuple[str, dict[int, int]]:
        """The best of `plans` the model can express (keeping everything always is one)."""
        return next((n, h) for _, n, t in plans if (h := self.hint(n, t)) is not None)


def _reserve(time_limit: float, *, gpus: int, bundles: bool) -> float:
    """Seconds kept back from the stages for placing, assembling and validating the plan."""
    reserve = max(ASSEMBLY_SHARE * time_limit, ASSEMBLY_SECONDS_PER_GPU * gpus)
    return reserve + (BUNDLE_SECONDS_PER_GPU * gpus if bundles else 0.0)


def _stage_lp(
    pm: PlanningModel, criteria: tuple[Criterion, ...], *, until: float
) -> PendingLp | None:
    """The LP of the stage of `criteria` on `pm`, started on a thread of its own
    (`prune.start_lp`) to overlap other work; None where that stage has nothing to choose or
    no time is left before `until`."""
    expr = combined(pm, criteria)
    if isinstance(expr, int):
        return None
    maximize(pm.model, expr)
    return start_lp(pm.model, pm.relaxation, time_limit=PRUNE_SHARE * (until - time.monotonic()))


def _demand_stage(
    small: PlanningModel,
    gpus: Sequence[GpuState],
    ranked: Ranked,
    run: Callable[..., StagedResult],
) -> tuple[PlanningModel, Background[StagedResult]]:
    """The demand stage on `small`, from the best starting plan it can express, started on a
    thread: CP-SAT holds no Python lock while it searches, so it goes on while the full
    model is built (8,000 fragmented GPUs: 0.27 s of search beside 0.36 s of building)."""
    hint = _Starts(small, gpus, small.demand, ranked).first_allowed(ranked)[1]
    return small, Background(lambda: run(small, hint, STAGES[:1]))


def _start_plans(
    gpus: Sequence[GpuState], demand: Sequence[DemandItem], *, previous: Targets | None
) -> list[tuple[str, Targets]]:
    """Keep everything, the `previous` plan, then each baseline; ranking is stable, so on
    ties keeping leads, and a previous plan leads the baselines."""
    keep = {gpu_key(g): g.layout for g in gpus}
    plans = [(KEEP, keep)]
    if previous is not None:
        plans.append((PREVIOUS, previous))
    return plans + [(n, {**keep, **f(gpus, demand)}) for n, f in STARTS]


def _ranking(
    gpus: Fleet,
    demand: Sequence[DemandItem],
    policy: PolicySpec,
    previous: Mapping[GpuKey, str] | None,
    *,
    until: float,
) -> Callable[[], Ranked]:
    """What gives the starting plans ranked (`_start_plans`, `_ranked`). From
    `FORKED_STARTS_GPUS` GPUs in at least `FORKED_STARTS_SITUATIONS` situations, where this
    process may use two cores, they are made at once in a forked child (`Forked`), on the
    second core while this process builds the model, and the function waits for them; a
    child with no answer by `until` (the pass's deadline) is taken for stuck, and they are
    made here."""

    def rank() -> Ranked:
        layouts = None if previous is None else previous_targets(gpus, previous, policy)
        return _ranked(policy, gpus, demand, _start_plans(gpus, demand, previous=layouts))

    return Forked(rank, until=until).result if _forks(gpus) else rank


def _forks(gpus: Fleet) -> bool:
    """Whether the starting plans are worth a forked child (`FORKED_STARTS_SITUATIONS`)."""
    return (
        len(gpus) >= FORKED_STARTS_GPUS
        and len(gpus.situations) >= FORKED_STARTS_SITUATIONS
        and usable_cores() >= 2
    )


def _ranked(
    policy: PolicySpec,
    gpus: Sequence[GpuState],
    demand: Sequence[DemandItem],
    plans: Sequence[tuple[str, Targets]],
) -> Ranked:
    rebuild = policy.whole_gpu_rebuild
    scored = [(score(gpus, t, demand, rebuild=rebuild), name, t) for name, t in plans]
    return sorted(scored, key=lambda s: s[0], reverse=True)


SMALL_EVICTIONS_SHARE = 0.25
"""Of the time left after the demand stage, the most the evictions stage on the small model
(a starting point for the real one) may take."""
SMALL_EVICTIONS_PER_DEMAND_SECOND = 5.0
"""Nor more than this many times what the demand stage took on the same model, plus
`SMALL_EVICTIONS_SLACK` seconds. Where that stage pays, it is proven in a small multiple of
the demand stage's time (on the bench's evicting fleets: 0.97-1.4 times at 250 and 1,000
nodes, 2.5 times on 250 nodes of three models, 0.85 on 50 nodes with multi-instance pods);
on 50 nodes with gangs it found nothing better than its start in 1.5 s (its demand stage:
0.15 s), while the whole model's own search reached the optimum anyway."""
SMALL_EVICTIONS_SLACK = 0.1


def _solve_demand_first(
    pm: PlanningModel,
    small: PlanningModel,
    job: Background[StagedResult],
    starts: _Starts,
    run: Callable[..., StagedResult],
    *,
    until: float,
) -> tuple[PlanningModel, StagedResult]:
    """Stage 1 on `small`, the model with one route per class (`pools.for_demand_alone`),
    already under way (`job`); then the evictions stage on the full model, which must meet
    as much, starting from the best plan that does: the demand stage's plan keeping what
    in-use instances it can, or a starting plan. Where that evicts nothing the later stages
    run on the smaller model of policy `none` (`_without_evictions`); where a starting plan
    already meets as much without evicting, they do so at once, without the evictions stage
    on the full model. Returns the model the last stages ran on, and the result. `until`:
    the stages' deadline."""
    first = job.result()
    if until - time.monotonic() < EVICTIONS_PATH_SECONDS_PER_GPU * len(starts.gpus):
        # Too late for the evictions stage: the work before it (its LP read from the model,
        # repairing the small model's plan, the hint) would only overrun the limit. The later
        # stages are not solved: the plan is not proven best on them.
        return small, replace(first, optimal=False)
    met = sum(demand_weight(d) * first.value(v) for d, v in zip(pm.demand, small.met, strict=True))
    pm.model.add(pm.weighted_met() == met if first.optimal else pm.weighted_met() >= met)
    meeting = [r for r in starts.ranked if r[0].weighted_met >= met]
    # A starting plan that meets as much and evicts nothing settles the evictions stage (none
    # can evict fewer): no need to solve it on the full model.
    calm = next((r[2] for r in meeting if r[0].evictions == 0), None)
    narrow = (
        None if calm is None else _without_evictions(pm, calm, met=met, met_proven=first.optimal)
    )
    if narrow is not None:
        return narrow[0], run(narrow[0], narrow[1], STAGES[2:], _none_evicted(first))
    # The evictions stage's LP does not depend on where that stage starts: GLOP solves it on
    # the second core while the small model looks for fewer evictions and its plan is
    # repaired (2,000 fragmented GPUs: 0.2 s of GLOP beside 0.2 s of those).
    early = _stage_lp(pm, STAGES[1], until=until)
    # Evictions were free there: keep what in-use instances the demand met allows. Fewer
    # evictions on the small model first (every change there evicts all of a GPU's pods), in
    # a short slice of the time: a far better start for the evictions stage where it cannot
    # finish (8,000 fragmented GPUs, over-demand: 1,195 evictions instead of 4,931).
    fewer = run(
        small,
        first.values,
        STAGES[1:2],
        share=SMALL_EVICTIONS_SHARE,
        at_most=SMALL_EVICTIONS_SLACK
        + SMALL_EVICTIONS_PER_DEMAND_SECOND * sum(s.seconds for s in first.stages),
    )
    # Only the small model's best plan is repaired: it meets the same demand with fewer
    # evictions there, and repaired it evicted 1.2-4x fewer pods than the demand stage's plan
    # repaired on every evicting benchmark fleet. The hint is the allowed plan evicting
    # fewest: the demand it meets is fixed in the model.
    best = fewer if fewer.found else first
    repaired = keeping_more(pm, map_to_gpus(pm=small, result=best, policy=pm.policy))
    # Ranked by evictions on (the model holds its demand met at `met`): no allocation needed.
    mended = disruption(
        starts.gpus, repaired, weighted_met=met, rebuild=pm.policy.whole_gpu_rebuild
    )
    plans = [(mended, "repaired", repaired), *meeting]
    try:
        _, hint = starts.first_allowed(sorted(plans, key=_evictions_first, reverse=True))
    except StopIteration:  # a planner bug, but the carried-over solution still holds
        hint = carry_over(first.values, source=small, target=pm)
    second = run(pm, hint, STAGES[1:2], first, continued=True, lp=early)
    narrow = None
    if _evicts_nothing(second):
        targets = map_to_gpus(pm=pm, result=second, policy=pm.policy)
        narrow = _without_evictions(pm, targets, met=met, met_proven=first.optimal)
    if narrow is None:
        return pm, run(pm, second.values, STAGES[2:], second)
    return narrow[0], run(narrow[0], narrow[1], STAGES[2:], second)


def _evictions_first(ranked: tuple[Score, str, Targets]) -> tuple[int, ...]:
    """A plan's criteria from evictions on: the evictions stage's order, demand being fixed.
    (Plans that need several instances on one node make a plan's pod-by-pod demand met differ
    from the model's fleet-wide count, so demand first would prefer a plan evicting more.)"""
    return ranked[0][1:]


def _evicts_nothing(result: StagedResult) -> bool:
    """Whether the evictions stage, the last one in `result`, found a plan evicting no pod."""
    stage = result.stages[-1] if result.stages else None
    return not (
        stage is None
        or stage.name != EVICTIONS
        or stage.status is SolveStatus.NOT_REACHED
        or stage.value
    )


def _none_evicted(first: StagedResult) -> StagedResult:
    """`first` (the demand stage) followed by an evictions stage settled without solving: a
    plan meeting as much demand evicts no pod, and no plan evicts fewer."""
    stage = SolverStage(
        name=EVICTIONS, sense="min", status=SolveStatus.OPTIMAL, value=0.0, bound=0.0, seconds=0.0
    )
    return StagedResult(
        values=first.values,
        stages=[*first.stages, stage],
        optimal=first.optimal,
        found=first.found,
        objective=first.objective,
        bound=first.bound,
    )


def _without_evictions(
    pm: PlanningModel, targets: Targets, *, met: int, met_proven: bool
) -> tuple[PlanningModel, dict[int, int]] | None:
    """For a plan that evicts nothing (`targets`): the model of policy `none` (only the
    routes that keep every in-use instance, pools over the demanded profiles alone) with the
    demand met fixed, and that plan as its hint. None where the plan is not a solution of it.

    With no eviction, in-use profiles need no supply columns and every other route is closed:
    on 2,000 fragmented GPUs with little demand, 8,954 options become 3,117 and the headroom
    and instances stages are proven (3.5 s and 1.3 s) where headroom was still unproven
    after 6 s.
    """
    policy = pm.policy.model_copy(update={"disruption": Disruption.NONE})
    profiles = sorted(relevant_profiles([], pm.demand, policy))
    pools = build_pools(pm.classes, profiles=profiles, policy=policy, per_node=pm.per_node)
    narrow = PlanningModel(
        classes=pm.classes,
        pools=pools,
        demand=pm.demand,
        policy=policy,
        per_node=pm.per_node,
        groups=pm.groups,
    )
    narrow.build()
    narrow.model.add(narrow.weighted_met() == met if met_proven else narrow.weighted_met() >= met)
    hint = hint_from_targets(narrow, targets)
    return None if hint is None else (narrow, hint)


def _report(
    pm: PlanningModel,
    *,
    result_bound: float | None,
    chosen_score: Score,
    optimal: bool,
    stages: tuple[SolverStage, ...],
    seconds: float,
    workers: int,
    build_seconds: float,
    start: str,
    chosen: str,
) -> SolverReport:
    """The solver's figures for the plan returned: its weighted demand met (the first stage),
    the proven bound (all demand met when the solver proved nothing), and the gap."""
    objective = float(chosen_score.weighted_met)
    if result_bound is None:
        result_bound = float(sum(demand_weight(d) * d.count for d in pm.demand))
    return SolverReport(
        method=SOLVER,
        status=SolveStatus.OPTIMAL if optimal else SolveStatus.FEASIBLE,
        objective=objective,
        bound=result_bound,
        gap=max(result_bound - objective, 0.0) / max(1.0, abs(result_bound)),
        wall_seconds=seconds,
        build_seconds=build_seconds,
        stages=stages,
        classes=len(pm.classes),
        pools=len(pm.pools.pools),
        variables=pm.variable_count(),
        workers=workers,
        seed=SEED,
        started_from=start,
        chosen=chosen,
    )
