"""The operator rolls plans out on the real control plane: simulated GPU nodes (agents on the
NVML emulator, simulated device plugin), the real scheduler, kwok for pod lifecycles."""

from __future__ import annotations

import json
import re
import urllib.request

import pytest
from nodes import GPU_OPERATOR_NAMESPACE, component_pod, mig_deployment, mig_pod
from operator_proc import free_port, running_operator, start_operator, stop_operator
from pools import (
    ALWAYS_OPEN,
    add_pending,
    app_running,
    apply,
    build_pool,
    closed_window,
    layout_of,
    make_plan,
    node_obj,
    plan_status,
    pods_of,
    running,
    start_running,
    uids,
    unschedulable,
)
from rollout_records import rollout_nodes
from waiting import wait_for

from migplan.operator.controller.rollout import CORDONED_BY
from migplan.operator.kube.connect import connect
from migplan.operator.sim.fleet import SimulatedFleet
from migplan.operator.sim.mig_manager import SimulatedMigManager
from migplan.planner.hardware.catalog import default_catalog

pytestmark = pytest.mark.cluster


def test_rollout_evicts_only_what_it_must_and_pending_pods_run(crds, operator_kubeconfig) -> None:
    cp = crds
    # Each node has a 1g instance in use where it blocks a second 3g instance.
    fleet = build_pool(cp, "ro", {"ro-a": "1g.10gb@0", "ro-b": "1g.10gb@6"})
    try:
        before = start_running(cp, "ro", "frag", "small")
        wanted = add_pending(cp, "ro", 3)
        port = free_port()
        with running_operator(cp, kubeconfig=operator_kubeconfig, metrics_port=port):
            apply(cp, make_plan("ro", "ro", window=ALWAYS_OPEN))
            status = wait_for(
                lambda: (s := plan_status(cp, "ro")).get("phase") == "Ready" and s,
                "the rollout to finish",
                timeout=120,
            )
            wait_for(lambda: running(cp, "ro", *wanted), "the pending pods to run", timeout=60)
            wait_for(lambda: app_running(cp, "ro", "frag", "small"), "the evicted pod's successor")
            metrics = (
                urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)
                .read()
                .decode()
            )
        assert status["demandMet"] == "3/3"
        assert status["progress"] == "2/2"
        nodes = rollout_nodes(cp, "ro", status)
        assert {n: r["step"] for n, r in nodes.items()} == {"ro-a": "Done", "ro-b": "Done"}
        evicted = [p for r in nodes.values() for p in r["evict"]]
        assert len(evicted) == 1
        assert [r["disruptive"] for r in nodes.values()].count(True) == 1
        # The planned pod went (its Deployment replaced it); the other one was left alone.
        after = uids(cp, "ro", "frag", "small")
        gone = {f"ro/{name}" for name in before if name not in after}
        assert gone == set(evicted)
        assert [uid for name, uid in before.items() if name in after] == [
            after[name] for name in before if name in after
        ]
        for name in ("ro-a", "ro-b"):
            node = node_obj(cp, name)
            assert not node["spec"].get("unschedulable")
            assert CORDONED_BY not in node["metadata"].get("annotations", {})
            assert layout_of(fleet, name) == nodes[name]["gpus"][0]["layout"]
        conditions = {c["type"]: c["status"] for c in status["conditions"]}
        assert conditions["Ready"] == "True"
        assert conditions["Degraded"] == "False"
        assert 'migplan_evictions_total{plan="ro"} 1.0' in metrics
        assert re.search(r'^migplan_plans\{phase="Ready"\} [1-9]', metrics, re.MULTILINE)
        events = cp.kubectl(
            "get", "events", "--field-selector", "involvedObject.name=ro", "-o", "json"
        ).stdout
        assert f"{evicted[0]} evicted from" in events
        assert not fleet.errors
    finally:
        fleet.stop()


def start_guarded(cp, pool: str) -> None:
    """Two 1g pods (one per node of the pool) under a PodDisruptionBudget of maxUnavailable 0."""
    guarded = mig_deployment("guarded", profile="1g.10gb", namespace=pool, pool=pool)
    guarded["spec"]["replicas"] = 2
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "guarded", "namespace": pool},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "guarded"}}},
    }
    apply(cp, guarded, budget)
    wait_for(
        lambda: len(pods_of(cp, pool, "guarded")) == 2 and app_running(cp, pool, "guarded"),
        "the guarded pods",
    )


def guarded_pool(cp, pool: str) -> tuple[SimulatedFleet, list[str]]:
    """Two nodes whose 1g pods a PodDisruptionBudget guards, and three 3g pods pending that
    need one of them evicted: the fleet and the guarded pods' uids."""
    fleet = build_pool(cp, pool, {f"{pool}-a": "1g.10gb@0", f"{pool}-b": "1g.10gb@6"})
    start_guarded(cp, pool)
    guarded_uids = sorted(uids(cp, pool, "guarded").values())
    add_pending(cp, pool, 3)
    return fleet, guarded_uids


def blocked_plan(pool: str, *, drain_timeout: str) -> dict:
    plan = make_plan(pool, pool, window=ALWAYS_OPEN)
    plan["spec"]["rollout"]["drainTimeout"] = drain_timeout
    return plan


def test_a_disruption_budget_blocks_eviction_and_the_node_is_rolled_back(
    crds, operator_kubeconfig
) -> None:
    cp = crds
    fleet, guarded_uids = guarded_pool(cp, "pdb")
    try:
        with running_operator(cp, kubeconfig=operator_kubeconfig):
            apply(cp, blocked_plan("pdb", drain_timeout="4s"))
            status = wait_degraded(cp, "pdb", "the node to be rolled back")
        records = rollout_nodes(cp, "pdb", status)
        blocked = next(n for n, r in records.items() if r["disruptive"])
        other = next(n for n in records if n != blocked)
        assert records[blocked]["step"] == "RolledBack"
        assert records[other]["step"] == "Done"  # the rollout went on with the other node
        assert "drain timed out" in records[blocked]["message"]
        assert "disruption budget" in records[blocked]["message"]
        assert sorted(uids(cp, "pdb", "guarded").values()) == guarded_uids
        node = node_obj(cp, blocked)
        assert not node["spec"].get("unschedulable")
        assert CORDONED_BY not in node["metadata"].get("annotations", {})
        assert layout_of(fleet, blocked) == records[blocked]["before"][0]["layout"]
        degraded = next(c for c in status["conditions"] if c["type"] == "Degraded")
        assert degraded["status"] == "True"
        assert blocked in degraded["message"]
    finally:
        fleet.stop()


def test_a_closed_window_holds_disruption_back_and_overlapping_plans_do_not_fight(
    crds, operator_kubeconfig
) -> None:
    cp = crds
    fleet = build_pool(cp, "win", {"win-busy": "1g.10gb@0", "win-empty": "1g.10gb@6"})
    try:
        start_running(cp, "win", "frag", "small")
        add_pending(cp, "win", 3)
        with running_operator(cp, kubeconfig=operator_kubeconfig):
            apply(cp, make_plan("win", "win", window=closed_window()))
            status = wait_for(
                lambda: (s := plan_status(cp, "win")).get("phase") == "WaitingForWindow" and s,
                "the additions outside the window",
                timeout=60,
            )
            records = rollout_nodes(cp, "win", status)
            steps = {n: r["step"] for n, r in records.items()}
            disruptive = next(n for n, r in records.items() if r["disruptive"])
            calm = next(n for n in steps if n != disruptive)
            # The node that only gains instances in free slices changed; the other waits.
            assert steps == {disruptive: "Pending", calm: "Done"}
            assert status["windowOpen"] is False
            assert status["nextWindow"].endswith(":00:00Z")
            assert not node_obj(cp, disruptive)["spec"].get("unschedulable")
            row = cp.kubectl("get", "gpp", "win").stdout.splitlines()[1].split()
            assert row[1:5] == ["WaitingForWindow", "2", "3/3", "1/2"]

            # A later plan over the same nodes is marked Conflict and does nothing.
            late = make_plan("win-late", "win", window=ALWAYS_OPEN)
            apply(cp, late)
            conflict = wait_for(
                lambda: (s := plan_status(cp, "win-late")).get("phase") == "Conflict" and s,
                "the conflict",
            )
            message = next(c for c in conflict["conditions"] if c["type"] == "Conflict")["message"]
            assert "plan win selects some of the same nodes" in message
            assert "rollout" not in conflict
            assert rollout_nodes(cp, "win")[disruptive]["step"] == "Pending"
            # Once the first plan is gone, the later one plans.
            cp.kubectl("delete", "gpp", "win")
            wait_for(
                lambda: plan_status(cp, "win-late").get("phase") not in (None, "Conflict"),
                "the later plan to take over",
                timeout=60,
            )
            cp.kubectl("delete", "gpp", "win-late")
    finally:
        fleet.stop()


def wait_degraded(cp, plan: str, what: str) -> dict:
    """`plan`'s status once its phase is Degraded (waiting for `what`)."""
    return wait_for(
        lambda: (s := plan_status(cp, plan)).get("phase") == "Degraded" and s, what, timeout=90
    )


def node_in_step(cp, plan: str, step: str) -> str | None:
    """A node of `plan`'s rollout that is at `step`, if any."""
    nodes = rollout_nodes(cp, plan)
    return next((n for n, r in nodes.items() if r["step"] == step), None)


def test_deleting_a_plan_mid_rollout_leaves_no_node_cordoned(crds, operator_kubeconfig) -> None:
    cp = crds
    fleet = build_pool(cp, "del", {"del-a": "1g.10gb@0", "del-b": "1g.10gb@6"})
    try:
        start_guarded(cp, "del")
        add_pending(cp, "del", 3)
        with running_operator(cp, kubeconfig=operator_kubeconfig):
            plan = make_plan("del", "del", window=ALWAYS_OPEN)
            plan["spec"]["rollout"]["drainTimeout"] = "10m"
            apply(cp, plan)
            stuck = wait_for(lambda: node_in_step(cp, "del", "Evicting"), "a stuck drain")
            assert node_obj(cp, stuck)["spec"].get("unschedulable")
            cp.kubectl("delete", "gpp", "del", "--timeout=60s")
            node = wait_for(
                lambda: (n := node_obj(cp, stuck))["spec"].get("unschedulable") is not True and n,
                "the node to be uncordoned",
                timeout=30,
            )
        assert not node["spec"].get("unschedulable")
        assert CORDONED_BY not in node["metadata"].get("annotations", {})
        assert cp.kubectl("get", "gpp", "del", check=False).returncode != 0
    finally:
        fleet.stop()


MIG_CONFIG_MAP = ("gpu-operator", "migplan-mig-parted-config")


def mig_managed(cp, fleet, **options) -> SimulatedMigManager:
    """A simulated mig-manager for the fleet's nodes (with its pod on each, as its DaemonSet
    makes), swept with them; `options` go to SimulatedMigManager (lag, wedged)."""
    mig_managers = (component_pod(n, "nvidia-mig-manager") for n in fleet.nodes)
    apply(cp, GPU_OPERATOR_NAMESPACE, *mig_managers)
    mig_manager = SimulatedMigManager(
        api=connect(kubeconfig=str(cp.kubeconfig)),
        nodes=fleet.nodes,
        plugin=fleet.plugin,
        catalog=default_catalog(),
        config_map=MIG_CONFIG_MAP,
        **options,
    )
    fleet.hooks.append(mig_manager.sync)
    return mig_manager


def roll_out_through_mig_manager(cp, operator_kubeconfig, pool: str, propagation: str) -> dict:
    """Plan `pool` for mig-manager, wait for the rollout to be Ready; its status."""
    with running_operator(
        cp, kubeconfig=operator_kubeconfig, extra_args=("--mig-config-propagation", propagation)
    ):
        apply(cp, make_plan(pool, pool, window=ALWAYS_OPEN, actuator="mig-manager"))
        return wait_for(
            lambda: (s := plan_status(cp, pool)).get("phase") == "Ready" and s,
            f"the rollout of {pool} through mig-manager",
            timeout=120,
        )


