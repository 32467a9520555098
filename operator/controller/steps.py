"""Moving a node's rollout record from step to step (pure: the stepper and the actuators
write what these return)."""

from __future__ import annotations

from datetime import datetime

from migplan.planner.rollout.records import NodeRollout, NodeStep
from migplan.planner.rollout.schedule import parse_timestamp


def next_step(record: NodeRollout, step: NodeStep, message: str | None) -> NodeRollout:
    """The record in `step`, saying `message`."""
    return record.model_copy(update={"step": step, "message": message})


def given_up(record: NodeRollout, step: NodeStep, message: str) -> NodeRollout:
    """The node given up because the cluster moved under the plan (planned again after this
    rollout)."""
    return next_step(record.model_copy(update={"stale": True}), step, message)


def waiting(record: NodeRollout, message: str) -> NodeRollout | None:
    """The record saying what the node waits for; None when it says so already (nothing to
    write)."""
    if message != record.message:
        return next_step(record, record.step, message)
    return None


def seconds_in_step(record: NodeRollout, now: datetime) -> float:
    """Seconds the node has been in its current step."""
    since = parse_timestamp(record.since) if record.since else now
    return (now - since).total_seconds()
