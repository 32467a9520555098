"""Reshaping nodes for pods that need several instances on one node, on fleets past
EXACT_NODES (where the model counts such pods' instances fleet-wide)."""

from __future__ import annotations

from migplan.planner.allocation import EXACT_NODES
from migplan.planner.api.spec import PolicySpec
from migplan.planner.assemble import gpu_key
from migplan.planner.solver import plan
from migplan.planner.solver.bundles import place_bundles
from migplan.planner.solver.gather import gather
from migplan.planner.validate import validate

SEVEN = "+".join(f"1g.10gb@{i}" for i in range(7))
WHOLE = "7g.80gb@0"


def fleet(gpu) -> list:
    """One free 1g.10gb on each of nodes a and b (six of seven in use), an empty H100 on
    node c, and busy nodes enough to pass EXACT_NODES."""
    spread = [
        gpu("H100-80GB", SEVEN, node=n, pins={f"1g.10gb@{i}": f"ns/{n}-{i}" for i in range(6)})
        for n in ("a", "b")
    ]
    busy = [
        gpu("H100-80GB", WHOLE, node=f"busy-{n:02d}", pins={WHOLE: f"ns/busy-{n}"})
        for n in range(EXACT_NODES - 2)
    ]
    return [*spread, gpu("H100-80GB", node="c"), *busy]


def test_a_node_is_reshaped_for_a_pod_no_node_hosts(gpu, bundle) -> None:
    # Two free 1g.10gb fleet-wide, which the model counts as enough, but on two nodes; no
    # swap of targets gathers them (both GPUs keep their layout): node c's GPU is reshaped.
    gpus, demand = fleet(gpu), [bundle(1, {"1g.10gb": 2})]
    keep = {gpu_key(g): g.layout for g in gpus}
    assert gather(gpus, keep, demand, PolicySpec()) is None
    placed = place_bundles(gpus, keep, demand, PolicySpec())
    assert placed is not None
    assert [k[0] for k, layout in placed.items() if layout != keep[k]] == ["c"]
    result = plan(gpus, demand, PolicySpec())
    validate(result, gpus, demand, PolicySpec())
    assert result.demand[0].met == 1
    assert [g.node for g in result.gpus if g.changed] == ["c"]
    assert result.solver.chosen == "cp-sat, bundles placed"
