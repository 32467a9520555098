"""What the model counts as each node's free instances (`node_bundles.node_free`, what pods
needing several instances on one node draw on) is, for any solution of the model, there on
the node once the solution is placed on its GPUs: the layouts leave at least that many free
after kept in-use instances (placing may keep an instance an option leaves out, where that
saves an operation, never the reverse)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from ortools.sat.python import cp_model
from test_properties import fleets

from migplan.planner.api.spec import Disruption, PolicySpec
from migplan.planner.assemble import supply_of
from migplan.planner.solver.assign import map_to_gpus
from migplan.planner.solver.classes import group_gpus
from migplan.planner.solver.model import PlanningModel
from migplan.planner.solver.node_bundles import node_free
from migplan.planner.solver.pools import build_pools
from migplan.planner.solver.stages import StagedResult

EVICT = PolicySpec(disruption=Disruption.EVICT)


@given(fleets(), st.lists(st.integers(-6, 3), min_size=40, max_size=40))
@settings(max_examples=60, deadline=None, derandomize=True)
def test_a_nodes_free_instances_are_there_once_placed(gpus, weights) -> None:
    # Any solution of the model evicting fewest, placed on the GPUs: each node's layouts
    # leave free what the model counts, or more.
    profiles = sorted({p for g in gpus for p in g.model.profiles_by_name})
    classes = group_gpus(gpus, by_node=True)
    pools = build_pools(classes, profiles=profiles, policy=EVICT, per_node=True)
    pm = PlanningModel(classes=classes, pools=pools, demand=[], policy=EVICT, per_node=True)
    pm.build()
    nodes = sorted({g.node for g in gpus})
    free = node_free(pm, nodes)
    # The GPUs changed and the options taken, under arbitrary weights (some GPUs kept).
    takes = [v for v in pm.changed if v is not None] + [v for row in pm.take for v in row]
    arbitrary = cp_model.LinearExpr.weighted_sum(
        takes, [weights[k % len(weights)] for k in range(len(takes))]
    )
    # Fewest evictions first, as every plan's evictions stage ensures: a solution evicting a
    # pod from an instance its option still holds is placed keeping the pod there, so the
    # node would hold one instance fewer than counted.
    pm.model.maximize(arbitrary - 1000 * pm.evictions())
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    assert solver.solve(pm.model) == cp_model.OPTIMAL
    result = StagedResult(values=dict(enumerate(solver.response_proto.solution)), found=True)
    targets = map_to_gpus(pm=pm, result=result, policy=EVICT)
    left = supply_of(gpus, targets, per_node=True).unkept
    for node in nodes:
        for profile in profiles:
            assert solver.value(free[node, profile]) <= left[node][profile], (node, profile)
