"""Kubernetes-style status conditions, shared by the agent and the operator."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from migplan.planner.api.nodepartition import Condition


def now_stamp() -> str:
    """The current time as Kubernetes writes it."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_condition(kind: str, ok: bool, reason: str, message: str, generation: int) -> Condition:
    """A condition of type `kind` that holds (`True`) when `ok`, changed now: the one
    builder of conditions, for plans (as a dict, `condition`) and NodePartitions alike."""
    return Condition(
        type=kind,
        status="True" if ok else "False",
        reason=reason,
        message=message,
        observed_generation=generation,
        last_transition_time=now_stamp(),
    )


def condition(kind: str, ok: bool, reason: str, message: str, generation: int) -> dict[str, Any]:
    """`new_condition` as status takes it."""
    built = new_condition(kind, ok, reason, message, generation)
    return built.model_dump(mode="json", by_alias=True, exclude_none=True)


def keep_transition_times(
    conditions: list[dict[str, Any]], previous: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """A condition's lastTransitionTime changes only when its status does."""
    before = {c.get("type"): c for c in previous}
    for item in conditions:
        old = before.get(item["type"])
        if old and old.get("status") == item["status"] and old.get("lastTransitionTime"):
            item["lastTransitionTime"] = old["lastTransitionTime"]
    return conditions


def merge_conditions(
    previous: list[dict[str, Any]], updates: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """`previous` with the conditions of `updates` replaced or added (in a stable order)."""
    updates = keep_transition_times(updates, previous)
    replaced = {c["type"]: c for c in updates}
    merged = [replaced.pop(c.get("type"), c) for c in previous]
    return merged + list(replaced.values())
