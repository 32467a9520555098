"""The plan's status model: every key the operator writes, nothing else."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from migplan.planner.export.crd import plan_crd
from migplan.planner.status import PlanStatus, ReplanReason


def test_an_undeclared_key_is_refused_where_it_is_written() -> None:
    with pytest.raises(ValidationError, match="replanPendng"):
        PlanStatus.model_validate({"replanPendng": True})
    with pytest.raises(ValidationError, match="phase"):
        PlanStatus.model_validate({"phase": "Readyy"})


def test_deletions_by_merge_patch_are_statuses_too() -> None:
    """None removes a key (or a map entry) in a merge patch."""
    status = PlanStatus.model_validate(
        {
            "replanPending": None,
            "kueue": {"ns/wl": None},
            "rollout": {"nodes": {"gone": None}},
        }
    )
    assert status.kueue == {"ns/wl": None}
    assert status.rollout is not None
    assert status.rollout.nodes == {"gone": None}


def test_replan_pending_is_a_flag_with_a_reason() -> None:
    status = PlanStatus.model_validate({"replanPending": True, "replanReason": "ClusterChanged"})
    assert status.replan_reason is ReplanReason.CLUSTER_CHANGED
    with pytest.raises(ValidationError):
        PlanStatus.model_validate({"replanPending": "stale"})


def test_the_crd_declares_every_status_key_of_the_model() -> None:
    declared = plan_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    keys = set(declared["status"]["properties"])
    assert keys == {field.alias or name for name, field in PlanStatus.model_fields.items()}
    assert declared["status"]["properties"]["rollout"]["properties"]["spec"] == {
        "description": declared["status"]["properties"]["rollout"]["properties"]["spec"][
            "description"
        ],
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }
