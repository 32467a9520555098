"""Two operator replicas with Lease-based leader election: the leader is killed mid-rollout,
the follower takes over within the lease's bound and converges without repeating a step."""

from __future__ import annotations

import json
import signal
import time

import pytest
from invariants import assert_converged
from operator_proc import start_operator, stop_operator
from pools import (
    ALWAYS_OPEN,
    add_pending,
    agents_held,
    apply,
    build_pool,
    in_hand,
    make_plan,
    plan_status,
    running,
    start_running,
)
from rollout_records import rollout_nodes
from waiting import wait_for

from migplan.operator.kube.leader import LEASE_SECONDS

pytestmark = pytest.mark.cluster
TAKEOVER_BOUND = 15.0


def holder(cp) -> str | None:
    found = cp.kubectl(
        "get", "lease", "-n", "migplan-system", "migplan-operator", "-o", "json", check=False
    )
    return json.loads(found.stdout)["spec"].get("holderIdentity") if found.returncode == 0 else None


def following(proc) -> str | None:
    """Whom the operator said it follows (its first "following" log line), if it has."""
    for line in proc.output().splitlines():
        if line.startswith("{") and '"following"' in line:
            return json.loads(line)["leader"]
    return None


def test_the_follower_takes_over_a_rollout_when_the_leader_dies(crds, operator_kubeconfig) -> None:
    cp = crds
    fleet = build_pool(cp, "ha", {"ha-a": "1g.10gb@0", "ha-b": "1g.10gb@6"})
    elect = ("--leader-elect", "--leader-election-namespace", "migplan-system")
    leader = follower = None
    try:
        start_running(cp, "ha", "frag", "small")
        wanted = add_pending(cp, "ha", 3)
        leader = start_operator(cp, kubeconfig=operator_kubeconfig, extra_args=elect)
        wait_for(
            lambda: (h := holder(cp)) and h.endswith(f"-{leader.pid}"), "the first to lead", 30
        )
        follower = start_operator(cp, kubeconfig=operator_kubeconfig, extra_args=elect)
        # The follower has read the Lease and follows: the leader keeps it.
        followed = wait_for(lambda: following(follower), "the follower to campaign", 30)
        assert followed.endswith(f"-{leader.pid}")
        assert holder(cp).endswith(f"-{leader.pid}")
        with agents_held(fleet):
            apply(cp, make_plan("ha", "ha", window=ALWAYS_OPEN))
            node = wait_for(lambda: in_hand(cp, "ha"), "a node in hand", timeout=60)
            leader.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            leader.wait(timeout=10)
        wait_for(
            lambda: (h := holder(cp)) and h.endswith(f"-{follower.pid}"),
            "the follower to take the lease",
            timeout=30,
        )
        took_over = time.monotonic() - killed
        assert took_over <= TAKEOVER_BOUND, took_over
        wait_for(
            lambda: plan_status(cp, "ha").get("phase") == "Ready",
            "the follower to finish the rollout",
            timeout=120,
        )
        wait_for(lambda: running(cp, "ha", *wanted), "the pending pods to run", timeout=60)
        status = assert_converged(cp, "ha", fleet)
        records = rollout_nodes(cp, "ha", status)
        assert {r["step"] for r in records.values()} == {"Done"}
        assert node in records
        print(f"takeover after the leader's death: {took_over:.1f} s")
    finally:
        cp.kubectl("delete", "gpp", "ha", "--wait=false", check=False)
        for proc in (p for p in (follower, leader) if p is not None and p.poll() is None):
            stop_operator(proc)
        fleet.stop()


def test_a_stopped_leader_hands_the_lease_over_at_once(crds, operator_kubeconfig) -> None:
    """SIGTERM (a rolling update, a drained node): the leader finishes, gives the Lease up
    and exits 0, and the follower leads within a retry, not after the lease runs out."""
    cp = crds
    elect = ("--leader-elect", "--leader-election-namespace", "migplan-system")
    leader = follower = None
    try:
        leader = start_operator(cp, kubeconfig=operator_kubeconfig, extra_args=elect)
        wait_for(
            lambda: (h := holder(cp)) and h.endswith(f"-{leader.pid}"), "the first to lead", 30
        )
        follower = start_operator(cp, kubeconfig=operator_kubeconfig, extra_args=elect)
        wait_for(lambda: following(follower), "the follower to campaign", 30)
        stopped = time.monotonic()
        output = stop_operator(leader)
        wait_for(
            lambda: (h := holder(cp)) and h.endswith(f"-{follower.pid}"),
            "the follower to take the released lease",
            timeout=30,
        )
        handed_over = time.monotonic() - stopped
        assert handed_over < LEASE_SECONDS, handed_over
        said = [json.loads(line) for line in output.splitlines() if '"stepped down"' in line]
        assert said, output[-2000:]
        assert said[0]["released"] is True
        print(f"handover after the leader's SIGTERM: {handed_over:.1f} s")
    finally:
        for proc in (p for p in (follower, leader) if p is not None and p.poll() is None):
            stop_operator(proc)
