"""Where a rollout's per-node records live: each in its node's NodePartition.

A record is written before its step is taken (records.py), so it must be durable; kept in
the plan's status, every step rewrote one object holding every node's record (~1.6 KB an
8-GPU node): at 100 nodes a 318 KB status took 2-3 s a patch on a busy API server, and a
plan changing ~900 nodes would pass etcd's 1.5 MiB object limit. In its node's
NodePartition (annotation RECORD, label PLAN_LABEL) a step writes only its own node's small
object, and the plan's status keeps a summary (`RolloutStatus`).

The book reads a plan's records from the API server once per process (a label-selected list,
never a cache that may lag its writes) and afterwards keeps them in memory, updated by its
own writes: only the leader writes records, and a leader that loses its Lease exits
(`kube/leader.py`), so nobody else changes them while this process lives.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import structlog

from migplan.operator.kube.seam import Kube
from migplan.planner.api.labels import label_value
from migplan.planner.rollout.records import NodeRollout

log = structlog.get_logger("migplan.rollout")

RECORD = "migplan.io/rollout"
"""NodePartition annotation: the node's record in its plan's latest rollout (JSON)."""
PLAN_LABEL = "migplan.io/rollout-plan"
"""NodePartition label: the plan whose rollout the record belongs to (a label value)."""
WRITERS = 8
"""Records written at once when a rollout begins (each its own small patch)."""


class NoPartitionError(RuntimeError):
    """A node the rollout covers has no NodePartition to keep its record in (yet)."""


@dataclass
class RolloutBook:
    """The records of each plan's current rollout (one rollout per plan, by input hash)."""

    api: Kube
    _books: dict[str, tuple[str, dict[str, NodeRollout]]] = field(default_factory=dict)
    """plan -> (input hash of its rollout, node -> record), as last read or written."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def records(
        self, plan: str, *, input_hash: str | None, legacy: Mapping[str, Any] | None = None
    ) -> dict[str, NodeRollout]:
        """The records of `plan`'s rollout `input_hash` (none without one). `legacy`: the
        `status.rollout.nodes` an older migplan kept in the plan, taken over into the
        NodePartitions when none hold records of this rollout yet."""
        if input_hash is None:
            return {}
        with self._lock:
            known = self._books.get(plan)
            if known is not None and known[0] == input_hash:
                return dict(known[1])
        found = read_records(self.api, plan=plan, input_hash=input_hash)
        taken = {n: NodeRollout.model_validate(v) for n, v in (legacy or {}).items() if v}
        if not found and taken:
            self.begin(plan, input_hash=input_hash, records=taken.values())
            return dict(taken)
        with self._lock:
            self._books[plan] = (input_hash, found)
        return dict(found)

    def write(self, plan: str, *, input_hash: str, record: NodeRollout) -> None:
        """Keep `record` as its node's record in `plan`'s rollout `input_hash`."""
        document = {
            "plan": plan,
            "rollout": input_hash,
            "record": record.model_dump(mode="json", by_alias=True, exclude_defaults=True),
        }
        written = self.api.plans.annotate_node_partition(
            name=record.node,
            labels={PLAN_LABEL: label_value(plan)},
            annotations={RECORD: json.dumps(document, separators=(",", ":"))},
        )
        if not written:
            raise NoPartitionError(f"node {record.node} has no NodePartition for its record")
        with self._lock:
            known = self._books.get(plan)
            if known is None or known[0] != input_hash:
                known = (input_hash, {})
                self._books[plan] = known
            known[1][record.node] = record

    def begin(self, plan: str, *, input_hash: str, records: Iterable[NodeRollout]) -> None:
        """Start `plan`'s rollout `input_hash` with `records` (a node of an older rollout
        keeps its record, which no longer counts). Written WRITERS at a time: a first plan
        of a fresh 5,000-node fleet changes every node."""
        chosen = list(records)
        with self._lock:
            before = self._books.get(plan)
            kept = before[1] if before is not None and before[0] == input_hash else {}
            # A re-plan from the same inputs (cron, window closed) records the same nodes
            # again: only what differs from what this process last wrote is written.
            same = {r.node: r for r in chosen if kept.get(r.node) == r}
            self._books[plan] = (input_hash, dict(same))
        changed = [r for r in chosen if r.node not in same]
        with ThreadPoolExecutor(max_workers=WRITERS, thread_name_prefix="migplan-records") as pool:
            list(pool.map(lambda r: self.write(plan, input_hash=input_hash, record=r), changed))
        log.info(
            "rollout recorded",
            plan=plan,
            rollout=input_hash,
            nodes=len(chosen),
            written=len(changed),
        )

    def forget(self, plan: str) -> None:
        """The plan is gone: its records are no longer kept in memory."""
        with self._lock:
            self._books.pop(plan, None)


def rollout_id(input_hash: str, records: Iterable[NodeRollout]) -> str:
    """The id a rollout's records are kept under: the plan's input hash and a digest of the
    nodes' targets and evictions, so a plan that differs under the same inputs (a solve cut
    short by its time limit) never counts an earlier rollout's records as its own."""
    targets = sorted(
        (r.node, [t.model_dump(mode="json") for t in r.gpus], list(r.evict)) for r in records
    )
    digest = hashlib.sha256(json.dumps(targets, separators=(",", ":")).encode()).hexdigest()
    return f"{input_hash}/{digest[:16]}"


def read_records(api: Kube, *, plan: str, input_hash: str) -> dict[str, NodeRollout]:
    """The records of `plan`'s rollout `input_hash`, node -> record, as the API server has
    them (one list of the NodePartitions labelled for the plan)."""
    found = {}
    selector = f"{PLAN_LABEL}={label_value(plan)}"
    for partition in api.plans.list_node_partitions(label_selector=selector):
        held = record_of(partition)
        if held is not None and held[:2] == (plan, input_hash):  # else an older rollout's
            record = NodeRollout.model_validate(held[2])
            found[record.node] = record
    return found


def _parse(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        document = json.loads(text)
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


def record_of(partition: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]] | None:
    """(plan, rollout input hash, record as written) from a NodePartition, if it holds one."""
    document = _parse((partition.get("metadata", {}).get("annotations") or {}).get(RECORD))
    if document is None or not isinstance(document.get("record"), dict):
        return None
    return str(document.get("plan")), str(document.get("rollout")), document["record"]
