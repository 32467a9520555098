"""The node stepper on the in-memory API server: every step, every rollback, and a resume
after a crash at each step boundary (the crash is the stepper's `boundary` callback)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from migplan.operator.controller import mig_manager
from migplan.operator.controller.actuators.base import DEFAULT_MIG_CONFIG_MAP
from migplan.operator.controller.rollout import CORDONED_BY, NodeStepper
from migplan.operator.controller.rollout_book import RolloutBook
from migplan.operator.dra import steer
from migplan.operator.sim.api_server import InMemoryCluster
from migplan.operator.sim.dra_slices import PublishedGpu, resource_slices
from migplan.planner.api.group import API_VERSION, PLANS
from migplan.planner.api.nodepartition import EVICTED_PODS_STOPPING, GpuTarget, NodePhase
from migplan.planner.api.spec import Actuator, DraMode
from migplan.planner.rollout.records import NodeRollout, NodeStep

PLAN = "p"
ROLLOUT = "h1"
NODE = "n1"
BEFORE = "1g.10gb@0"
AFTER = "7g.80gb@0"
ADDED = "1g.10gb@0+1g.10gb@1"
RESOURCE = "nvidia.com/mig-"
DRAIN_TIMEOUT = 300.0
AGENT_TIMEOUT = 600.0


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 26, 3, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def wait(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class Crash(Exception):
    """The operator stopping where the boundary callback is called."""


def allocatable(layout: str) -> dict[str, str]:
    counts: dict[str, int] = {}
    for instance in filter(None, layout.split("+")):
        name = RESOURCE + instance.split("@")[0]
        counts[name] = counts.get(name, 0) + 1
    return {name: str(n) for name, n in counts.items()}


def report(cluster: InMemoryCluster, *, layout: str, in_use: dict[str, str]) -> None:
    """What the node's agent reports: the GPU's layout and the pods holding instances."""
    cluster.plans.patch_node_partition_status(
        name=NODE,
        status={
            "phase": NodePhase.APPLIED,
            "appliedGeneration": cluster.plans.get_node_partition(name=NODE)["metadata"][
                "generation"
            ],
            "gpus": [{"index": 0, "layout": layout, "inUse": in_use}],
        },
    )
    current = cluster.core.get_node(name=NODE).status.allocatable or {}
    gone = {k: None for k in current if k.startswith(RESOURCE)}
    resources = {**gone, **allocatable(layout)}
    cluster.core.patch_node_status(
        name=NODE, status={"allocatable": resources, "capacity": resources}
    )


def agent_applies(cluster: InMemoryCluster) -> None:
    """The agent applies the NodePartition's spec (the device plugin follows)."""
    found = cluster.plans.get_node_partition(name=NODE)
    layout = found["spec"]["gpus"][0]["layout"]
    report(cluster, layout=layout, in_use={})


def agent_fails(
    cluster: InMemoryCluster,
    message: str,
    *,
    phase: NodePhase = NodePhase.FAILED,
    reason: str = "Failed",
) -> None:
    found = cluster.plans.get_node_partition(name=NODE)
    generation = found["metadata"]["generation"]
    cluster.plans.patch_node_partition_status(
        name=NODE,
        status={
            "phase": phase,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": reason,
                    "message": message,
                    "observedGeneration": generation,
                }
            ],
        },
    )


@pytest.fixture
def cluster() -> InMemoryCluster:
    """One H100 node whose GPU has one 1g.10gb instance, held by ml/frag; ml/keep runs on
    the node too (it holds nothing that goes); the plan object the records go into."""
    cluster = InMemoryCluster()
    cluster.add_node(NODE, labels={"nvidia.com/mig.capable": "true"}, allocatable={})
    cluster.add_node_partition(NODE)
    cluster.add_pod("ml", "frag", node=NODE, requests={RESOURCE + "1g.10gb": "1"})
    cluster.add_pod("ml", "keep", node=NODE)
    report(cluster, layout=BEFORE, in_use={"1g.10gb@0": "ml/frag"})
    cluster.store.create(PLANS, {"apiVersion": API_VERSION, "metadata": {"name": PLAN}})
    return cluster


