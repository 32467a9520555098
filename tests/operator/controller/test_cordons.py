"""Cordoned nodes known from the node watch, and the ticker's round that relies on them."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from prometheus_client import REGISTRY

from migplan.operator.controller import ticker as ticker_module
from migplan.operator.controller.cordons import CordonIndex
from migplan.operator.controller.rollout import CORDONED_BY
from migplan.operator.controller.ticker import PlanTicker


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
    api = object()

    def __init__(self) -> None:
        self.ticked: list[str] = []

    def tick(self, name: str) -> None:
        self.ticked.append(name)

    def clock(self) -> datetime:
        return datetime(2026, 11, 24, tzinfo=UTC)

    def kueue_served(self) -> bool:
        return False


@pytest.fixture(autouse=True)
def _no_dra(monkeypatch) -> None:
    monkeypatch.setattr(ticker_module.kube, "taint_rules_served", lambda api: False)


def test_a_round_reads_cordons_from_the_index_and_releases_orphans(monkeypatch) -> None:
    released: list[str] = []
    monkeypatch.setattr(
        ticker_module.kube, "list_plans", lambda api: [{"metadata": {"name": "live"}}]
    )

    def no_list(*args, **kwargs):
        raise AssertionError("the round listed the nodes")

    monkeypatch.setattr(ticker_module.kube, "list_nodes", no_list)
    monkeypatch.setattr(
        ticker_module, "release_nodes", lambda api, plan: released.append(plan) or ["b"]
    )
    index = CordonIndex()
    index.saw(name="a", annotations={CORDONED_BY: "live"}, owner_key=CORDONED_BY)
    index.saw(name="b", annotations={CORDONED_BY: "deleted"}, owner_key=CORDONED_BY)
    controller = _Controller()
    PlanTicker(controller, interval=1.0, cordons=index).tick_all()
    assert controller.ticked == ["live"]
    assert released == ["deleted"]
    assert index.cordoned() == {"a": "live"}
    assert REGISTRY.get_sample_value("migplan_nodes_cordoned") == 2  # as the round began


def test_before_the_watch_has_spoken_a_round_lists_the_nodes(monkeypatch) -> None:
    node = SimpleNamespace(metadata=SimpleNamespace(name="a", annotations={CORDONED_BY: "live"}))
    monkeypatch.setattr(
        ticker_module.kube, "list_plans", lambda api: [{"metadata": {"name": "live"}}]
    )
    monkeypatch.setattr(ticker_module.kube, "list_nodes", lambda api, label_selector: [node])
    PlanTicker(_Controller(), interval=1.0, cordons=CordonIndex()).tick_all()
    assert REGISTRY.get_sample_value("migplan_nodes_cordoned") == 1


def test_taint_rules_of_plans_that_are_gone_are_removed(monkeypatch) -> None:
    plans = [{"metadata": {"name": "live"}}, {"metadata": {"name": "other"}}]
    removed: list[str] = []
    monkeypatch.setattr(ticker_module.kube, "taint_rules_served", lambda api: True)
    monkeypatch.setattr(ticker_module.kube, "list_plans", lambda api: list(plans))
    monkeypatch.setattr(ticker_module.kube, "list_nodes", lambda api, label_selector: [])
    rules = [{"metadata": {"labels": {"migplan.io/plan": p}}} for p in ("live", "gone")]
    monkeypatch.setattr(ticker_module.kube, "list_taint_rules", lambda api, label_selector: rules)
    monkeypatch.setattr(ticker_module.steer, "remove", lambda api, plan: removed.append(plan) or 1)
    ticker = PlanTicker(_Controller(), interval=1.0, cordons=CordonIndex())
    ticker.tick_all()  # the first round checks every rule
    assert removed == ["gone"]
    ticker.tick_all()
    assert removed == ["gone"]  # nothing disappeared
    plans.pop()
    ticker.tick_all()  # a plan deleted since the last round
    assert removed == ["gone", "other"]
