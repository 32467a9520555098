"""The CP-SAT planner on small scenarios whose best plan a person can work out."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time

import pytest

from migplan.planner.api.spec import Disruption, PolicySpec
from migplan.planner.assemble import gpu_key
from migplan.planner.hardware.layout import Layout
from migplan.planner.plan import DEMAND_STAGE, SolverStage, SolveStatus
from migplan.planner.solver import facade, plan
from migplan.planner.solver.background import Forked
from migplan.planner.solver.objective import score
from migplan.planner.solver.stages import (
    EVICTIONS,
    GPUS_CHANGED,
    HEADROOM,
    INSTANCES,
    NODES_TOUCHED,
    StagedResult,
)
from migplan.planner.validate import validate

NONE = PolicySpec()
EVICT = PolicySpec(disruption=Disruption.EVICT)


def solve(gpus, demand, policy=NONE, **kw):
    result = plan(gpus, demand, policy, **kw)
    validate(result, gpus, demand, policy)
    return result


def afters(result) -> list[str]:
    return [g.after for g in result.gpus]


def test_existing_free_instances_count_as_supply(gpu, want) -> None:
    gpus = [gpu("H100-80GB", "1g.10gb@0+1g.10gb@1")]
    result = solve(gpus, [want("1g.10gb", 2)])
    assert result.summary.met == 2
    assert result.summary.gpus_changed == 0


def test_creates_only_what_is_needed_and_keeps_big_free_room(gpu, want) -> None:
    result = solve([gpu("H100-80GB")], [want("1g.10gb", 1)])
    assert result.summary.met == 1
    [after] = afters(result)
    layout = Layout.parse(after)
    assert len(layout) == 1
    # the 1g sits where it leaves room for a 4g (slices 0-3) or a 3g (4-7)
    assert layout.instances[0].start in (4, 5, 6)


def test_policy_none_never_destroys_in_use(gpu, want) -> None:
    gpus = [gpu("H100-80GB", "1g.10gb@3", pins={"1g.10gb@3": "ns/small"})]
    result = solve(gpus, [want("7g.80gb", 1)])
    assert result.summary.met == 0
    assert afters(result) == ["1g.10gb@3"]
    assert "in-use instances kept in place" in result.demand[0].reason


def test_policy_evict_moves_a_small_pod_to_make_room(gpu, want) -> None:
    gpus = [
        gpu("H100-80GB", "1g.10gb@3", node="a", pins={"1g.10gb@3": "ns/small"}),
        gpu("H100-80GB", "1g.10gb@0+1g.10gb@1", node="b", pins={"1g.10gb@0": "ns/other"}),
    ]
    # Without evictions neither GPU can hold a 7g; with one, GPU a can, and the evicted pod
    # fits on b's free 1g (moving b's pod instead would change both GPUs).
    result = solve(gpus, [want("7g.80gb", 1)], EVICT)
    assert result.summary.met == 1
    assert result.summary.evictions == 1
    assert result.gpus[0].after == "7g.80gb@0"
    assert result.gpus[0].evict == ("ns/small",)
    assert result.gpus[1].after == "1g.10gb@0+1g.10gb@1"  # the evicted pod's new home


def test_evicts_only_if_the_pod_can_go_somewhere(gpu, want) -> None:
    gpus = [gpu("H100-80GB", "1g.10gb@3", pins={"1g.10gb@3": "ns/small"})]
    result = solve(gpus, [want("7g.80gb", 1)], EVICT)
    assert result.summary.evictions == 0
    assert result.summary.met == 0


def test_no_eviction_without_a_gain(gpu, want) -> None:
    gpus = [
        gpu("A100-40GB", "3g.20gb@0+3g.20gb@4", pins={"3g.20gb@0": "ns/a"}),
        gpu("A100-40GB", node="node-2"),
    ]
    result = solve(gpus, [want("3g.20gb", 2)], EVICT)
    assert result.summary.met == 2
    assert result.summary.evictions == 0


def test_prefers_fewer_gpus_then_fewer_nodes(gpu, want) -> None:
    gpus = [gpu("A100-40GB", node=n, index=i) for n in ("n1", "n2") for i in (0, 1)]
    result = solve(gpus, [want("3g.20gb", 3)])
    assert result.summary.met == 3
    assert result.summary.gpus_changed == 2
    assert result.summary.nodes_touched == 1


def test_max_gpus_changed_is_respected(gpu, want) -> None:
    gpus = [gpu("A100-40GB", node=f"n{i}") for i in range(3)]
    policy = PolicySpec(max_gpus_changed=1)
    result = solve(gpus, [want("7g.40gb", 3)], policy)
    assert result.summary.met == 1
    assert "policy limit maxGpusChanged=1" in result.demand[0].reason


def test_max_nodes_changed_is_respected(gpu, want) -> None:
    gpus = [gpu("A100-40GB", node=f"n{i}", index=j) for i in range(3) for j in range(2)]
    result = solve(gpus, [want("7g.40gb", 6)], PolicySpec(max_nodes_changed=2))
    assert result.summary.met == 4
    assert result.summary.nodes_touched == 2


def test_allowed_profiles_limit_new_instances(gpu, want) -> None:
    policy = PolicySpec(allowed_profiles={"H100-80GB": ("3g.40gb",)})
    result = solve([gpu("H100-80GB")], [want("1g.10gb", 1), want("3g.40gb", 1)], policy)
    assert [r.met for r in result.demand] == [0, 1]
    assert "allowedProfiles excludes it" in result.demand[0].reason


def test_unknown_profile_on_the_fleet_has_a_reason(gpu, want) -> None:
    result = solve([gpu("A100-40GB")], [want("7g.80gb", 1)])
    assert result.demand[0].reason == (
        "1 x 7g.80gb: no covered GPU model has this profile (covered: A100-40GB)"
    )


def test_priority_decides_who_gets_the_slices(gpu, want) -> None:
    demand = [want("7g.80gb", 1, priority=1), want("1g.10gb", 7, priority=10)]
    result = solve([gpu("H100-80GB")], demand)
    assert [r.met for r in result.demand] == [0, 7]


def test_explicit_totals_count_in_use_instances(gpu, want) -> None:
    gpus = [gpu("H100-80GB", "3g.40gb@0", pins={"3g.40gb@0": "ns/a"})]
    result = solve(gpus, [want("3g.40gb", 2, kind="total")])
    assert result.summary.met == 2
    assert afters(result) == ["3g.40gb@0+3g.40gb@4"]


def test_mig_disabled_gpu_is_enabled_when_needed(gpu, want) -> None:
    result = solve([gpu("A30", mig_enabled=False)], [want("4g.24gb", 1)])
    assert result.summary.met == 1
    assert str(result.gpus[0].operations[0]) == "enable-mig"


def test_whole_gpu_pod_blocks_mig_under_policy_none(gpu, want) -> None:
    gpus = [gpu("A30", mig_enabled=False, whole_gpu_pod="ns/full")]
    assert solve(gpus, [want("4g.24gb", 1)]).summary.met == 0


def test_whole_gpu_rebuild_recreates_every_instance(gpu, want) -> None:
    policy = PolicySpec(disruption=Disruption.EVICT, whole_gpu_rebuild=True)
    gpus = [
        gpu("H100-80GB", "3g.40gb@4", pins={"3g.40gb@4": "ns/a"}),
        gpu("H100-80GB", "1g.10gb@0", node="node-2"),
    ]
    result = solve(gpus, [want("3g.40gb", 1), want("4g.40gb", 1)], policy)
    changed = [gp for gp in result.gpus if gp.operations]
    assert changed
    for gp in changed:
        destroyed = {o.instance for o in gp.operations if o.kind.value == "destroy-gi"}
        assert destroyed == {str(i) for i in Layout.parse(gp.before).instances}


@pytest.mark.parametrize("workers", [1, 2])
def test_same_input_same_plan(gpu, want, workers) -> None:
    gpus = [gpu("H100-80GB", node=f"n{i // 2}", index=i % 2) for i in range(8)]
    gpus += [
        gpu("A100-80GB", "3g.40gb@0", node=f"m{i}", pins={"3g.40gb@0": f"ns/p{i}"})
        for i in range(4)
    ]
    demand = [want("1g.10gb", 9), want("2g.20gb", 3), want("3g.40gb", 4), want("7g.80gb", 1)]
    first = solve(gpus, demand, EVICT, workers=workers)
    for _ in range(2):
        again = solve(gpus, demand, EVICT, workers=workers)
        assert again.gpus == first.gpus
        assert again.demand == first.demand
    assert first.solver.status == "OPTIMAL"


def test_gpus_keeping_the_same_instances_share_one_pool(gpu, want) -> None:
    # Eight GPUs, eight different free layouts: eight classes, but whatever they become
    # depends only on what they keep (nothing), so the options are enumerated once.
    layouts = [
        "-",
        "1g.10gb@0",
        "2g.20gb@0",
        "3g.40gb@0",
        "4g.40gb@0",
        "7g.80gb@0",
        "3g.40gb@0+3g.40gb@4",
        "1g.10gb@6",
    ]
    gpus = [gpu("H100-80GB", lay, node=f"n{k}") for k, lay in enumerate(layouts)]
    result = solve(gpus, [want("1g.10gb", 20), want("3g.40gb", 2)])
    assert result.solver.classes == 8
    assert result.solver.pools == 1
    assert result.solver.status == "OPTIMAL"
    assert result.summary.met == 22


def test_evictions_route_through_the_pool_of_what_stays(gpu, want) -> None:
    # Under evict a GPU may keep any subset of its in-use instances. The 3g fits nowhere
    # as things are; dropping GPU 0's small pod (rehosted on GPU 1's free 1g) makes room.
    gpus = [
        gpu("H100-80GB", "4g.40gb@0+1g.10gb@4", pins={"4g.40gb@0": "ns/big", "1g.10gb@4": "ns/s"}),
        gpu(
            "H100-80GB",
            "3g.40gb@0+1g.10gb@4+1g.10gb@5+1g.10gb@6",
            node="node-2",
            pins={"3g.40gb@0": "ns/other", "1g.10gb@4": "ns/other-small"},
        ),
    ]
    result = solve(gpus, [want("3g.40gb", 1, priority=5)], EVICT)
    assert result.summary.met == 1
    assert result.summary.evictions == 1
    assert result.gpus[0].evict == ("ns/s",)
    assert result.gpus[0].after == "4g.40gb@0+3g.40gb@4"
    assert result.gpus[1].after == "3g.40gb@0+1g.10gb@4+1g.10gb@5+1g.10gb@6"
    # each GPU keeps both, one or none of its two in-use instances: 4 + 4 pools, of which
    # "keeps nothing" and "keeps only 1g.10gb@4" are the same for both GPUs
    assert result.solver.pools == 6


def test_report_names_the_starting_plan_and_the_plan_returned(gpu, want) -> None:
    gpus = [gpu("A100-40GB", "3g.20gb@0", pins={"3g.20gb@0": "ns/a"}), gpu("A100-40GB", node="b")]
    result = solve(gpus, [want("2g.10gb", 3)])
    assert result.solver.started_from in (
        "keep everything",
        "greedy (nos)",
        "first-fit",
        "static geometry",
    )
    assert result.solver.chosen == "cp-sat"
    assert result.solver.bound == result.solver.objective
    assert result.solver.gap == 0.0


def test_a_time_limit_too_short_to_solve_returns_the_best_starting_plan(gpu, want) -> None:
    gpus = [gpu("H100-80GB", node=f"n{k}") for k in range(4)]
    result = solve(gpus, [want("3g.40gb", 8)], time_limit=1e-9)
    assert result.solver.status == "FEASIBLE"
    assert result.summary.met == 8  # greedy and first-fit both find it
    assert result.solver.stages == ()  # no stage ran: the plan is the starting one, placed
    assert result.solver.gap == 0.0  # met everything: the trivial bound is reached


def test_no_time_to_solve_with_evictions_returns_the_best_starting_plan_unproven(gpu, want) -> None:
    gpus = [
        gpu("H100-80GB", "1g.10gb@0+1g.10gb@1", node="a", pins={"1g.10gb@1": "ns/b"}),
        gpu("H100-80GB", "4g.40gb@0", node="b", pins={"4g.40gb@0": "ns/c"}),
    ]
    result = solve(gpus, [want("3g.40gb", 2)], EVICT, time_limit=1e-9)
    assert result.solver.status == "FEASIBLE"
    assert result.solver.stages == ()  # no stage claims anything it did not solve


def test_evictions_allowed_but_not_needed_give_the_plan_of_policy_none(gpu, want) -> None:
    # Demand fits without evicting anyone: after proving zero evictions the planner goes on
    # in the smaller model of policy `none`, and must find the same, optimal, plan.
    gpus = [
        gpu("H100-80GB", "3g.40gb@0+2g.20gb@4", node="a", pins={"3g.40gb@0": "ns/a"}),
        gpu("H100-80GB", "1g.10gb@0+1g.10gb@1", node="a", index=1, pins={"1g.10gb@1": "ns/b"}),
        gpu("H100-80GB", "4g.40gb@0", node="b", pins={"4g.40gb@0": "ns/c"}),
        gpu("H100-80GB", "7g.80gb@0", node="b", index=1),
        gpu("H100-80GB", node="c"),
    ]
    demand = [want("1g.10gb", 6), want("2g.20gb", 2), want("3g.40gb", 1, priority=3)]
    evict, keep = solve(gpus, demand, EVICT), solve(gpus, demand, NONE)
    assert evict.summary.evictions == 0
    assert evict.solver.status == keep.solver.status == "OPTIMAL"
    assert [s.value for s in evict.solver.stages] == [s.value for s in keep.solver.stages]
    assert evict.summary == keep.summary


def test_either_or_demand_is_met_by_any_mix_and_explained_when_short(gpu, want) -> None:
    gpus = [gpu("A30", "-")]
    demand = [want("4g.24gb", 3, alternatives=("2g.12gb", "1g.6gb"))]
    result = plan(gpus, demand, PolicySpec())
    (row,) = result.demand
    assert row.met == 3
    assert sum(row.served.values()) == 3
    assert row.alternatives == ("2g.12gb", "1g.6gb")
    short = plan(gpus, [want("4g.24gb", 2, alternatives=("2g.12gb",))], PolicySpec())
    assert short.demand[0].met == 2  # two 2g
    none = plan(gpus, [want("7g.80gb", 1, alternatives=("3g.40gb",))], PolicySpec())
    assert none.demand[0].reason == (
        "1 x 7g.80gb or 3g.40gb: no covered GPU model has any of these profiles (covered: A30)"
    )


def one_free_each(gpu, *nodes: str) -> list:
    """An H100 with seven 1g.10gb, six in use, on each of `nodes`."""
    seven = "+".join(f"1g.10gb@{i}" for i in range(7))
    return [
        gpu("H100-80GB", seven, node=n, pins={f"1g.10gb@{i}": f"ns/{n}-{i}" for i in range(6)})
        for n in nodes
    ]


def test_a_pod_needing_two_instances_gets_a_node_that_holds_both(gpu, bundle) -> None:
    # One free 1g.10gb on each of nodes a and b: two instances fleet-wide, but no node holds
    # a pod's two. Node c's empty GPU is reshaped for it.
    gpus = [*one_free_each(gpu, "a", "b"), gpu("H100-80GB", "-", node="c")]
    demand = [bundle(1, {"1g.10gb": 2})]
    result = solve(gpus, demand)
    assert result.demand[0].met == 1
    assert result.demand[0].label == "pods of 2 x 1g.10gb on one node"
    assert [g.node for g in result.gpus if g.changed] == ["c"]
    # The model counted the two spread instances as enough: proven only once placed.
    assert result.solver.chosen != "keep everything"


def test_an_unplaceable_bundle_is_explained(gpu, bundle) -> None:
    gpus = one_free_each(gpu, "a", "b")
    result = solve(gpus, [bundle(1, {"1g.10gb": 2})])
    assert result.demand[0].met == 0
    assert "needs its 2 instances on one node" in result.demand[0].reason
    # Counted node by node, the model proves that no plan hosts the pod.
    assert result.solver.status == "OPTIMAL"
    assert result.solver.bound == 0


@pytest.mark.parametrize(("policy", "first"), [(NONE, "demand LP"), (EVICT, "greedy (nos)")])
def test_without_evictions_the_demand_lp_runs_while_starting_plans_are_made(
    gpu, want, monkeypatch, policy, first
) -> None:
    # Policy none has no smaller demand model to search beside the full one: GLOP solves
    # the demand stage's LP on the second core while the baselines are worked out.
    from migplan.planner.solver import facade

    seen: list[str] = []
    real_lp = facade.start_lp

    def start_lp(*args, **kwargs):
        seen.append("demand LP")
        return real_lp(*args, **kwargs)

    def noted(name, make):
        return lambda gpus, demand: (seen.append(name), make(gpus, demand))[1]

    monkeypatch.setattr(facade, "start_lp", start_lp)
    monkeypatch.setattr(facade, "STARTS", tuple((n, noted(n, f)) for n, f in facade.STARTS))
    gpus = [gpu("H100-80GB", "3g.40gb@0", pins={"3g.40gb@0": "ns/a"}), gpu("H100-80GB", index=1)]
    demand = [want("1g.10gb", 5), want("3g.40gb", 1)]
    result = solve(gpus, demand, policy)
    assert seen[0] == first
    assert result.solver.status == "OPTIMAL"
    assert [d.met for d in result.demand] == [5, 1]


REACHED = {
    DEMAND_STAGE: 3.0,  # one 3g.40gb pod: priority 1 x 3 compute slices
    EVICTIONS: 0.0,
    GPUS_CHANGED: 1.0,
    NODES_TOUCHED: 1.0,
    HEADROOM: 11.0,  # a 7g.80gb fits the empty GPU, a 4g.40gb beside the 3g.40gb
    INSTANCES: 1.0,
}
"""The stage values of the plan below, worked out by hand."""


def _stages(values: dict[str, float]) -> list[SolverStage]:
    return [
        SolverStage(
            name=name, sense="max", status=SolveStatus.OPTIMAL, value=v, bound=v, seconds=0.0
        )
        for name, v in values.items()
    ]


def test_a_plan_not_the_solvers_is_proven_only_where_it_reaches_every_stage(gpu, want) -> None:
    """Where bundles are counted fleet-wide, the solver's stages are proven on a relaxation:
    a repaired or mixed plan is reported OPTIMAL only where it reaches each stage's value;
    a stage it is not measured on, or a bound above its demand met, leaves it unproven."""
    gpus = [gpu("H100-80GB"), gpu("H100-80GB", node="node-2")]
    demand = [want("3g.40gb", 1)]
    targets = {gpu_key(g): g.layout for g in gpus}
    targets[gpu_key(gpus[1])] = Layout.parse("3g.40gb@4")
    scored = score(gpus, targets, demand)

    def reaches(values: dict[str, float], *, name: str = "repaired", bound: float = 3) -> bool:
        result = StagedResult(stages=_stages(values), optimal=True, found=True, bound=bound)
        return facade._reaches_every_stage(result, gpus, (scored, name, targets), rebuild=False)

    assert reaches(REACHED)
    for stage, value in REACHED.items():
        other = {**REACHED, stage: value + 1}
        assert not reaches(other), stage
        if stage != DEMAND_STAGE:
            assert reaches(other, name=facade.SOLVER)  # its stage values by construction
    assert not reaches({**REACHED, "a stage added later": 0.0})
    assert not reaches(REACHED, bound=4)
    assert not reaches(REACHED, name=facade.SOLVER, bound=4)


def test_starting_plans_made_in_a_forked_child_give_the_same_plan(gpu, want, monkeypatch) -> None:
    gpus = [
        gpu("H100-80GB", "1g.10gb@0+1g.10gb@1", node=f"n{i // 2}", index=i % 2, pins=pins)
        for i, pins in enumerate([{"1g.10gb@0": "ns/a"}, {}, {"1g.10gb@1": "ns/b"}, {}])
    ]
    gpus += [gpu("A100-80GB", "3g.40gb@0", node=f"m{i}") for i in range(3)]
    demand = [want("1g.10gb", 5), want("2g.20gb", 3), want("3g.40gb", 2), want("4g.40gb", 1)]
    here = solve(gpus, demand, EVICT)
    answered: list[int] = []

    class Watched(Forked):
        """Forked, noting which process answered."""

        def __init__(self, work, **kwargs) -> None:
            super().__init__(lambda: (os.getpid(), work()), **kwargs)

        def result(self):
            pid, value = super().result()
            answered.append(pid)
            return value

    forking(monkeypatch)
    monkeypatch.setattr(facade, "Forked", Watched)
    forked = solve(gpus, demand, EVICT)
    assert len(answered) == 1
    assert answered[0] != os.getpid()
    assert (forked.gpus, forked.demand) == (here.gpus, here.demand)
    assert (forked.solver.started_from, forked.solver.chosen) == (
        here.solver.started_from,
        here.solver.chosen,
    )


def forking(monkeypatch, *, gpus: int = 1, situations: int = 1, cores: int = 2) -> None:
    """Fork for the starting plans from `gpus` GPUs in `situations` situations, on `cores`."""
    monkeypatch.setattr(facade, "FORKED_STARTS_GPUS", gpus)
    monkeypatch.setattr(facade, "FORKED_STARTS_SITUATIONS", situations)
    monkeypatch.setattr(facade, "usable_cores", lambda: cores)


@pytest.mark.parametrize(
    "case", [(3, 2, True), (4, 2, False), (3, 1, False)], ids=["forks", "few", "one-core"]
)
def test_starting_plans_are_forked_only_for_varied_fleets_with_a_second_core(
    gpu, want, monkeypatch, case
) -> None:
    """A fleet of few situations gives the child little to overlap (its memos are lost to
    this process too), and a single core none to run on: the plans are then made here."""
    gpus = [gpu("H100-80GB", "1g.10gb@0+1g.10gb@1", node=f"n{i}") for i in range(4)]
    gpus += [gpu("H100-80GB", "3g.40gb@0", node="m0"), gpu("A100-80GB", "7g.80gb@0", node="m1")]
    situations, cores, forks = case
    started: list[int] = []

    class Counted(Forked):
        def __init__(self, work, **kwargs) -> None:
            started.append(1)
            super().__init__(work, **kwargs)

    forking(monkeypatch, gpus=6, situations=situations, cores=cores)
    monkeypatch.setattr(facade, "Forked", Counted)
    plan = solve(gpus, [want("1g.10gb", 5)])
    assert len(started) == (1 if forks else 0)
    assert plan.summary.met == 5


def test_a_forked_child_stuck_for_good_costs_the_pass_its_time_limit_not_its_plan(
    gpu, want, monkeypatch
) -> None:
    gpus = [gpu("H100-80GB", "1g.10gb@0+1g.10gb@1", node=f"n{i}") for i in range(3)]
    demand = [want("3g.40gb", 2)]
    caller = os.getpid()

    class Stuck(Forked):
        """Forked, its child stuck for good before answering (as on a lock another thread
        held when the process forked)."""

        def __init__(self, work, **kwargs) -> None:
            def stuck() -> object:
                if os.getpid() != caller:
                    threading.Event().wait()
                return work()

            super().__init__(stuck, **kwargs)

    forking(monkeypatch)
    monkeypatch.setattr(facade, "Forked", Stuck)
    planned: list[object] = []
    started = time.monotonic()
    planning = threading.Thread(
        target=lambda: planned.append(solve(gpus, demand, time_limit=1.0)), daemon=True
    )
    planning.start()
    planning.join(30)
    assert len(planned) == 1
    assert time.monotonic() - started < 15
    assert not multiprocessing.active_children()