def record(*, target: str = AFTER, evict: tuple[str, ...] = ("ml/frag",)) -> NodeRollout:
    return NodeRollout(
        node=NODE,
        before=(GpuTarget(index=0, layout=BEFORE),),
        gpus=(GpuTarget(index=0, layout=target),),
        evict=evict,
        disruptive=bool(evict) or target != ADDED,
    )


def stepper(cluster: InMemoryCluster, clock: Clock, **kwargs: Any) -> NodeStepper:
    events: list[tuple[str, str, str]] = kwargs.pop("events", [])
    book = RolloutBook(cluster)
    return NodeStepper(
        api=cluster,
        plan=PLAN,
        keep=lambda r: book.write(PLAN, input_hash=ROLLOUT, record=r),
        plan_generation=1,
        drain_timeout=DRAIN_TIMEOUT,
        agent_timeout=AGENT_TIMEOUT,
        events=lambda *event: events.append(event),
        clock=clock,
        **kwargs,
    )


def recorded(cluster: InMemoryCluster) -> NodeRollout:
    """The node's record as its NodePartition holds it (what a restarted operator reads)."""
    return RolloutBook(cluster).records(PLAN, input_hash=ROLLOUT)[NODE]


def cordoned(cluster: InMemoryCluster) -> bool:
    node = cluster.core.get_node(name=NODE)
    return bool(node.spec.unschedulable)


def pods(cluster: InMemoryCluster) -> set[str]:
    return {f"ml/{p.metadata.name}" for p in cluster.core.pods_on_node(node=NODE)}


def layout_written(cluster: InMemoryCluster) -> str:
    found = cluster.plans.get_node_partition(name=NODE)
    return str(found["spec"]["gpus"][0]["layout"])


def test_a_disruptive_change_takes_every_step_and_evicts_only_the_planned_pod(
    cluster: InMemoryCluster,
) -> None:
    clock = Clock()
    boundaries: list[tuple[str, NodeStep]] = []
    events: list[tuple[str, str, str]] = []
    node_events: list[tuple[str, str, str, str]] = []
    steps = stepper(
        cluster,
        clock,
        boundary=lambda *b: boundaries.append(b),
        events=events,
        node_events=lambda *e: node_events.append(e),
    )
    waiting = steps.advance(record())
    assert waiting.step is NodeStep.VERIFYING
    assert cordoned(cluster)
    assert cluster.core.get_node(name=NODE).metadata.annotations[CORDONED_BY] == PLAN
    assert pods(cluster) == {"ml/keep"}
    assert layout_written(cluster) == AFTER
    spec = cluster.plans.get_node_partition(name=NODE)["spec"]
    assert spec["evictedPods"] == ["ml/frag"]
    assert recorded(cluster) == waiting

    agent_applies(cluster)
    done = steps.advance(recorded(cluster))
    assert done.step is NodeStep.DONE
    assert not cordoned(cluster)
    assert CORDONED_BY not in (cluster.core.get_node(name=NODE).metadata.annotations or {})
    assert list(dict.fromkeys(b for b in boundaries if b[0] == "before")) == [
        ("before", step)
        for step in (
            NodeStep.CORDONING,
            NodeStep.EVICTING,
            NodeStep.PARTITIONING,
            NodeStep.VERIFYING,
            NodeStep.UNCORDONING,
            NodeStep.DONE,
        )
    ]
    assert [reason for _, reason, _ in events] == ["MigManagerDisabled", "Evicted", "NodeDone"]
    assert events[-1] == ("Normal", "NodeDone", f"{NODE}: reconfigured")
    on_node = [(n, r) for n, _, r, _ in node_events]
    assert on_node == [(NODE, "MigplanCordoned"), (NODE, "MigplanEvicted"), (NODE, "MigplanDone")]


def test_a_change_that_only_adds_instances_never_cordons(cluster: InMemoryCluster) -> None:
    clock = Clock()
    steps = stepper(cluster, clock)
    waiting = steps.advance(record(target=ADDED, evict=()))
    assert waiting.step is NodeStep.VERIFYING
    assert not cordoned(cluster)
    assert pods(cluster) == {"ml/frag", "ml/keep"}
    agent_applies(cluster)
    assert steps.advance(recorded(cluster)).step is NodeStep.DONE


def test_the_device_plugin_must_catch_up_before_the_node_is_done(
    cluster: InMemoryCluster,
) -> None:
    clock = Clock()
    steps = stepper(cluster, clock)
    steps.advance(record())
    report(cluster, layout=AFTER, in_use={})
    cluster.core.patch_node_status(name=NODE, status={"allocatable": {RESOURCE + "7g.80gb": None}})
    waiting = steps.advance(recorded(cluster))
    assert waiting.step is NodeStep.VERIFYING
    assert "waiting for the device plugin" in (waiting.message or "")
    assert cordoned(cluster)
    agent_applies(cluster)
    assert steps.advance(recorded(cluster)).step is NodeStep.DONE


def test_a_node_that_changed_since_planning_is_left_as_it_is(cluster: InMemoryCluster) -> None:
    report(cluster, layout="2g.20gb@0", in_use={})
    final = stepper(cluster, Clock()).advance(record())
    assert final.step is NodeStep.ROLLED_BACK
    assert final.stale
    assert not cordoned(cluster)
    assert pods(cluster) == {"ml/frag", "ml/keep"}


def test_a_pod_that_moved_to_another_node_is_never_evicted(cluster: InMemoryCluster) -> None:
    cluster.store.delete("pods", "frag", "ml")
    cluster.add_node("n2")
    cluster.add_pod("ml", "frag", node="n2")
    final = stepper(cluster, Clock()).advance(record())
    assert final.step is NodeStep.ROLLED_BACK
    assert "no longer on the node" in (final.message or "")
    assert cluster.core.get_pod(namespace="ml", name="frag").spec.node_name == "n2"
    assert not cordoned(cluster)


def test_a_pod_made_again_under_the_same_name_is_not_evicted(cluster: InMemoryCluster) -> None:
    """The pod is replaced after its UID was read, before the eviction: the Eviction API's
    UID precondition refuses, the node is rolled back and uncordoned."""

    def replace_the_pod(when: str, step: NodeStep) -> None:
        if (when, step) == ("before", NodeStep.EVICTING):
            cluster.store.delete("pods", "frag", "ml")
            cluster.add_pod("ml", "frag", node=NODE)

    final = stepper(cluster, Clock(), boundary=replace_the_pod).advance(record())
    assert final.step is NodeStep.ROLLED_BACK
    assert "replaced or moved" in (final.message or "")
    assert pods(cluster) == {"ml/frag", "ml/keep"}
    assert not cordoned(cluster)


def test_a_pod_the_plan_did_not_name_holding_an_instance_that_goes_stops_the_node(
    cluster: InMemoryCluster,
) -> None:
    report(cluster, layout=BEFORE, in_use={"1g.10gb@0": "ml/keep"})
    final = stepper(cluster, Clock()).advance(record())
    assert final.step is NodeStep.ROLLED_BACK
    assert "ml/keep" in (final.message or "")
    assert pods(cluster) == {"ml/frag", "ml/keep"}  # nobody evicted
    assert not cordoned(cluster)


def test_a_refused_eviction_waits_until_the_drain_timeout_then_rolls_back(
    cluster: InMemoryCluster,
) -> None:
    clock = Clock()
    cluster.core.refusals["ml/frag"] = "Cannot evict pod as it would violate the pod's budget."
    steps = stepper(cluster, clock)
    waiting = steps.advance(record())
    assert waiting.step is NodeStep.EVICTING
    assert "violate the pod's budget" in (waiting.message or "")
    assert cordoned(cluster)
    clock.wait(DRAIN_TIMEOUT / 2)
    assert steps.advance(recorded(cluster)).step is NodeStep.EVICTING
    clock.wait(DRAIN_TIMEOUT)
    final = steps.advance(recorded(cluster))
    assert final.step is NodeStep.ROLLED_BACK
    assert "drain timed out" in (final.message or "")
    assert not cordoned(cluster)
    assert "gpus" not in cluster.plans.get_node_partition(name=NODE)["spec"]  # never written


