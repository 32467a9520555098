"""Plans measured per situation and target (`fleet.py`) measure what a walk over every GPU
measures: supply, kept and evicted instances, per-node spare instances, evictions, GPUs
changed, nodes touched, headroom and operations."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from migplan.planner.api.inventory import GpuState
from migplan.planner.assemble import supply_of
from migplan.planner.diff import operations, removed_instances
from migplan.planner.fleet import Fleet
from migplan.planner.hardware.catalog import default_catalog
from migplan.planner.hardware.enumeration import enumerate_layouts
from migplan.planner.hardware.layout import Layout
from migplan.planner.hardware.tables import headroom
from migplan.planner.solver.objective import Score, disruption

CATALOG = default_catalog()
MODELS = [CATALOG.model(k) for k in ("A30", "A100-40GB", "H100-80GB")]


@st.composite
def gpu(draw, node: str, index: int) -> GpuState:
    """A GPU as an inventory holds it; few layouts, so situations repeat."""
    model = draw(st.sampled_from(MODELS))
    if draw(st.integers(0, 5)) == 0:
        whole = draw(st.none() | st.just(f"ns/whole-{node}-{index}"))
        return GpuState(
            node=node,
            index=index,
            uuid=None,
            model=model,
            layout=Layout(()),
            mig_enabled=False,
            whole_gpu_pod=whole,
        )
    layout = draw(st.sampled_from(enumerate_layouts(model)[:6]))
    pinned = draw(st.lists(st.sampled_from(layout.instances), unique=True, max_size=2))
    pins = {i: f"ns/pod-{node}-{index}-{k}" for k, i in enumerate(pinned)}
    shared = draw(st.lists(st.sampled_from(pinned), unique=True)) if pinned else []
    sharers = {i: tuple(f"ns/also-{node}-{index}-{k}" for k in range(2)) for i in shared}
    return GpuState(
        node=node, index=index, uuid=None, model=model, layout=layout, pins=pins, sharers=sharers
    )


@st.composite
def plans(draw) -> tuple[list[GpuState], dict[tuple[str, int], Layout]]:
    """A fleet and targets for it: each GPU kept or sent to one of a few layouts."""
    gpus = [draw(gpu(f"node-{n}", i)) for n in range(draw(st.integers(1, 4))) for i in range(3)]
    targets = {}
    for g in gpus:
        choices = [g.layout, Layout(()), *enumerate_layouts(g.model)[:4]]
        targets[(g.node, g.index)] = draw(st.sampled_from(choices))
    return gpus, targets


def walked_score(gpus: list[GpuState], targets: dict, *, rebuild: bool) -> Score:
    """The criteria after demand met, GPU by GPU."""
    evictions = changed = room = steps = 0
    nodes = set()
    for g in gpus:
        after = targets[(g.node, g.index)]
        room += headroom(g.model, after)
        ops = operations(g.layout, after, mig_enabled=g.mig_enabled, rebuild=rebuild)
        if not ops:
            continue
        removed = removed_instances(g.layout, after, rebuild=rebuild)
        evictions += sum(1 + len(g.sharers.get(i, ())) for i in g.pins if i in removed)
        evictions += g.whole_gpu_pod is not None
        changed += 1
        nodes.add(g.node)
        steps += len(ops)
    return Score(0, -evictions, -changed, -len(nodes), room, -steps)


@given(plans(), st.booleans())
@settings(max_examples=150, deadline=None, derandomize=True)
def test_scored_per_situation_as_gpu_by_gpu(plan, rebuild) -> None:
    gpus, targets = plan
    fleet = Fleet(gpus)
    assert disruption(fleet, targets, weighted_met=0, rebuild=rebuild) == walked_score(
        gpus, targets, rebuild=rebuild
    )
    assert disruption(gpus, targets, weighted_met=0, rebuild=rebuild) == walked_score(
        gpus, targets, rebuild=rebuild
    )


@given(plans(), st.booleans())
@settings(max_examples=150, deadline=None, derandomize=True)
def test_supply_per_situation_as_gpu_by_gpu(plan, rebuild) -> None:
    gpus, targets = plan
    total, kept, evicted = Counter(), Counter(), Counter()
    unkept: dict[str, Counter] = {}
    for g in gpus:
        after = targets[(g.node, g.index)]
        removed = removed_instances(g.layout, after, rebuild=rebuild)
        total.update(i.profile for i in after.instances)
        kept.update(i.profile for i in g.pins if i not in removed)
        evicted.update(i.profile for i in g.pins if i in removed)
        node = unkept.setdefault(g.node, Counter())
        node.update(i.profile for i in after.instances)
        node.subtract(i.profile for i in g.pins if i not in removed)
    supply = supply_of(Fleet(gpus), targets, rebuild=rebuild, per_node=True)
    assert +supply.total == +total
    assert +supply.kept_in_use == +kept
    assert +supply.evicted == +evicted
    assert {n: +c for n, c in supply.unkept.items()} == {n: +c for n, c in unkept.items()}


def test_a_fleet_is_its_gpus_in_order() -> None:
    model = CATALOG.model("A30")
    gpus = [
        GpuState(node=f"n{k}", index=0, uuid=None, model=model, layout=Layout(())) for k in range(3)
    ]
    fleet = Fleet(gpus)
    assert list(fleet) == gpus
    assert len(fleet) == 3
    assert fleet[1] is gpus[1]
    assert fleet[1:] == gpus[1:]
    assert len(fleet.situations) == 1
