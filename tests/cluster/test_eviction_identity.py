"""Only the pod the plan named, where it named it, is ever evicted (real API server, the node
stepper in-process): a same-named pod on another node, or one made again under that name, is
left alone and the node is rolled back to be planned again."""

from __future__ import annotations

import json

import pytest
from nodes import KWOK_TOLERATION, gpu_node, report_partition
from pools import apply
from waiting import wait_for

from migplan.operator.controller.rollout import CORDONED_BY, NodeStepper
from migplan.operator.controller.rollout_book import RolloutBook
from migplan.operator.kube.connect import connect
from migplan.operator.kube.core import Core, PodReplacedError
from migplan.planner.api.nodepartition import GpuTarget
from migplan.planner.rollout.records import NodeRollout, NodeStep

pytestmark = pytest.mark.cluster

NS = "evid"
PLAN = "evid"
POD = f"{NS}/trainer"


def bare_pod(name: str, *, node: str) -> dict:
    """A pod bound to `node` (kwok runs it), no scheduler involved."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "nodeName": node,
            "tolerations": [KWOK_TOLERATION],
            "containers": [{"name": "main", "image": "registry.invalid/cuda:latest"}],
        },
    }


def pod_doc(cp, name: str = "trainer") -> dict | None:
    found = cp.kubectl("get", "pod", "-n", NS, name, "-o", "json", check=False)
    return json.loads(found.stdout) if found.returncode == 0 else None


def place_trainer(cp, node: str) -> str:
    """(Re)create the trainer pod on `node`, running; its UID."""
    cp.kubectl("delete", "pod", "-n", NS, "trainer", "--grace-period=0", "--force", check=False)
    wait_for(lambda: pod_doc(cp) is None, "the old trainer to go")
    apply(cp, bare_pod("trainer", node=node))
    wait_for(
        lambda: (d := pod_doc(cp)) is not None and d["status"].get("phase") == "Running",
        "the trainer to run",
    )
    return pod_doc(cp)["metadata"]["uid"]


@pytest.fixture(scope="module")
def evid(crds):
    cp = crds
    apply(
        cp,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        gpu_node(f"{NS}-a", product="NVIDIA-H100-80GB-HBM3", labels={"migplan.io/pool": NS}),
        gpu_node(f"{NS}-b", product="NVIDIA-H100-80GB-HBM3", labels={"migplan.io/pool": NS}),
        {
            "apiVersion": "migplan.io/v1alpha1",
            "kind": "GPUPartitionPlan",
            "metadata": {"name": PLAN},
            "spec": {
                "nodeSelector": {"matchLabels": {"migplan.io/pool": f"{NS}-none"}},
                "demand": {"profiles": [{"resource": "nvidia.com/mig-3g.40gb", "count": 1}]},
                "dryRun": True,
            },
        },
    )
    # What the agent reported when the plan was made: trainer holds the 1g on node a.
    report_partition(cp, f"{NS}-a", layout="1g.10gb@0", in_use={"1g.10gb@0": POD})
    yield cp
    for node in (f"{NS}-a", f"{NS}-b"):
        cp.kubectl("delete", "node", node, "--wait=false", check=False)
    cp.kubectl("delete", "gpp", PLAN, "--wait=false", check=False)


def stepper(cp, events: list) -> NodeStepper:
    api = connect(kubeconfig=str(cp.kubeconfig))
    book = RolloutBook(api)
    return NodeStepper(
        api=api,
        plan=PLAN,
        keep=lambda r: book.write(PLAN, input_hash="h1", record=r),
        plan_generation=1,
        drain_timeout=30.0,
        agent_timeout=30.0,
        events=lambda kind, reason, message: events.append((kind, reason, message)),
    )


def record(step: NodeStep = NodeStep.PENDING, **update) -> NodeRollout:
    return NodeRollout(
        node=f"{NS}-a",
        step=step,
        before=(GpuTarget(index=0, layout="1g.10gb@0"),),
        gpus=(GpuTarget(index=0, layout="3g.40gb@0"),),
        evict=(POD,),
        disruptive=True,
        **update,
    )


def unschedulable(cp, node: str) -> bool:
    found = json.loads(cp.kubectl("get", "node", node, "-o", "json").stdout)
    return bool(found["spec"].get("unschedulable"))


def test_a_same_named_pod_on_another_node_is_never_evicted(evid) -> None:
    cp = evid
    uid = place_trainer(cp, f"{NS}-b")  # the planned pod moved; a namesake runs on node b
    events: list = []
    done = stepper(cp, events).advance(record())
    assert done.step is NodeStep.ROLLED_BACK
    assert done.stale
    assert f"{POD} is on {NS}-b" in (done.message or "")
    assert not unschedulable(cp, f"{NS}-a")  # never cordoned
    after = pod_doc(cp)
    assert after["metadata"]["uid"] == uid
    assert after["metadata"].get("deletionTimestamp") is None
    assert not [e for e in events if e[1] == "Evicted"]


def test_a_pod_made_again_under_the_planned_name_is_not_evicted(evid) -> None:
    cp = evid
    uid = place_trainer(cp, f"{NS}-a")
    events: list = []
    began = record(NodeStep.EVICTING, evict_uids={POD: "00000000-0000-0000-0000-000000000000"})
    done = stepper(cp, events).advance(began)
    assert done.step is NodeStep.ROLLED_BACK
    assert done.stale
    assert f"were replaced or moved since the rollout began ({POD})" in (done.message or "")
    after = pod_doc(cp)
    assert after["metadata"]["uid"] == uid
    assert after["metadata"].get("deletionTimestamp") is None
    assert not [e for e in events if e[1] == "Evicted"]


def test_the_eviction_api_checks_the_uid_precondition(evid) -> None:
    cp = evid
    uid = place_trainer(cp, f"{NS}-a")
    api = connect(kubeconfig=str(cp.kubeconfig))
    with pytest.raises(PodReplacedError):
        api.core.evict_pod(namespace=NS, name="trainer", uid="11111111-1111-1111-1111-111111111111")
    assert pod_doc(cp)["metadata"].get("deletionTimestamp") is None
    assert api.core.evict_pod(namespace=NS, name="trainer", uid=uid) is None
    wait_for(
        lambda: (d := pod_doc(cp)) is None or d["metadata"].get("deletionTimestamp"),
        "the trainer to be evicted",
    )


def test_the_named_pod_on_its_node_is_evicted_by_uid(evid) -> None:
    cp = evid
    uid = place_trainer(cp, f"{NS}-a")
    events: list = []
    try:
        after = stepper(cp, events).advance(record())
        assert after.evict_uids == {POD: uid}
        assert [e for e in events if e[1] == "Evicted"] == [
            ("Normal", "Evicted", f"{POD} evicted from {NS}-a")
        ]
        wait_for(
            lambda: (d := pod_doc(cp)) is None or d["metadata"].get("deletionTimestamp"),
            "the trainer to be evicted",
        )
    finally:
        cp.kubectl("uncordon", f"{NS}-a", check=False)


def test_an_admins_cordon_landing_between_read_and_write_stays_the_admins(
    evid, monkeypatch
) -> None:
    cp = evid
    node = f"{NS}-b"
    api = connect(kubeconfig=str(cp.kubeconfig))
    read = Core.get_node
    reads = []

    def read_then_admin_cordons(core, *, name):
        found = read(core, name=name)
        if not reads:
            cp.kubectl("cordon", name)  # lands after migplan read the node, before it writes
        reads.append(found.metadata.resource_version)
        return found

    monkeypatch.setattr(Core, "get_node", read_then_admin_cordons)
    try:
        assert not api.core.cordon_node(name=node, annotation=CORDONED_BY, owner=PLAN)
        assert len(reads) == 2  # the stale write was refused (409) and the node read again
        found = json.loads(cp.kubectl("get", "node", node, "-o", "json").stdout)
        assert found["spec"]["unschedulable"]
        assert CORDONED_BY not in (found["metadata"].get("annotations") or {})
        # So migplan never uncordons what the admin cordoned.
        assert not api.core.uncordon_node(name=node, annotation=CORDONED_BY, owner=PLAN)
        assert unschedulable(cp, node)
    finally:
        cp.kubectl("uncordon", node, check=False)