def test_a_terminating_pod_is_waited_for(cluster: InMemoryCluster) -> None:
    cluster.store.delete("pods", "keep", "ml")
    cluster.store.delete("pods", "frag", "ml")
    cluster.add_pod("ml", "frag", node=NODE, finalizers=["example.com/flush"])
    report(cluster, layout=BEFORE, in_use={"1g.10gb@0": "ml/frag"})
    clock = Clock()
    steps = stepper(cluster, clock)
    waiting = steps.advance(record())
    assert waiting.step is NodeStep.EVICTING
    assert "terminating" in (waiting.message or "")
    cluster.store.patch("pods", "frag", {"metadata": {"finalizers": None}}, namespace="ml")
    cluster.store.delete("pods", "frag", "ml")
    assert steps.advance(recorded(cluster)).step is NodeStep.VERIFYING


def test_an_agent_failure_ends_the_node_failed_uncordoned_and_pinned(
    cluster: InMemoryCluster,
) -> None:
    steps = stepper(cluster, Clock())
    steps.advance(record())
    agent_fails(cluster, "GPU 0 is in use by a process outside Kubernetes")
    final = steps.advance(recorded(cluster))
    assert final.step is NodeStep.FAILED
    assert "outside Kubernetes" in (final.failure or "")
    assert "GPU 0 as it was" in (final.message or "")
    assert not cordoned(cluster)
    assert layout_written(cluster) == BEFORE  # the agent stops trying


STILL_STOPPING = "GPU 0: 1g.10gb@0 still runs processes [9] (pod ml/frag was evicted; waiting)"


def test_evicted_pods_still_stopping_are_waited_for_not_failed(cluster: InMemoryCluster) -> None:
    """The agent reports Blocked while the evicted pod's processes stop (NVML may list them
    a moment after the pod object is gone): the node waits, and goes on once they stopped."""
    clock = Clock()
    steps = stepper(cluster, clock)
    steps.advance(record())
    agent_fails(cluster, STILL_STOPPING, phase=NodePhase.BLOCKED, reason=EVICTED_PODS_STOPPING)
    clock.wait(AGENT_TIMEOUT / 2)
    waiting = steps.advance(recorded(cluster))
    assert waiting.step is NodeStep.VERIFYING
    assert "waiting for evicted pods to stop" in (waiting.message or "")
    agent_applies(cluster)
    assert steps.advance(recorded(cluster)).step is NodeStep.DONE


def test_evicted_pods_that_never_stop_fail_the_node_at_the_agent_timeout(
    cluster: InMemoryCluster,
) -> None:
    clock = Clock()
    steps = stepper(cluster, clock)
    steps.advance(record())
    agent_fails(cluster, STILL_STOPPING, phase=NodePhase.BLOCKED, reason=EVICTED_PODS_STOPPING)
    clock.wait(AGENT_TIMEOUT + 1)
    final = steps.advance(recorded(cluster))
    assert final.step is NodeStep.FAILED
    assert "evicted pods did not stop in 600 s" in (final.failure or "")
    assert not cordoned(cluster)


def test_a_node_blocked_by_a_pod_the_plan_did_not_evict_fails_at_once(
    cluster: InMemoryCluster,
) -> None:
    steps = stepper(cluster, Clock())
    steps.advance(record())
    message = "GPU 0: 1g.10gb@0 is used by pod ml/other, which has not been evicted"
    agent_fails(cluster, message, phase=NodePhase.BLOCKED, reason="Blocked")
    final = steps.advance(recorded(cluster))
    assert final.step is NodeStep.FAILED
    assert "ml/other, which has not been evicted" in (final.failure or "")


def test_an_agent_that_never_answers_times_out(cluster: InMemoryCluster) -> None:
    clock = Clock()
    steps = stepper(cluster, clock)
    steps.advance(record())
    clock.wait(AGENT_TIMEOUT / 2)
    assert steps.advance(recorded(cluster)).step is NodeStep.VERIFYING
    clock.wait(AGENT_TIMEOUT)
    final = steps.advance(recorded(cluster))
    assert final.step is NodeStep.FAILED
    assert f"did not apply generation {final.generation}" in (final.failure or "")
    assert not cordoned(cluster)


