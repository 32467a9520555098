"""The staged solve: a stage whose LP takes the time left still returns a plan."""

from __future__ import annotations

import time

import pytest

from migplan.planner.api.spec import Disruption, PolicySpec
from migplan.planner.solver import plan, stages
from migplan.planner.validate import validate

EVICT = PolicySpec(disruption=Disruption.EVICT)


def test_a_stage_whose_lp_outlasts_the_deadline_keeps_its_start(
    gpu, want, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CP-SAT calls a negative time limit an invalid model: the stage after a slow LP must
    not hand it one."""
    lp_duals = stages.lp_duals

    def slow(model, relaxation, *, time_limit):
        found = lp_duals(model, relaxation, time_limit=time_limit)
        time.sleep(time_limit + 0.3)
        return found

    monkeypatch.setattr(stages, "lp_duals", slow)
    gpus = [
        gpu("H100-80GB", "3g.40gb@0+2g.20gb@4", node="a", pins={"3g.40gb@0": "ns/a"}),
        gpu("H100-80GB", "4g.40gb@0", node="b", pins={"4g.40gb@0": "ns/c"}),
        gpu("H100-80GB", "1g.10gb@0+1g.10gb@1", node="c", pins={"1g.10gb@1": "ns/b"}),
    ]
    demand = [want("7g.80gb", 1, priority=3), want("1g.10gb", 4)]
    result = plan(gpus, demand, EVICT, time_limit=1.0)
    validate(result, gpus, demand, EVICT)
    assert result.solver.status == "FEASIBLE"
