"""The control plane has a bad day mid-rollout: the API server restarts, etcd restarts, the
API server stops answering for a while. Each rollout must still finish by its rules, with
no pod evicted twice, no held instance destroyed and no node left cordoned."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest
from invariants import assert_converged
from operator_proc import running_operator
from pools import (
    ALWAYS_OPEN,
    add_pending,
    apply,
    build_pool,
    in_hand,
    make_plan,
    plan_status,
    running,
    start_running,
)
from waiting import wait_for

pytestmark = pytest.mark.cluster


def _paused_api(cp) -> None:
    with cp.paused("kube-apiserver"):
        time.sleep(8)


FAULTS: dict[str, Callable] = {
    "apiserver-restart": lambda cp: cp.restart("kube-apiserver", down_for=3),
    "etcd-restart": lambda cp: cp.restart("etcd", down_for=2),
    "apiserver-paused": _paused_api,
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_rollout_survives_the_control_plane_failing_mid_way(
    crds, operator_kubeconfig, fault: str
) -> None:
    cp = crds
    pool = f"ft-{fault.split('-', maxsplit=1)[0][:3]}-{fault.split('-')[1][:3]}"
    fleet = build_pool(cp, pool, {f"{pool}-a": "1g.10gb@0", f"{pool}-b": "1g.10gb@6"})
    try:
        start_running(cp, pool, "frag", "small")
        wanted = add_pending(cp, pool, 3)
        with running_operator(cp, kubeconfig=operator_kubeconfig):
            apply(cp, make_plan(pool, pool, window=ALWAYS_OPEN))
            wait_for(lambda: in_hand(cp, pool), "a node in hand", timeout=60)
            started = time.monotonic()
            FAULTS[fault](cp)
            outage = time.monotonic() - started
            try:
                wait_for(
                    lambda: plan_status(cp, pool).get("phase") in ("Ready", "Degraded"),
                    "the rollout to finish after the fault",
                    timeout=180,
                )
            except AssertionError:
                print(json.dumps(plan_status(cp, pool), indent=1)[-6000:])
                raise
            status = assert_converged(cp, pool, fleet)
        assert status["phase"] == "Ready", status["rollout"]
        wait_for(lambda: running(cp, pool, *wanted), "the pending pods to run", timeout=90)
        print(f"{fault}: control plane away {outage:.1f} s; rollout converged")
    finally:
        fleet.stop()
