"""Kill the operator at every step boundary of a node's rollout, start it again, and check
that it converges: every node reconfigured, none left cordoned, only the planned pod evicted
and only once, each instance destroyed once."""

from __future__ import annotations

import json

import pytest
from operator_proc import running_operator, start_operator
from rollout_records import rollout_nodes
from test_rollout import (
    ALWAYS_OPEN,
    add_pending,
    apply,
    build_pool,
    layout_of,
    make_plan,
    node_obj,
    plan_status,
    running,
    start_running,
    uids,
)
from waiting import wait_for

from migplan.operator.controller.rollout import CORDONED_BY

pytestmark = pytest.mark.cluster
STEPS = ["Cordoning", "Evicting", "Partitioning", "Verifying", "Uncordoning"]
POINTS = [f"{when}:{step}" for step in STEPS for when in ("before", "after")] + ["before:Done"]


@pytest.mark.parametrize("point", POINTS)
def test_operator_killed_at_a_step_boundary_converges(crds, operator_kubeconfig, point) -> None:
    cp = crds
    pool = f"rs{POINTS.index(point)}"
    fleet = build_pool(cp, pool, {f"{pool}-a": "1g.10gb@0", f"{pool}-b": "1g.10gb@6"})
    try:
        before = start_running(cp, pool, "frag", "small")
        wanted = add_pending(cp, pool, 3)

        crashing = start_operator(cp, kubeconfig=operator_kubeconfig, crash_at=point)
        apply(cp, make_plan(pool, pool, window=ALWAYS_OPEN))
        first, _ = crashing.communicate(timeout=90)
        assert crashing.returncode == 17, first[-3000:]
        step = point.split(":")[1]
        records = rollout_nodes(cp, pool)
        assert step in {r["step"] for r in records.values()}

        with running_operator(cp, kubeconfig=operator_kubeconfig) as proc:
            status = wait_for(
                lambda: (s := plan_status(cp, pool)).get("phase") == "Ready" and s,
                "the rollout to finish after the restart",
                timeout=120,
            )
            try:
                wait_for(lambda: running(cp, pool, *wanted), "the pending pods to run", timeout=60)
            except AssertionError:
                print(cp.kubectl("get", "pods", "-n", pool, "-o", "wide").stdout)
                print(cp.kubectl("describe", "pod", "-n", pool, "want-0").stdout[-3000:])
                print(cp.kubectl("get", "nodes", "-o", "wide").stdout)
                print(cp.kubectl("describe", "node", f"{pool}-a").stdout[-3000:])
                raise
        second = proc.output

        records = rollout_nodes(cp, pool, status)
        assert {r["step"] for r in records.values()} == {"Done"}
        evicted = [p for r in records.values() for p in r["evict"]]
        assert len(evicted) == 1
        after = uids(cp, pool, "frag", "small")
        assert {f"{pool}/{n}" for n in before if n not in after} == set(evicted)
        evictions = [
            line
            for line in (first + second).splitlines()
            if '"event": "evicted"' in line and evicted[0] in line
        ]
        assert len(evictions) == 1, evictions
        for name, record in records.items():
            node = node_obj(cp, name)
            assert not node["spec"].get("unschedulable"), name
            assert CORDONED_BY not in node["metadata"].get("annotations", {})
            assert layout_of(fleet, name) == record["gpus"][0]["layout"]
        disruptive = next(n for n, r in records.items() if r["disruptive"])
        destroys = fleet.nodes[disruptive].calls.count("nvmlGpuInstanceDestroy")
        assert destroys == 1, fleet.nodes[disruptive].calls
        assert not fleet.errors
        print(json.dumps(records))
    finally:
        fleet.stop()