def test_mig_manager_actuator_follows_the_label_protocol(crds, operator_kubeconfig) -> None:
    cp = crds
    fleet = build_pool(cp, "mm", {"mm-a": "1g.10gb@0", "mm-b": "1g.10gb@6"})
    config_map = MIG_CONFIG_MAP
    # kubelet refreshes the file mig-manager reads 2 s after a write; migplan waits 5 s. (At
    # 3 s a loaded CI machine once let the label arrive before the simulated file, whose lag
    # counts from its own first read of the ConfigMap.)
    mig_manager = mig_managed(cp, fleet, lag=2.0)
    try:
        apply(cp, mig_deployment("frag", profile="1g.10gb", namespace="mm", pool="mm"))
        wait_for(lambda: app_running(cp, "mm", "frag"), "the running pod")
        wanted = add_pending(cp, "mm", 3)
        status = roll_out_through_mig_manager(cp, operator_kubeconfig, "mm", "5")
        wait_for(lambda: running(cp, "mm", *wanted), "the pending pods to run", timeout=60)
        records = rollout_nodes(cp, "mm", status)
        assert {r["step"] for r in records.values()} == {"Done"}, records
        # mig-manager rebuilds whole GPUs: the pod on the changed GPU was evicted.
        events = cp.kubectl(
            "get", "events", "--field-selector", "involvedObject.name=mm", "-o", "json"
        ).stdout
        assert "mm/frag-" in events
        assert " evicted from mm-" in events
        data = json.loads(
            cp.kubectl("get", "configmap", "-n", config_map[0], config_map[1], "-o", "json").stdout
        )["data"]["config.yaml"]
        for name, record in records.items():
            labels = node_obj(cp, name)["metadata"]["labels"]
            assert labels["nvidia.com/mig.config"] == record["migConfig"]
            assert labels["nvidia.com/mig.config.state"] == "success"
            assert record["migConfig"].startswith(f"migplan-{name}-")
            assert record["migConfig"] in data
            assert (name, record["migConfig"]) in mig_manager.applied_configs
            # Entries written when planned, the label pointed at them 5 s later: never failed.
            assert [o for o in mig_manager.outcomes if o[0] == name] == [
                (name, record["migConfig"], "success")
            ]
            assert record["migConfigRetry"] in data
            # The agent wrote nothing: the operator never gave it a target.
            np = json.loads(cp.kubectl("get", "np", name, "-o", "json").stdout)
            assert np["spec"]["gpus"] == []
            assert not node_obj(cp, name)["spec"].get("unschedulable")
    finally:
        fleet.stop()


def test_a_config_file_slower_than_expected_costs_one_retry_not_the_node(
    crds, operator_kubeconfig
) -> None:
    cp = crds
    fleet = build_pool(cp, "ml", {"ml-a": "-"})
    # The file lags longer than the operator is told to wait, shorter than twice that. The
    # operator waits 4-5 s (status timestamps keep whole seconds) and the retry comes at least
    # 4 s after the first failure: a margin of a second or more either side, which 2 s and a
    # 4 s lag (the retry due exactly as the file catches up) lacked on a loaded machine.
    mig_manager = mig_managed(cp, fleet, lag=6.0)
    try:
        wanted = add_pending(cp, "ml", 2)
        status = roll_out_through_mig_manager(cp, operator_kubeconfig, "ml", "4")
        wait_for(lambda: running(cp, "ml", *wanted), "the pending pods to run", timeout=60)
        record = rollout_nodes(cp, "ml", status)["ml-a"]
        assert record["step"] == "Done"
        first, retry = record["migConfig"], record["migConfigRetry"]
        assert first == retry  # the label ended on the retry name
        failed = [o for o in mig_manager.outcomes if o[2] == "failed"]
        assert len(failed) == 1  # the first name, before the file had it
        assert failed[0][1] != retry
        assert mig_manager.outcomes[-1] == ("ml-a", retry, "success")
        assert record["migConfigFailed"]
    finally:
        fleet.stop()


def test_a_wedged_mig_manager_fails_the_node_and_uncordons_it(crds, operator_kubeconfig) -> None:
    cp = crds
    fleet = build_pool(cp, "mw", {"mw-a": "-"})
    mig_managed(cp, fleet, wedged=frozenset({"mw-a"}))
    try:
        apply(
            cp,
            *(mig_pod(f"want-{i}", profile="3g.40gb", namespace="mw", pool="mw") for i in range(2)),
        )
        wait_for(lambda: unschedulable(cp, "mw", "want-0", "want-1"), "the new pods to wait")
        with running_operator(
            cp,
            kubeconfig=operator_kubeconfig,
            agent_timeout=4,
            extra_args=("--mig-config-propagation", "0"),
        ):
            apply(cp, make_plan("mw", "mw", window=ALWAYS_OPEN, actuator="mig-manager"))
            status = wait_degraded(cp, "mw", "the wedged node to fail")
        record = rollout_nodes(cp, "mw", status)["mw-a"]
        assert record["step"] == "Failed"
        assert "mig-manager stuck in pending" in record["message"]
        node = node_obj(cp, "mw-a")
        assert not node["spec"].get("unschedulable")
        assert node["metadata"]["labels"]["nvidia.com/mig.config.state"] == "pending"
    finally:
        fleet.stop()


