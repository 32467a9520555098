"""Properties over random fleets and demand (hypothesis, derandomized), either/or items,
bundles (pods needing several instances on one node) and gangs (met whole or not at all)
included.

Every plan validates; under policy none no in-use instance is destroyed; met never exceeds
requested; the planner never meets less (priority-weighted) demand than any baseline.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from migplan.planner.api.inventory import GpuState
from migplan.planner.api.spec import Disruption, PolicySpec
from migplan.planner.baselines import first_fit_plan, greedy_plan, static_plan
from migplan.planner.demand import DemandItem, DemandKind, Part, demand_weight
from migplan.planner.hardware.catalog import default_catalog
from migplan.planner.hardware.enumeration import enumerate_layouts
from migplan.planner.hardware.layout import Instance, Layout
from migplan.planner.solver import plan
from migplan.planner.solver.objective import score
from migplan.planner.validate import problems_of

CATALOG = default_catalog()
MODELS = [CATALOG.model(k) for k in ("A30", "A100-40GB", "H100-80GB", "RTX-PRO-6000")]


@st.composite
def fleets(draw) -> list[GpuState]:
    gpus = []
    for n in range(draw(st.integers(1, 3))):
        model = draw(st.sampled_from(MODELS))
        for index in range(draw(st.integers(1, 3))):
            if draw(st.integers(0, 5)) == 0:
                # MIG off: a free GPU, or one a pod uses whole (#35: never generated before).
                whole = draw(st.none() | st.just(f"ns/whole-{n}-{index}"))
                gpus.append(
                    GpuState(
                        node=f"node-{n}",
                        index=index,
                        uuid=None,
                        model=model,
                        layout=Layout(()),
                        mig_enabled=False,
                        whole_gpu_pod=whole,
                    )
                )
                continue
            layout = draw(st.sampled_from(enumerate_layouts(model)))
            pinned = draw(
                st.lists(st.sampled_from(layout.instances), unique=True)
                if layout.instances
                else st.just([])
            )
            pins = {i: f"ns/pod-{n}-{index}-{k}" for k, i in enumerate(pinned)}
            gpus.append(
                GpuState(
                    node=f"node-{n}", index=index, uuid=None, model=model, layout=layout, pins=pins
                )
            )
    return gpus


@st.composite
def demands(draw, gpus: list[GpuState]) -> list[DemandItem]:
    names = sorted({p.name for g in gpus for p in g.model.profiles} | {"7g.80gb"})
    items = []
    for profile in draw(st.lists(st.sampled_from(names), min_size=1, max_size=4, unique=True)):
        # Some items are either/or (a DRA claim several profiles satisfy).
        others = [n for n in names if n != profile]
        alternatives = draw(st.lists(st.sampled_from(others), max_size=2, unique=True))
        items.append(
            DemandItem(
                profile,
                draw(st.integers(0, 5)),
                draw(st.integers(1, 3)),
                draw(st.sampled_from(list(DemandKind))),
                alternatives=tuple(alternatives),
            )
        )
    # And sometimes pods that need several instances on one node (a bundle).
    if draw(st.booleans()):
        chosen = draw(st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True))
        parts = tuple(sorted(Part((p,), draw(st.integers(1, 3))) for p in chosen))
        if sum(part.count for part in parts) > 1:
            items.append(
                DemandItem(
                    parts[0].profiles[0],
                    draw(st.integers(0, 3)),
                    draw(st.integers(1, 3)),
                    DemandKind.FREE,
                    per_pod=parts,
                )
            )
    # And sometimes a gang: some pending items met all together or not at all, each at least
    # its minimum, the gang at least its own (at times more than it asks: never met).
    free = [n for n, item in enumerate(items) if item.kind is DemandKind.FREE]
    if free and draw(st.booleans()):
        members = draw(st.lists(st.sampled_from(free), min_size=1, unique=True))
        total = sum(items[n].count for n in members)
        least = draw(st.integers(0, total + 1))
        for n in members:
            minimum = draw(st.integers(0, items[n].count))
            items[n] = replace(items[n], gang="PodGroup ns/g", minimum=minimum, gang_minimum=least)
    return items


policies = st.builds(
    PolicySpec,
    disruption=st.sampled_from(list(Disruption)),
    max_gpus_changed=st.none() | st.integers(0, 3),
    max_nodes_changed=st.none() | st.integers(0, 2),
)


@st.composite
def policies_with_rules(draw, gpus: list[GpuState]) -> PolicySpec:
    """Any policy, also with allowedProfiles (some profiles may not be created anew) and
    whole-GPU rebuilds (the mig-manager path)."""
    allowed = {}
    for model in sorted({g.model.model for g in gpus}):
        if draw(st.booleans()):
            names = [p.name for p in CATALOG.model(model).profiles]
            allowed[model] = tuple(draw(st.lists(st.sampled_from(names), unique=True)))
    return PolicySpec(
        disruption=draw(st.sampled_from(list(Disruption))),
        max_gpus_changed=draw(st.none() | st.integers(0, 3)),
        max_nodes_changed=draw(st.none() | st.integers(0, 2)),
        allowed_profiles=allowed,
        whole_gpu_rebuild=draw(st.booleans()),
    )


@st.composite
def problems(draw):
    gpus = draw(fleets())
    return gpus, draw(demands(gpus)), draw(policies)


@st.composite
def problems_with_rules(draw):
    gpus = draw(fleets())
    return gpus, draw(demands(gpus)), draw(policies_with_rules(gpus))


def weighted(result, demand) -> int:
    return sum(r.met * demand_weight(d) for r, d in zip(result.demand, demand, strict=True))


@settings(max_examples=60)
@given(problems())
def test_plans_validate_and_keep_what_they_must(case) -> None:
    gpus, demand, policy = case
    result = plan(gpus, demand, policy)
    assert problems_of(result, gpus, demand, policy) == []
    for r in result.demand:
        assert 0 <= r.met <= r.requested
    if policy.disruption is Disruption.NONE:
        assert result.summary.evictions == 0
        for g, gp in zip(gpus, result.gpus, strict=True):
            assert set(g.pins) <= set(Layout.parse(gp.after).instances)


def lexicographic(result, gpus, demand, rebuild=False):
    """The plan's whole objective, scored on its target layouts."""
    targets = {(g.node, g.gpu): Layout.parse(g.after) for g in result.gpus}
    return score(gpus, targets, demand, rebuild=rebuild)


