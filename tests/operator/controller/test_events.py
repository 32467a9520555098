"""Events aggregate repeats and land on the object they concern (the in-memory API server)."""

from __future__ import annotations

from migplan.operator.controller.events import AGGREGATE_SECONDS, EventRecorder
from migplan.operator.sim.api_server import InMemoryCluster

PLAN = {"apiVersion": "migplan.io/v1alpha1", "kind": "GPUPartitionPlan", "metadata": {"name": "p"}}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_repeat_raises_the_count_of_the_event_already_posted() -> None:
    cluster, clock = InMemoryCluster(), Clock()
    recorder = EventRecorder(cluster, monotonic=clock)
    for _ in range(3):
        recorder.post(PLAN, "Warning", "TickFailed", "the API server is away")
    recorder.post(PLAN, "Warning", "TickFailed", "something else")
    found = cluster.events("TickFailed")
    assert [(e["message"], e["count"]) for e in found] == [
        ("the API server is away", 3),
        ("something else", 1),
    ]
    clock.now += AGGREGATE_SECONDS + 1
    recorder.post(PLAN, "Warning", "TickFailed", "the API server is away")
    assert len(cluster.events("TickFailed")) == 3  # long after: a new event


def test_an_event_that_expired_is_posted_again() -> None:
    cluster = InMemoryCluster()
    recorder = EventRecorder(cluster)
    recorder.post(PLAN, "Normal", "Planned", "3/3 met")
    (posted,) = cluster.events("Planned")
    cluster.store.delete("events", posted["metadata"]["name"], "default")  # the TTL ran out
    recorder.post(PLAN, "Normal", "Planned", "3/3 met")
    assert [e["count"] for e in cluster.events("Planned")] == [1]


def test_a_node_event_names_the_node() -> None:
    cluster = InMemoryCluster()
    cluster.add_node("n1")
    EventRecorder(cluster).on_node("n1", "Normal", "MigplanCordoned", "cordoned by plan p")
    (event,) = cluster.events("MigplanCordoned")
    assert event["involvedObject"]["kind"] == "Node"
    assert event["involvedObject"]["name"] == "n1"
    assert event["involvedObject"]["uid"] == cluster.core.get_node(name="n1").metadata.uid


def test_a_failure_to_post_is_not_raised() -> None:
    EventRecorder(InMemoryCluster()).on_node("gone", "Normal", "MigplanCordoned", "x")


def test_a_nodes_uid_is_read_once() -> None:
    cluster = InMemoryCluster()
    cluster.add_node("n1")
    reads: list[str] = []
    get_node = cluster.core.get_node

    def counted(*, name: str):
        reads.append(name)
        return get_node(name=name)

    cluster.core.get_node = counted  # type: ignore[method-assign]
    recorder = EventRecorder(cluster)
    recorder.on_node("n1", "Normal", "MigplanCordoned", "cordoned by plan p")
    recorder.on_node("n1", "Normal", "MigplanDone", "reconfigured")
    assert reads == ["n1"]
    assert len(cluster.events()) == 2