def test_an_agent_that_never_applies_fails_the_node_pinned_as_it_is_and_uncordoned(
    crds, operator_kubeconfig
) -> None:
    """The agent of the node to change is gone: after the agent timeout the operator points
    the node's NodePartition at the layout the node has (a write of the object it read back,
    which must not carry the server's resourceVersion into a create), uncordons the node and
    reports it failed, with the GPU as it was."""
    cp = crds
    fleet = build_pool(cp, "mute", {"mute-a": "1g.10gb@0"})

    def silent(node: str) -> None:
        if node == "mute-a":
            raise RuntimeError("this node's agent is down")

    try:
        add_pending(cp, "mute", 2)
        fleet.hooks.append(silent)
        with running_operator(cp, kubeconfig=operator_kubeconfig, agent_timeout=4):
            apply(cp, make_plan("mute", "mute", window=ALWAYS_OPEN))
            status = wait_degraded(cp, "mute", "the node to fail")
        record = rollout_nodes(cp, "mute", status)["mute-a"]
        assert record["step"] == "Failed"
        assert "the agent did not apply generation" in record["message"]
        assert "GPU 0 as it was" in record["message"]
        assert not any(c["type"] == "TickFailed" for c in status["conditions"])
        node = node_obj(cp, "mute-a")
        assert not node["spec"].get("unschedulable")
        assert CORDONED_BY not in node["metadata"].get("annotations", {})
        pinned = json.loads(cp.kubectl("get", "np", "mute-a", "-o", "json").stdout)["spec"]
        assert [g["layout"] for g in pinned["gpus"]] == ["1g.10gb@0"]
        assert layout_of(fleet, "mute-a") == "1g.10gb@0"
    finally:
        fleet.stop()


def test_a_plan_deleted_while_the_operator_is_away_leaves_no_node_cordoned(
    crds, operator_kubeconfig
) -> None:
    cp = crds
    fleet = build_pool(cp, "away", {"away-a": "1g.10gb@0", "away-b": "1g.10gb@6"})
    try:
        start_guarded(cp, "away")
        add_pending(cp, "away", 3)
        proc = start_operator(cp, kubeconfig=operator_kubeconfig)
        try:
            plan = make_plan("away", "away", window=ALWAYS_OPEN)
            plan["spec"]["rollout"]["drainTimeout"] = "10m"
            apply(cp, plan)
            stuck = wait_for(lambda: node_in_step(cp, "away", "Evicting"), "a stuck drain")
        finally:
            stop_operator(proc)
        assert node_obj(cp, stuck)["spec"].get("unschedulable")  # mid-rollout, by design
        cp.kubectl("delete", "gpp", "away", "--timeout=30s")  # no finalizer holds it
        with running_operator(cp, kubeconfig=operator_kubeconfig):
            node = wait_for(
                lambda: (n := node_obj(cp, stuck))["spec"].get("unschedulable") is not True and n,
                "the returning operator to uncordon the node",
                timeout=30,
            )
        assert CORDONED_BY not in node["metadata"].get("annotations", {})
    finally:
        fleet.stop()


def test_a_spec_edited_into_an_invalid_one_mid_drain_still_rolls_the_node_back(
    crds, operator_kubeconfig
) -> None:
    # The CRD takes window.start "0 0 30 2 *" (February 30th never comes); the planner does
    # not. The node being drained must still time out, be rolled back and uncordoned.
    cp = crds
    fleet, guarded_uids = guarded_pool(cp, "inv")
    try:
        with running_operator(cp, kubeconfig=operator_kubeconfig):
            apply(cp, blocked_plan("inv", drain_timeout="20s"))
            draining = wait_for(lambda: node_in_step(cp, "inv", "Evicting"), "a node to drain")
            assert node_obj(cp, draining)["spec"].get("unschedulable")
            cp.kubectl(
                "patch",
                "gpp",
                "inv",
                "--type=merge",
                "-p",
                json.dumps({"spec": {"window": {"start": "0 0 30 2 *"}}}),
            )
            wait_for(lambda: plan_status(cp, "inv").get("phase") == "Invalid", "Invalid")
            record = wait_for(
                lambda: (r := rollout_nodes(cp, "inv")[draining])["step"] == "RolledBack" and r,
                "the drained node to time out and roll back under the spec it began with",
                timeout=90,
            )
            assert plan_status(cp, "inv")["phase"] == "Invalid"
        assert "drain timed out" in record["message"]
        node = node_obj(cp, draining)
        assert not node["spec"].get("unschedulable")
        assert CORDONED_BY not in node["metadata"].get("annotations", {})
        assert layout_of(fleet, draining) == record["before"][0]["layout"]
        assert sorted(uids(cp, "inv", "guarded").values()) == guarded_uids
    finally:
        fleet.stop()
