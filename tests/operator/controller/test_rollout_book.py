"""The rollout book: each node's record kept in its NodePartition, read back by a restarted
operator, an older rollout's and another plan's records never counted."""

from __future__ import annotations

import json

import pytest

from migplan.operator.controller.rollout_book import (
    PLAN_LABEL,
    RECORD,
    NoPartitionError,
    RolloutBook,
    read_records,
    rollout_id,
)
from migplan.operator.sim.api_server import InMemoryCluster
from migplan.planner.api.group import NODE_PARTITIONS
from migplan.planner.api.nodepartition import GpuTarget
from migplan.planner.rollout.records import NodeRollout, NodeStep

NODES = ("n0", "n1", "n2")


@pytest.fixture
def cluster() -> InMemoryCluster:
    cluster = InMemoryCluster()
    for node in NODES:
        cluster.add_node_partition(node)
    return cluster


def record(node: str, step: NodeStep = NodeStep.PENDING) -> NodeRollout:
    eight = tuple(GpuTarget(index=i, uuid=f"GPU-{node}-{i}", layout="7g.80gb@0") for i in range(8))
    return NodeRollout(node=node, step=step, before=eight, gpus=eight, disruptive=True)


def test_records_written_are_read_back_by_another_operator(cluster: InMemoryCluster) -> None:
    book = RolloutBook(cluster)
    book.begin("p", input_hash="h1", records=[record(n) for n in NODES])
    book.write("p", input_hash="h1", record=record("n1", NodeStep.EVICTING))
    fresh = RolloutBook(cluster).records("p", input_hash="h1")
    assert {n: r.step for n, r in fresh.items()} == {
        "n0": NodeStep.PENDING,
        "n1": NodeStep.EVICTING,
        "n2": NodeStep.PENDING,
    }
    assert fresh["n1"] == record("n1", NodeStep.EVICTING)
    assert book.records("p", input_hash="h1") == fresh


def test_an_older_rollouts_and_another_plans_records_do_not_count(
    cluster: InMemoryCluster,
) -> None:
    book = RolloutBook(cluster)
    book.begin("p", input_hash="h1", records=[record(n, NodeStep.DONE) for n in NODES])
    book.begin("p", input_hash="h2", records=[record("n0")])
    RolloutBook(cluster).begin("q", input_hash="h1", records=[record("n2")])
    assert set(read_records(cluster, plan="p", input_hash="h2")) == {"n0"}
    assert set(read_records(cluster, plan="p", input_hash="h1")) == {"n1"}  # n0, n2 moved on
    assert set(RolloutBook(cluster).records("q", input_hash="h1")) == {"n2"}
    assert RolloutBook(cluster).records("p", input_hash=None) == {}


def test_a_step_writes_its_own_node_only(cluster: InMemoryCluster) -> None:
    book = RolloutBook(cluster)
    book.begin("p", input_hash="h1", records=[record(n) for n in NODES])
    cluster.store.writes.clear()
    book.write("p", input_hash="h1", record=record("n2", NodeStep.CORDONING))
    assert cluster.store.writes == [("patch", NODE_PARTITIONS, "n2")]
    found = cluster.plans.get_node_partition(name="n2")
    assert found["metadata"]["labels"][PLAN_LABEL] == "p"
    text = found["metadata"]["annotations"][RECORD]
    assert json.loads(text)["record"]["step"] == "Cordoning"
    assert len(text) < 1100  # an 8-GPU node's record, defaults left out


def test_a_node_without_a_partition_is_an_error(cluster: InMemoryCluster) -> None:
    with pytest.raises(NoPartitionError, match="gone"):
        RolloutBook(cluster).write("p", input_hash="h1", record=record("gone"))


def test_records_an_older_migplan_kept_in_the_plan_are_taken_over(
    cluster: InMemoryCluster,
) -> None:
    legacy = {
        "n0": record("n0", NodeStep.VERIFYING).model_dump(mode="json", by_alias=True),
        "n1": None,
    }
    taken = RolloutBook(cluster).records("p", input_hash="h1", legacy=legacy)
    assert {n: r.step for n, r in taken.items()} == {"n0": NodeStep.VERIFYING}
    assert set(read_records(cluster, plan="p", input_hash="h1")) == {"n0"}


def test_the_same_rollout_recorded_again_writes_nothing(cluster: InMemoryCluster) -> None:
    book = RolloutBook(cluster)
    book.begin("p", input_hash="h1", records=[record(n) for n in NODES])
    cluster.store.writes.clear()
    book.begin("p", input_hash="h1", records=[record(n) for n in NODES])
    assert cluster.store.writes == []
    book.begin("p", input_hash="h1", records=[record("n0", NodeStep.DONE)])
    assert cluster.store.writes == [("patch", NODE_PARTITIONS, "n0")]
    assert set(book.records("p", input_hash="h1")) == {"n0"}


def test_a_different_plan_under_the_same_inputs_is_another_rollout() -> None:
    first = [record(n) for n in NODES]
    assert rollout_id("h1", first) == rollout_id("h1", list(reversed(first)))
    assert rollout_id("h1", first) != rollout_id("h1", first[:2])
    assert rollout_id("h1", first) != rollout_id("h2", first)
