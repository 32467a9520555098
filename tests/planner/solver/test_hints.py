"""A plan's targets as the model's starting solution (`hints.hint_from_targets`): where the
model can express the plan, the hint is a complete solution of it that counts the GPUs and
nodes the plan changes, whichever layouts the GPUs of one class are sent to."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hypothesis import given, settings
from ortools.sat.python import cp_model
from test_properties import problems

from migplan.planner.allocation import EXACT_NODES
from migplan.planner.api.inventory import GpuState
from migplan.planner.api.spec import PolicySpec
from migplan.planner.assemble import GpuKey, gpu_key
from migplan.planner.baselines import first_fit_targets, greedy_targets, static_targets
from migplan.planner.demand import DemandItem, DemandKind
from migplan.planner.hardware.catalog import default_catalog
from migplan.planner.hardware.layout import Layout
from migplan.planner.solver.classes import group_gpus
from migplan.planner.solver.facade import relevant_profiles
from migplan.planner.solver.hints import hint_from_targets
from migplan.planner.solver.model import PlanningModel
from migplan.planner.solver.pools import build_pools

A100 = default_catalog().model("A100-40GB")


def _model(
    gpus: Sequence[GpuState], demand: Sequence[DemandItem], policy: PolicySpec
) -> PlanningModel:
    """The planning model of a pass, classes and pools made as the planner makes them."""
    per_node = any(d.per_pod for d in demand) and len({g.node for g in gpus}) <= EXACT_NODES
    classes = group_gpus(gpus, by_node=per_node)
    profiles = sorted(relevant_profiles(gpus, demand, policy))
    pools = build_pools(classes, profiles=profiles, policy=policy, per_node=per_node)
    return PlanningModel(
        classes=classes, pools=pools, demand=demand, policy=policy, per_node=per_node
    ).build()


def _changed(gpu: GpuState, target: Layout) -> bool:
    return target != gpu.layout if gpu.mig_enabled else bool(target)


def _assert_solution_counting_changes(
    pm: PlanningModel, gpus: Sequence[GpuState], targets: Mapping[GpuKey, Layout]
) -> None:
    hint = hint_from_targets(pm, targets)
    assert hint is not None
    model = pm.model.clone()
    model.clear_hints()
    count = len(model.proto.variables)
    model.proto.solution_hint.vars.extend(range(count))
    model.proto.solution_hint.values.extend(hint.get(index, 0) for index in range(count))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.fix_variables_to_their_hinted_value = True
    assert solver.solve(model) in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    moved = [g for g in gpus if _changed(g, targets[gpu_key(g)])]
    assert solver.value(pm.gpus_changed()) == len(moved)
    assert solver.value(pm.nodes_touched()) == len({g.node for g in moved})


def test_gpus_of_one_class_sent_to_different_layouts_are_counted_per_node() -> None:
    """Six empty A100s on three nodes, one class: two nodes' GPUs go two ways, one node's
    one GPU stays. Five GPUs change on three nodes, and the node counts fit the groups."""
    gpus = [
        GpuState(node=f"node-{n}", index=i, uuid=None, model=A100, layout=Layout(()))
        for n in range(3)
        for i in range(2)
    ]
    seven = Layout.parse("1g.5gb@0+1g.5gb@1+1g.5gb@2+1g.5gb@3+1g.5gb@4+1g.5gb@5+1g.5gb@6")
    whole = Layout.parse("7g.40gb@0")
    targets = {
        ("node-0", 0): seven,
        ("node-0", 1): whole,
        ("node-1", 0): seven,
        ("node-1", 1): Layout(()),
        ("node-2", 0): whole,
        ("node-2", 1): whole,
    }
    demand = [
        DemandItem("1g.5gb", 14, 1, DemandKind.FREE),
        DemandItem("7g.40gb", 3, 1, DemandKind.FREE),
    ]
    pm = _model(gpus, demand, PolicySpec())
    assert len(pm.classes) == 1
    _assert_solution_counting_changes(pm, gpus, targets)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(problems())
def test_every_expressible_baseline_is_a_solution_counting_its_changes(problem) -> None:
    gpus, demand, policy = problem
    pm = _model(gpus, demand, policy)
    keep = {gpu_key(g): g.layout for g in gpus}
    for heuristic in (greedy_targets, first_fit_targets, static_targets):
        targets = {**keep, **heuristic(gpus, demand)}
        if hint_from_targets(pm, targets) is not None:
            _assert_solution_counting_changes(pm, gpus, targets)
