"""The DRA benchmark's scenario on a few nodes, in both modes (bench/dra.py runs 200)."""

from __future__ import annotations

import pytest
from dra_scenario import WAVES, run_dra

pytestmark = pytest.mark.cluster


@pytest.mark.parametrize("mode", ["steer", "static"])
def test_every_claim_runs_and_no_running_claim_moves(crds, operator_kubeconfig, mode) -> None:
    run = run_dra(crds, nodes=3, mode=mode, kubeconfig=operator_kubeconfig)
    assert len(run.waits) == 3 * sum(len(w) for w in WAVES)
    assert run.disturbed == []
    assert run.phase == "Ready"
    if mode == "steer":
        # Each node: 3g + 2g + 1g planned, every other slot tainted.
        from migplan.planner.hardware.catalog import default_catalog

        slots = sum(len(p.starts) for p in default_catalog().model("H100-80GB").profiles)
        assert run.taint_rules == 3 * (slots - 3)
