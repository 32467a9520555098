"""A rollout's node records as the cluster holds them: in the nodes' NodePartitions
(annotation `migplan.io/rollout`), for the rollout the plan's status names."""

from __future__ import annotations

import json

from migplan.operator.controller.rollout_book import PLAN_LABEL, record_of
from migplan.planner.api.labels import label_value
from migplan.planner.rollout.records import NodeRollout


def rollout_nodes(cp, plan: str, status: dict | None = None) -> dict[str, dict]:
    """node -> record (every field, defaults included) of `plan`'s current rollout: the one
    `status` (read now if not given) names."""
    if status is None:
        found = json.loads(cp.kubectl("get", "gpp", plan, "-o", "json").stdout)
        status = found.get("status", {})
    rollout = status.get("rollout") or {}
    input_hash = rollout.get("id") or rollout.get("inputHash")
    selector = f"{PLAN_LABEL}={label_value(plan)}"
    partitions = json.loads(
        cp.kubectl("get", "nodepartitions", "-l", selector, "-o", "json").stdout
    )["items"]
    records = {}
    for partition in partitions:
        held = record_of(partition)
        if held is not None and held[:2] == (plan, input_hash):
            record = NodeRollout.model_validate(held[2])
            records[record.node] = record.model_dump(mode="json", by_alias=True)
    return records
