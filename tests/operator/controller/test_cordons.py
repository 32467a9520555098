"""Cordoned nodes known from the node watch, and the ticker's round that relies on them."""

from __future__ import annotations

from datetime import UTC, datetime

from prometheus_client import REGISTRY

from migplan.operator.controller.cordons import CordonIndex
from migplan.operator.controller.rollout import CORDONED_BY
from migplan.operator.controller.ticker import PlanTicker
from migplan.operator.dra import steer
from migplan.operator.kueue.hook import KueueHook
from migplan.operator.sim.api_server import InMemoryCluster
from migplan.planner.api.group import PLANS


def test_the_index_follows_the_nodes_annotation() -> None:
    index = CordonIndex()
    assert not index.seen
    index.saw(name="a", annotations={CORDONED_BY: "p"}, owner_key=CORDONED_BY)
    index.saw(name="b", annotations=None, owner_key=CORDONED_BY)
    assert index.seen
    assert index.cordoned() == {"a": "p"}
    index.saw(name="a", annotations={}, owner_key=CORDONED_BY)  # uncordoned
    index.saw(name="c", annotations={CORDONED_BY: "q"}, owner_key=CORDONED_BY)
    index.forget("c")  # deleted
    assert index.cordoned() == {}


class _Controller:
    """What the ticker asks of the PlanController: ticks are recorded, not taken."""

    def __init__(self, api: InMemoryCluster) -> None:
        self.api = api
        self.kueue = KueueHook(api)
        self.ticked: list[str] = []

    def tick(self, name: str) -> None:
        self.ticked.append(name)

    def clock(self) -> datetime:
        return datetime(2026, 11, 24, tzinfo=UTC)


def _cluster(*plans: str, cordoned: dict[str, str] | None = None) -> InMemoryCluster:
    cluster = InMemoryCluster()
    for plan in plans:
        cluster.store.create(PLANS, {"metadata": {"name": plan}, "spec": {}})
    for node, owner in (cordoned or {}).items():
        cluster.add_node(node, labels={"nvidia.com/mig.capable": "true"})
        assert cluster.core.cordon_node(name=node, annotation=CORDONED_BY, owner=owner)
    return cluster


def _unschedulable(cluster: InMemoryCluster, node: str) -> bool:
    return bool(cluster.core.get_node(name=node).spec.unschedulable)


def test_a_round_reads_cordons_from_the_index_and_releases_orphans() -> None:
    cluster = _cluster("live", cordoned={"a": "live", "b": "deleted"})
    index = CordonIndex()
    index.saw(name="a", annotations={CORDONED_BY: "live"}, owner_key=CORDONED_BY)
    index.saw(name="b", annotations={CORDONED_BY: "deleted"}, owner_key=CORDONED_BY)
    controller = _Controller(cluster)
    PlanTicker(controller, interval=1.0, cordons=index).tick_all()
    assert controller.ticked == ["live"]
    assert _unschedulable(cluster, "a")
    assert not _unschedulable(cluster, "b")  # its plan is gone
    assert cluster.store.lists.count("nodes") == 1  # only to release b: counted from the index
    assert index.cordoned() == {"a": "live"}
    assert REGISTRY.get_sample_value("migplan_nodes_cordoned") == 2  # as the round began


def test_before_the_watch_has_spoken_a_round_lists_the_nodes() -> None:
    cluster = _cluster("live", cordoned={"a": "live"})
    PlanTicker(_Controller(cluster), interval=1.0, cordons=CordonIndex()).tick_all()
    assert REGISTRY.get_sample_value("migplan_nodes_cordoned") == 1
    assert _unschedulable(cluster, "a")


def _rule(plan: str, name: str) -> dict[str, object]:
    return {"metadata": {"name": name, "labels": {steer.PLAN_LABEL: plan}}, "spec": {}}


def test_taint_rules_of_plans_that_are_gone_are_removed() -> None:
    cluster = _cluster("live", "other")
    cluster.dra.taint_rules = True
    for plan in ("live", "gone", "other"):
        cluster.dra.create_taint_rule(body=_rule(plan, f"{plan}-0"))
    ticker = PlanTicker(_Controller(cluster), interval=1.0, cordons=CordonIndex())

    def rules() -> set[str]:
        found = cluster.dra.list_taint_rules(label_selector=steer.PLAN_LABEL)
        return {r["metadata"]["name"] for r in found}

    ticker.tick_all()  # the first round checks every rule
    assert rules() == {"live-0", "other-0"}
    cluster.dra.create_taint_rule(body=_rule("gone", "gone-1"))
    ticker.tick_all()
    assert "gone-1" in rules()  # later rounds check only the plans that disappeared
    cluster.store.delete(PLANS, "other")
    ticker.tick_all()  # a plan deleted since the last round
    assert rules() == {"live-0", "gone-1"}