def test_a_node_someone_else_cordoned_stays_cordoned(cluster: InMemoryCluster) -> None:
    cluster.core.patch_node(name=NODE, body={"spec": {"unschedulable": True}})
    steps = stepper(cluster, Clock())
    steps.advance(record())
    agent_applies(cluster)
    final = steps.advance(recorded(cluster))
    assert final.step is NodeStep.DONE
    assert cordoned(cluster)


HAPPY_PATH = [
    (when, step)
    for step in (
        NodeStep.PENDING,
        NodeStep.CORDONING,
        NodeStep.EVICTING,
        NodeStep.PARTITIONING,
        NodeStep.VERIFYING,
        NodeStep.UNCORDONING,
    )
    for when in ("before", "after")
    if (when, step) != ("before", NodeStep.PENDING)
] + [("before", NodeStep.DONE)]


def test_the_crash_points_are_every_boundary_of_the_happy_path(cluster: InMemoryCluster) -> None:
    seen: list[tuple[str, NodeStep]] = []
    steps = stepper(cluster, Clock(), boundary=lambda *b: seen.append(b))
    steps.advance(record())
    agent_applies(cluster)
    steps.advance(recorded(cluster))
    assert set(seen) == set(HAPPY_PATH)


@pytest.mark.parametrize(("when", "step"), HAPPY_PATH, ids=lambda v: str(getattr(v, "value", v)))
def test_a_crash_at_any_step_boundary_resumes_and_converges(
    cluster: InMemoryCluster, when: str, step: NodeStep
) -> None:
    clock = Clock()

    def crash(at: str, taken: NodeStep) -> None:
        if (at, taken) == (when, step):
            raise Crash(f"{at}:{taken.value}")

    first = stepper(cluster, clock, boundary=crash)
    start = record()
    try:
        current = first.advance(start)
        agent_applies(cluster)
        first.advance(recorded(cluster))
        raise AssertionError("never crashed")
    except Crash:
        pass
    restarted = stepper(cluster, clock)  # a new operator: only the records survive
    current = RolloutBook(cluster).records(PLAN, input_hash=ROLLOUT).get(NODE, start)
    for _ in range(5):
        if current.finished:
            break
        current = restarted.advance(current)
        if current.step is NodeStep.VERIFYING:
            agent_applies(cluster)
    assert current.step is NodeStep.DONE
    assert recorded(cluster).step is NodeStep.DONE
    assert not cordoned(cluster)
    assert pods(cluster) == {"ml/keep"}
    assert [w for w in cluster.store.writes if w[:2] == ("delete", "pods")] == [
        ("delete", "pods", "frag")
    ]
    assert layout_written(cluster) == AFTER


def _labels(cluster: InMemoryCluster) -> dict[str, str]:
    return dict(cluster.core.get_node(name=NODE).metadata.labels or {})


def _mig_manager_reports(cluster: InMemoryCluster, state: str, layout: str | None) -> None:
    """mig-manager's state label; with a layout, the GPU as it left it (the agent reports)."""
    cluster.core.patch_node(
        name=NODE, body={"metadata": {"labels": {mig_manager.STATE_LABEL: state}}}
    )
    if layout is not None:
        report(cluster, layout=layout, in_use={})


def test_mig_manager_gets_the_config_once_kubelet_can_have_put_it_in_its_file(
    cluster: InMemoryCluster,
) -> None:
    clock = Clock()
    steps = stepper(cluster, clock, actuator=Actuator.MIG_MANAGER, mig_config_propagation=90.0)
    waiting = steps.advance(record())
    assert waiting.step is NodeStep.PARTITIONING
    assert "for kubelet to put" in (waiting.message or "")
    namespace, name = DEFAULT_MIG_CONFIG_MAP
    entries = cluster.core.get_config_map_data(namespace=namespace, name=name)
    assert waiting.mig_config is not None
    assert waiting.mig_config in entries["config.yaml"]
    assert not cluster.plans.get_node_partition(name=NODE)["spec"]["gpus"]  # reports only
    assert mig_manager.CONFIG_LABEL not in _labels(cluster)
    clock.wait(91)
    handed = steps.advance(recorded(cluster))
    assert handed.step is NodeStep.VERIFYING
    assert _labels(cluster)[mig_manager.CONFIG_LABEL] == waiting.mig_config
    _mig_manager_reports(cluster, "success", AFTER)
    agent_applies_resources(cluster, AFTER)
    done = steps.advance(recorded(cluster))
    assert done.step is NodeStep.DONE
    assert done.message == "reconfigured"
    assert not cordoned(cluster)