@settings(max_examples=40)
@given(problems(), st.sampled_from([10.0, 1e-6]))
def test_never_worse_than_the_baselines(case, time_limit) -> None:
    # On the whole lexicographic objective, whatever the time limit (even one too short to
    # build the model): the plan starts from the best baseline and returns the better one.
    gpus, demand, _ = case
    policy = PolicySpec()  # the baselines never evict
    result = plan(gpus, demand, policy, time_limit=time_limit)
    assert result.solver.status in ("OPTIMAL", "FEASIBLE")
    assert problems_of(result, gpus, demand, policy) == []
    ours = lexicographic(result, gpus, demand)
    assert ours.weighted_met == weighted(result, demand)
    for baseline in (greedy_plan, first_fit_plan, static_plan):
        theirs = baseline(gpus, demand)
        assert problems_of(theirs, gpus, demand, policy) == []
        assert ours >= lexicographic(theirs, gpus, demand), baseline.__name__


@settings(max_examples=40)
@given(problems())
def test_allowing_evictions_never_meets_less(case) -> None:
    # With evictions the demand stage runs on a smaller model (every GPU may drop all its
    # in-use instances): it must find at least what keeping them finds.
    gpus, demand, _ = case
    kept = plan(gpus, demand, PolicySpec())
    evicting = plan(gpus, demand, PolicySpec(disruption=Disruption.EVICT))
    assert problems_of(evicting, gpus, demand, PolicySpec(disruption=Disruption.EVICT)) == []
    assert weighted(evicting, demand) >= weighted(kept, demand)
    if weighted(evicting, demand) == weighted(kept, demand):
        assert evicting.summary.evictions == 0  # no gain, no eviction


@settings(max_examples=150)
@given(problems_with_rules(), st.sampled_from([10.0, 1e-6]))
def test_every_policy_gives_a_valid_plan_never_worse_than_keeping(case, time_limit) -> None:
    gpus, demand, policy = case
    result = plan(gpus, demand, policy, time_limit=time_limit)
    assert result.solver.status in ("OPTIMAL", "FEASIBLE")
    assert problems_of(result, gpus, demand, policy) == []
    keep = {(g.node, g.index): g.layout for g in gpus}
    rebuild = policy.whole_gpu_rebuild
    assert lexicographic(result, gpus, demand, rebuild) >= score(
        gpus, keep, demand, rebuild=rebuild
    )


def test_instance_helper_round_trip() -> None:
    assert str(Instance.parse("1g.5gb+me@3")) == "1g.5gb+me@3"
