"""The soak, short: 200 simulated nodes under trace-driven pending-pod churn for 3 minutes
(bench/soak.py runs the long one). The fleet starts with small instances only while most
arrivals want whole GPUs, so the operator re-plans every minute and reshapes nodes while
pods come and go; at the end every convergence invariant must hold."""

from __future__ import annotations

import pytest
from operator_proc import operator_service_account
from soak_scenario import percentile, run_soak

pytestmark = pytest.mark.cluster


def test_a_short_soak_keeps_every_invariant(crds) -> None:
    run = run_soak(
        crds, nodes=200, minutes=3, per_minute=20, kubeconfig=operator_service_account(crds)
    )
    print(
        f"soak: {run.arrived} arrived, {len(run.waits)} ran, {run.gave_up} gave up;"
        f" p50 wait {percentile(run.waits, 0.5):.0f} s;"
        f" {run.figures['nodes_reconfigured']:.0f} nodes reconfigured;"
        f" RSS {[round(m) for _, m in run.rss_mib]} MiB; API/min {run.api_per_minute}"
    )
    assert not run.invariants, run.invariants
    assert run.final.get("phase") == "Ready", (run.unfinished, run.final.get("conditions"))
    assert run.figures["nodes_reconfigured"] > 0, "the churn never made the operator reshape"
    assert len(run.waits) + run.gave_up == run.arrived, "an arrival neither ran nor gave up"
    assert run.rss_growth(warm_up=45) < 0.25, run.rss_mib
    # The ticker reads cordons from the node watch: no full node list every round.
    assert run.api_per_minute.get("list nodes", 0) < 10, run.api_per_minute
