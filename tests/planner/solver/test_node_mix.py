"""Mixing plans node by node with bundles counted exactly (`node_mix.mix_by_node`): each
node gets one plan's targets, and the mix hosts at least what any of the plans hosts, more
where one plan suits some nodes' bundle pods and another plan the others'."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from test_properties import demands, fleets

from migplan.planner.assemble import demand_supply, gpu_key, supply_of
from migplan.planner.baselines import first_fit_targets, greedy_targets, static_targets
from migplan.planner.fleet import Fleet
from migplan.planner.hardware.enumeration import enumerate_layouts
from migplan.planner.hardware.layout import Layout
from migplan.planner.solver import node_mix
from migplan.planner.solver.node_mix import mix_by_node
from migplan.planner.solver.objective import disruption, score

PAIRS = "1g.10gb@0+1g.10gb@1+1g.10gb@2+1g.10gb@3+1g.10gb@4+1g.10gb@5+1g.10gb@6"
HALVES = "4g.40gb@0+3g.40gb@4"


def mix(gpus, plans, demand, *, deadline: float | None = None):
    """`mix_by_node` with time to spare (or until `deadline`)."""
    until = time.monotonic() + 30.0 if deadline is None else deadline
    return mix_by_node(gpus, plans, demand, rebuild=False, work=10.0, deadline=until)


def test_each_node_takes_the_plan_that_suits_its_bundles(gpu, want, bundle) -> None:
    # Two nodes of one H100 each. Plan one makes node a sevenfold and b halves, plan two the
    # other way round: each hosts one pod of 7 x 1g.10gb and one 4g.40gb. Mixed, both nodes
    # are sevenfold: two such pods, the 4g.40gb left out (it weighs less).
    gpus = [gpu("H100-80GB", node="a"), gpu("H100-80GB", node="b")]
    demand = [bundle(2, {"1g.10gb": 7}), want("4g.40gb", 1)]
    one = {("a", 0): Layout.parse(PAIRS), ("b", 0): Layout.parse(HALVES)}
    two = {("a", 0): Layout.parse(HALVES), ("b", 0): Layout.parse(PAIRS)}
    for plan in (one, two):
        assert demand_supply(demand, gpus, plan)[1].met == (1, 1)
    mixed = mix(gpus, [one, two], demand)
    assert mixed == {("a", 0): Layout.parse(PAIRS), ("b", 0): Layout.parse(PAIRS)}
    assert demand_supply(demand, gpus, mixed)[1].met == (2, 0)


def test_a_bundle_counts_only_where_one_node_holds_it(gpu, want, bundle) -> None:
    # Each node has a GPU in halves and one whole. Kept, the fleet holds two 3g.40gb, one per
    # node: no pod of 2 x 3g.40gb fits. Node a rebuilt as two halves hosts one, and b's whole
    # GPU the 7g.80gb: the mix changes one GPU where keeping both would count the pair
    # fleet-wide.
    whole = "7g.80gb@0"
    gpus = [
        gpu("H100-80GB", HALVES, node="a", index=0),
        gpu("H100-80GB", whole, node="a", index=1),
        gpu("H100-80GB", HALVES, node="b", index=0),
        gpu("H100-80GB", whole, node="b", index=1),
    ]
    demand = [bundle(1, {"3g.40gb": 2}), want("7g.80gb", 1)]
    keep = {gpu_key(g): g.layout for g in gpus}
    halves = {key: Layout.parse(HALVES) for key in keep}
    mixed = mix(gpus, [keep, halves], demand)
    assert mixed == {**keep, ("a", 1): Layout.parse(HALVES)}
    assert demand_supply(demand, gpus, mixed)[1].met == (1, 1)


def test_a_plan_evicting_more_than_it_rehosts_still_counts(gpu, want) -> None:
    # Made whole, the GPU's pod on a 1g.10gb has no instance to go to (less than nothing
    # free of that profile): that plan meets the 7g.80gb, which outweighs the 1g.10gb.
    gpus = [gpu("H100-80GB", PAIRS, node="a", pins={"1g.10gb@0": "ns/running"})]
    demand = [want("1g.10gb", 1), want("7g.80gb", 1)]
    keep = {("a", 0): Layout.parse(PAIRS)}
    whole = {("a", 0): Layout.parse("7g.80gb@0")}
    mixed = mix(gpus, [keep, whole], demand)
    assert mixed == whole


def test_a_gang_counts_only_whole(gpu, want) -> None:
    # Halves hold one 3g.40gb of a gang that needs two: worth nothing, so the sevenfold
    # layout's two 1g.10gb (weighing less than one 3g.40gb) win.
    gpus = [gpu("H100-80GB", HALVES, node="a")]
    gang = replace(want("3g.40gb", 2), gang="PodGroup ns/g", minimum=2, gang_minimum=2)
    demand = [gang, want("1g.10gb", 2)]
    keep = {("a", 0): Layout.parse(HALVES)}
    pairs = {("a", 0): Layout.parse(PAIRS)}
    mixed = mix(gpus, [keep, pairs], demand)
    assert mixed == pairs


def test_of_mixes_meeting_as_much_the_one_changing_fewest_gpus(gpu, want, bundle) -> None:
    # Node a is sevenfold already; plan two rebuilds it the same way, plan one keeps it.
    gpus = [gpu("H100-80GB", PAIRS, node="a"), gpu("H100-80GB", node="b")]
    demand = [bundle(1, {"1g.10gb": 7})]
    keep = {("a", 0): Layout.parse(PAIRS), ("b", 0): Layout.parse("-")}
    rebuilt = {("a", 0): Layout.parse(PAIRS), ("b", 0): Layout.parse(PAIRS)}
    mixed = mix(gpus, [rebuilt, keep], demand)
    assert mixed == keep


def test_of_choices_alike_the_first_plans(gpu, want) -> None:
    # The same instances at other starts supply and cost the same: the first plan's stays.
    gpus = [gpu("H100-80GB", node="a")]
    low = {("a", 0): Layout.parse("3g.40gb@0")}
    high = {("a", 0): Layout.parse("3g.40gb@4")}
    demand = [want("3g.40gb", 1)]
    assert mix(gpus, [high, low], demand) == high
    assert mix(gpus, [low, high], demand) == low


def test_no_answer_without_time(gpu, want) -> None:
    gpus = [gpu("H100-80GB", node="a")]
    plan = {("a", 0): Layout.parse("-")}
    assert mix(gpus, [plan], [want("1g.10gb", 1)], deadline=0.0) is None


def _with_starting_plans(data) -> tuple:
    """A drawn fleet and demand, and the starting plans for them (keep, the baselines)."""
    gpus = data.draw(fleets())
    demand = data.draw(demands(gpus))
    keep = {gpu_key(g): g.layout for g in gpus}
    plans = [keep] + [
        {**keep, **make(gpus, demand)}
        for make in (greedy_targets, first_fit_targets, static_targets)
    ]
    return gpus, demand, plans


@given(st.data())
@settings(max_examples=40, deadline=None, derandomize=True)
def test_the_mix_hosts_at_least_what_each_plan_does(data) -> None:
    # Any fleet and demand (gangs, either/or, bundles) with the starting plans: the mix
    # meets at least the most weighted demand any of them meets, node by node from one plan.
    gpus, demand, plans = _with_starting_plans(data)
    mixed = mix(gpus, plans, demand)
    assert mixed is not None
    best = max(score(gpus, plan, demand).weighted_met for plan in plans)
    assert score(gpus, mixed, demand).weighted_met >= best
    for node in {g.node for g in gpus}:
        keys = [gpu_key(g) for g in gpus if g.node == node]
        assert any(all(mixed[k] == plan[k] for k in keys) for plan in plans), node


@given(st.data())
@settings(max_examples=60, deadline=None, derandomize=True)
def test_each_choice_counts_its_node_as_the_plan_measures_go(data) -> None:
    # A node's choices are summed from its GPUs' shares, cached over the fleet: each must
    # say what `supply_of` and `disruption` say of that node's GPUs under those targets.
    gpus, _, plans = _with_starting_plans(data)
    # And one plan of any layouts: GPUs used whole, pods evicted, instances kept or not.
    plans.append({gpu_key(g): data.draw(st.sampled_from(enumerate_layouts(g.model))) for g in gpus})
    rebuild = data.draw(st.booleans())
    fleet = Fleet(gpus)
    shares = node_mix._Shares(fleet, plans, rebuild)
    for node in sorted({g.node for g in gpus}):
        on_node = [g for g in gpus if g.node == node]
        positions = [p for p, name in enumerate(fleet.nodes) if name == node]
        choices = shares.choices(positions)
        offered = {tuple(plan[gpu_key(g)] for g in on_node) for plan in plans}
        assert len(choices) == len(offered)
        for choice in choices:
            targets = choice.targets
            assert tuple(targets[gpu_key(g)] for g in on_node) in offered
            supply = supply_of(on_node, targets, rebuild=rebuild, per_node=True)
            scored = disruption(on_node, targets, weighted_met=0, rebuild=rebuild)
            assert +choice.total == +supply.total
            for profile in supply.total.keys() | supply.evicted.keys() | choice.free.keys():
                assert choice.free[profile] == supply.free_unclamped(profile), profile
            unkept = supply.unkept.get(node, Counter())
            for profile in unkept.keys() | choice.unkept.keys():
                assert choice.unkept[profile] == unkept[profile], profile
            assert choice.cost == (
                -scored.evictions,
                -scored.gpus_changed,
                -scored.nodes_touched,
            )
