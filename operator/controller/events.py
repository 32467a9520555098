"""Events as kubectl users read them: one event per thing that happens again and again, its
count raised (`x3 over 5m`), on the object it concerns (the plan, and the Node for what
happens to a node)."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from migplan.operator.kube.seam import Kube

log = structlog.get_logger("migplan.operator")

AGGREGATE_SECONDS = 600.0
"""A repeat within this long raises the count of the event already posted (as the kubelet's
own recorder does); later, a new event."""
REMEMBERED = 4096
"""Events remembered for aggregation; the oldest are forgotten first."""


@dataclass
class _Posted:
    namespace: str
    name: str
    count: int
    first: float


@dataclass
class EventRecorder:
    """Posts events through the kube seam, aggregating repeats; a failure to post is logged,
    never raised (an event is worth less than the step that caused it)."""

    api: Kube
    monotonic: Callable[[], float] = time.monotonic
    _posted: OrderedDict[tuple[str, ...], _Posted] = field(default_factory=OrderedDict)
    _uids: dict[str, str] = field(default_factory=dict)
    """Node name -> UID, read once (a rollout posts several events per node)."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def post(self, obj: Mapping[str, Any], kind: str, reason: str, message: str) -> None:
        """An event about `obj`: a repeat of a recent one (same object, type, reason and
        message) raises its count."""
        meta = obj["metadata"]
        key = (str(obj.get("kind")), str(meta.get("uid") or meta["name"]), kind, reason, message)
        try:
            with self._lock:
                seen = self._posted.get(key)
            now = self.monotonic()
            if seen is not None and now - seen.first < AGGREGATE_SECONDS:
                seen.count += 1
                if self.api.core.bump_event(
                    namespace=seen.namespace, name=seen.name, count=seen.count
                ):
                    return
            name = self.api.core.create_event(obj=obj, kind=kind, reason=reason, message=message)
            with self._lock:
                self._posted[key] = _Posted(meta.get("namespace") or "default", name, 1, now)
                self._posted.move_to_end(key)
                while len(self._posted) > REMEMBERED:
                    self._posted.popitem(last=False)
        except Exception as exc:
            log.warning("event not posted", reason=reason, error=repr(exc))

    def on_node(self, node: str, kind: str, reason: str, message: str) -> None:
        """An event on the Node `node` (kubectl describe node shows it)."""
        uid = self._uids.get(node)
        if uid is None:
            try:
                uid = str(self.api.core.get_node(name=node).metadata.uid)
            except Exception as exc:
                log.warning("event not posted", reason=reason, node=node, error=repr(exc))
                return
            with self._lock:
                if len(self._uids) >= REMEMBERED:
                    self._uids.clear()
                self._uids[node] = uid
        ref = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "uid": uid}}
        self.post(ref, kind, reason, message)
