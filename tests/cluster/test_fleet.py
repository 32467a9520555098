"""End to end on 50 simulated GPU nodes: pending pods -> plan -> rollout in waves -> Running;
then a cron rebalance after demand shifts changes only what it must."""

from __future__ import annotations

import pytest
from fleet_scenario import run_fleet
from rollout_records import rollout_nodes

pytestmark = pytest.mark.cluster


def test_fifty_nodes_pending_pods_run_and_the_cron_rebalance_changes_only_what_it_must(
    crds, operator_kubeconfig
) -> None:
    run = run_fleet(crds, nodes=50, kubeconfig=operator_kubeconfig)
    first, second = run.first, run.second
    assert first["demandMet"] == "90/90"
    assert first["plan"]["evictions"] == 0
    assert first["plan"]["leftOut"] == {}
    assert int(first["progress"].split("/")[0]) == first["nodes"] > 0
    assert all(r["step"] == "Done" for r in rollout_nodes(crds, "fleet", first).values())
    # The rebalance adds four whole GPUs: exactly four GPUs change, nobody is evicted.
    assert second["demandMet"] == "4/4"
    assert second["plan"]["gpusChanged"] == 4
    assert second["plan"]["evictions"] == 0
    # `migplan rebalance` re-plans at once; nothing is left to change.
    assert run.third["plan"]["gpusChanged"] == 0
    assert run.kept_running, "a pod that ran before a rollout did not survive it"
    assert run.cordoned == []
    assert run.fleet_errors == []
    assert "fleet  Ready" in run.status_text
    assert "Done" in run.status_text
    print(run.figures)
