"""Two operators side by side (two chart releases), each acting on its own plans
(`--plan-selector`), on the real control plane."""

from __future__ import annotations

import time

import pytest
from operator_proc import running_operator
from pools import apply, build_pool, closed_window, make_plan, plan_status
from waiting import wait_for

pytestmark = pytest.mark.cluster

LABEL = "migplan.io/operator"


def _labelled(plan: dict, team: str) -> dict:
    plan["metadata"]["labels"] = {LABEL: team}
    return plan


def test_each_operator_plans_only_the_plans_labelled_for_it(crds, operator_kubeconfig) -> None:
    cp = crds
    fleets = [build_pool(cp, f"sel-{t}", {f"sel-{t}-1": "-"}) for t in ("a", "b")]
    try:
        with running_operator(
            cp, kubeconfig=operator_kubeconfig, extra_args=("--plan-selector", f"{LABEL}=a")
        ):
            apply(
                cp,
                _labelled(make_plan("sel-a", "sel-a", window=closed_window()), "a"),
                _labelled(make_plan("sel-b", "sel-b", window=closed_window()), "b"),
            )
            wait_for(lambda: plan_status(cp, "sel-a").get("phase"), "team a's plan planned")
            time.sleep(3)  # six ticks of the operator: team b's plan is not its to plan
            assert plan_status(cp, "sel-b") == {}
            with running_operator(
                cp, kubeconfig=operator_kubeconfig, extra_args=("--plan-selector", f"{LABEL}=b")
            ):
                wait_for(lambda: plan_status(cp, "sel-b").get("phase"), "team b's plan planned")
                assert plan_status(cp, "sel-a").get("phase")
    finally:
        for fleet in fleets:
            fleet.stop()
