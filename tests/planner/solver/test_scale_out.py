"""The scale-out model: new nodes only for what is left, the cheapest offer, budgets, gangs
all or none, nothing created for demand no node meets, and a certificate the validator
checks."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migplan.planner.api.offers import Offer
from migplan.planner.api.spec import PolicySpec
from migplan.planner.demand import DemandItem, DemandKind, Part
from migplan.planner.hardware.catalog import default_catalog
from migplan.planner.hardware.layout import Layout
from migplan.planner.plan import Hosted
from migplan.planner.solver.scale_out import plan_scale_out
from migplan.planner.validate import InvalidPlanError, scale_out_problems, validate_scale_out

H100 = default_catalog().model("H100-80GB")
A30 = default_catalog().model("A30")


def pods(profile: str, count: int, *, gang: str = "", least: int = 0) -> DemandItem:
    return DemandItem(profile, count, 1, DemandKind.FREE, gang=gang, gang_minimum=least)


def offer(name: str = "h100-8x", *, gpus: int = 8, cost: int = 1, most: int = 4) -> Offer:
    return Offer(name, H100, gpus, cost, most)


def test_the_fewest_nodes_for_what_is_left_each_laid_out_only_for_it() -> None:
    left = [(3, pods("3g.40gb", 17)), (5, pods("1g.10gb", 3))]
    scale = plan_scale_out([offer()], left, PolicySpec())
    assert scale.status == "OPTIMAL"
    assert [n.name for n in scale.nodes] == ["h100-8x-1", "h100-8x-2"]
    assert [(i.demand, i.met) for i in scale.items] == [(3, 17), (5, 3)]
    created = [
        i.profile for n in scale.nodes for text in n.gpus for i in Layout.parse(text).instances
    ]
    assert sorted(created).count("3g.40gb") == 17
    assert sorted(created).count("1g.10gb") == 3
    assert sum(text != "-" for n in scale.nodes for text in n.gpus) == 9  # 3g@4 + 3 x 1g: one
    validate_scale_out(scale, left, [offer()], budget=None)


def test_the_cheaper_offer_is_taken_and_the_budget_holds() -> None:
    dear, cheap = offer("dear", cost=5), offer("cheap", cost=2)
    left = [(0, pods("3g.40gb", 20))]
    scale = plan_scale_out([dear, cheap], left, PolicySpec())
    assert scale.offer_counts() == {"cheap": 2}
    assert scale.cost == 4
    scale = plan_scale_out([dear, cheap], left, PolicySpec(), budget=1)
    assert len(scale.nodes) == 1
    assert scale.items[0].met == 16
    validate_scale_out(scale, left, [dear, cheap], budget=1)


def test_no_node_for_a_gang_that_would_still_not_fit() -> None:
    """A gang of 40 3g.40gb needs three 8-GPU nodes; with two allowed it is not met, nothing
    of its profile is created, and only the pods alone get a node."""
    left = [(0, pods("3g.40gb", 40, gang="PodGroup ml/big", least=40)), (1, pods("2g.20gb", 2))]
    scale = plan_scale_out([offer(most=2)], left, PolicySpec())
    assert [(i.demand, i.met) for i in scale.items] == [(0, 0), (1, 2)]
    assert len(scale.nodes) == 1
    assert "3g.40gb" not in "".join(scale.nodes[0].gpus)
    scale = plan_scale_out([offer(most=3)], left, PolicySpec())
    assert [(i.demand, i.met) for i in scale.items] == [(0, 40), (1, 2)]


def test_a_bundle_gets_its_instances_on_one_node() -> None:
    """Pods of 7 x 1g.10gb each fill one GPU; on 1-GPU nodes each pod needs a node."""
    bundle = DemandItem("1g.10gb", 3, 1, DemandKind.FREE, per_pod=(Part(("1g.10gb",), 7),))
    scale = plan_scale_out([offer(gpus=1, most=4)], [(0, bundle)], PolicySpec())
    assert len(scale.nodes) == 3
    assert all(h.units == 1 for n in scale.nodes for h in n.hosts)


def test_nothing_is_asked_for_where_no_offer_has_the_profile_or_nothing_is_left() -> None:
    scale = plan_scale_out([Offer("a30", A30, 4, 1, 2)], [(0, pods("3g.40gb", 2))], PolicySpec())
    assert scale.nodes == ()
    assert scale.reason == "no offer's GPU model has a profile the unmet demand asks for"
    assert plan_scale_out([offer()], [], PolicySpec()).reason == (
        "the covered GPUs meet all pending demand"
    )
    allowed = PolicySpec(allowed_profiles={"H100-80GB": ("1g.10gb",)})
    assert plan_scale_out([offer()], [(0, pods("3g.40gb", 2))], allowed).nodes == ()


@pytest.mark.parametrize(
    ("tamper", "message"),
    [
        (lambda n: {"gpus": ("3g.40gb@1", *n.gpus[1:])}, "3g.40gb cannot start at slice 1"),
        (lambda n: {"gpus": n.gpus[:1]}, "is no node of an offer"),
        (
            lambda n: {"hosts": (Hosted(demand=0, units=5, parts=({"3g.40gb": 5},)),)},
            "items [(0, 3, 3)], the nodes host [(0, 3, 5)]",
        ),
        (
            lambda n: {"hosts": (Hosted(demand=0, units=2, parts=({"3g.40gb": 1},)),)},
            "2 of 1 x 3g.40gb take",
        ),
    ],
)
def test_the_validator_checks_the_new_nodes(tamper, message) -> None:
    left = [(0, pods("3g.40gb", 3))]
    scale = plan_scale_out([offer(gpus=2)], left, PolicySpec())
    assert scale_out_problems(scale, left, [offer(gpus=2)], budget=None) == []
    node = scale.nodes[0]
    bad = scale.model_copy(update={"nodes": (node.model_copy(update=tamper(node)),)})
    with pytest.raises(InvalidPlanError) as caught:
        validate_scale_out(bad, left, [offer(gpus=2)], budget=None)
    assert message in str(caught.value)


def test_the_validator_refuses_a_part_met_gang_and_nodes_past_the_budget() -> None:
    left = [(0, pods("3g.40gb", 4, gang="PodGroup ml/g", least=4))]
    scale = plan_scale_out([offer(gpus=2)], left, PolicySpec())
    assert scale.items[0].met == 4
    node = scale.nodes[0]
    half = node.model_copy(update={"hosts": (Hosted(demand=0, units=2, parts=({"3g.40gb": 2},)),)})
    bad = scale.model_copy(
        update={"nodes": (half,), "items": (scale.items[0].model_copy(update={"met": 2}),)}
    )
    problems = [str(p) for p in scale_out_problems(bad, left, [offer(gpus=2)], budget=None)]
    assert any("gang PodGroup ml/g is part met" in p for p in problems), problems
    problems = [str(p) for p in scale_out_problems(scale, left, [offer(gpus=2)], budget=0)]
    assert any("maxNodes is 0" in p for p in problems), problems


MODELS = [default_catalog().model(k) for k in ("A30", "A100-40GB", "H100-80GB")]


@st.composite
def scale_out_cases(draw) -> tuple[list[Offer], list[tuple[int, DemandItem]], int | None]:
    """1-2 offers of small nodes and pending items of their models' profiles: plain,
    either/or, bundles, some in a gang."""
    offers = [
        Offer(
            f"o{k}",
            model,
            draw(st.integers(1, 2)),
            draw(st.integers(1, 3)),
            draw(st.integers(1, 3)),
        )
        for k, model in enumerate(draw(st.lists(st.sampled_from(MODELS), min_size=1, max_size=2)))
    ]
    names = sorted({p.name for o in offers for p in o.model.profiles if "+" not in p.name})
    left = []
    for n in range(draw(st.integers(1, 4))):
        profiles = tuple(
            draw(st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True))
        )
        count = draw(st.integers(1, 4))
        gang = draw(st.sampled_from(["", "", "PodGroup ml/g"]))
        if draw(st.booleans()):
            item = DemandItem(
                profiles[0],
                count,
                draw(st.integers(1, 3)),
                DemandKind.FREE,
                per_pod=(Part(profiles, draw(st.integers(2, 3))),),
            )
        else:
            item = DemandItem(
                profiles[0],
                count,
                draw(st.integers(1, 3)),
                DemandKind.FREE,
                alternatives=profiles[1:],
            )
        if gang:
            item = replace(item, gang=gang, gang_minimum=1)
        left.append((n, item))
    gangs = [item for _, item in left if item.gang]
    if gangs:  # one gang: its minimum is all of its units
        least = sum(item.count for item in gangs)
        left = [(n, replace(i, gang_minimum=least) if i.gang else i) for n, i in left]
    return offers, left, draw(st.none() | st.integers(0, 3))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(scale_out_cases())
def test_new_nodes_always_validate_and_a_larger_budget_never_meets_less(case) -> None:
    offers, left, budget = case
    scale = plan_scale_out(offers, left, PolicySpec(), budget=budget, time_limit=10)
    assert scale_out_problems(scale, left, offers, budget=budget) == []
    assert all(node.hosts for node in scale.nodes)
    assert scale.status == "OPTIMAL"
    if budget is not None:
        more = plan_scale_out(offers, left, PolicySpec(), budget=budget + 1, time_limit=10)
        assert more.weighted_met >= scale.weighted_met