def test_mig_manager_failing_is_retried_once_under_the_fresh_name(
    cluster: InMemoryCluster,
) -> None:
    clock = Clock()
    steps = stepper(cluster, clock, actuator=Actuator.MIG_MANAGER, mig_config_propagation=90.0)
    steps.advance(record())
    clock.wait(91)
    first = steps.advance(recorded(cluster))
    _mig_manager_reports(cluster, "failed", None)
    noted = steps.advance(recorded(cluster))
    assert noted.step is NodeStep.VERIFYING
    assert "retrying once" in (noted.message or "")
    assert _labels(cluster)[mig_manager.CONFIG_LABEL] == first.mig_config
    clock.wait(91)
    retried = steps.advance(recorded(cluster))
    assert retried.mig_config == first.mig_config_retry
    assert _labels(cluster)[mig_manager.CONFIG_LABEL] == first.mig_config_retry
    _mig_manager_reports(cluster, "failed", None)
    final = steps.advance(recorded(cluster))
    assert final.step is NodeStep.FAILED
    assert "failed for the retry too" in (final.failure or "")
    assert not cordoned(cluster)


def agent_applies_resources(cluster: InMemoryCluster, layout: str) -> None:
    """The device plugin offers what `layout` holds."""
    current = cluster.core.get_node(name=NODE).status.allocatable or {}
    resources = {**{k: None for k in current if k.startswith(RESOURCE)}, **allocatable(layout)}
    cluster.core.patch_node_status(name=NODE, status={"allocatable": resources})


@pytest.fixture
def steered(cluster: InMemoryCluster, catalog: Any) -> InMemoryCluster:
    """The node's GPU published by NVIDIA's DRA driver in DynamicMIG mode (its slots), with
    DeviceTaintRules served; no claim holds an instance."""
    cluster.dra.serving = True
    cluster.dra.taint_rules = True
    gpu = PublishedGpu(minor=0, uuid="GPU-0", model=catalog.model("H100-80GB"))
    for published in resource_slices(NODE, [gpu], mode="dynamic"):
        cluster.dra.apply_resource_slice(body=published)
    return cluster


def test_a_steered_node_gets_its_taint_rules_without_a_cordon(steered: InMemoryCluster) -> None:
    clock = Clock()
    steps = stepper(steered, clock, dra_mode=DraMode.STEER)
    start = NodeRollout(
        node=NODE,
        before=(GpuTarget(index=0, layout="-"),),
        gpus=(GpuTarget(index=0, layout=AFTER),),
        disruptive=False,
    )
    final = steps.advance(start)
    assert final.step is NodeStep.DONE
    assert final.message == "reconfigured"
    rules = steered.dra.list_taint_rules(label_selector=steer.PLAN_LABEL)
    assert rules  # every slot outside 7g.80gb@0 is tainted
    assert not cordoned(steered)


def test_steering_without_dynamic_mig_slots_leaves_the_node_alone(
    cluster: InMemoryCluster,
) -> None:
    cluster.dra.serving = True
    cluster.dra.taint_rules = True
    start = NodeRollout(
        node=NODE,
        before=(),
        gpus=(GpuTarget(index=0, layout=AFTER),),
        disruptive=False,
    )
    final = stepper(cluster, Clock(), dra_mode=DraMode.STEER).advance(start)
    assert final.step is NodeStep.ROLLED_BACK
    assert "publishes no DynamicMIG slots" in (final.message or "")
    assert not cluster.dra.list_taint_rules(label_selector=steer.PLAN_LABEL)
