"""The agent's long-running loop and its liveness endpoint."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlparse

import structlog

from migplan.operator.agent.metrics import PASSES
from migplan.operator.agent.node import NodeAgent
from migplan.planner.api.nodepartition import NodePhase

log = structlog.get_logger("migplan.agent")
FOLLOW_UP_SECONDS = 2.0
"""How soon a pass follows one that waits for the device plugin to catch up, or for evicted
pods' processes to stop."""


@dataclass
class Health:
    """Alive while the loop keeps finishing passes."""

    interval: float
    last: float = field(default_factory=time.monotonic)

    def beat(self) -> None:
        """A pass finished."""
        self.last = time.monotonic()

    def alive(self) -> bool:
        """No pass for three intervals means stuck."""
        return time.monotonic() - self.last < 3 * self.interval + 30


def serve_liveness(url: str, health: Health) -> ThreadingHTTPServer:
    """Answer GET <path of url> with 200 while `health` is alive, 503 otherwise."""
    parsed = urlparse(url)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = self.path == parsed.path and health.alive()
            self.send_response(200 if ok else 503 if self.path == parsed.path else 404)
            self.end_headers()
            self.wfile.write(b"ok\n" if ok else b"stuck\n")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((parsed.hostname or "0.0.0.0", parsed.port or 8081), Handler)
    threading.Thread(target=server.serve_forever, daemon=True, name="liveness").start()
    return server


def run(
    agent: NodeAgent,
    *,
    stop: threading.Event,
    interval: float,
    health: Health,
    before_pass: Any = None,
) -> None:
    """Reconcile now, then whenever the NodePartition changes, and every `interval` (every
    FOLLOW_UP_SECONDS while the device plugin has yet to show what the GPUs hold, or evicted
    pods' processes have yet to stop)."""
    while not stop.is_set():
        try:
            if before_pass:
                before_pass()
            status = agent.run_once()
            PASSES.labels(result="ok" if status is not None else "no-partition").inc()
            health.beat()
        except Exception:
            PASSES.labels(result="error").inc()
            log.exception("pass failed", node=agent.node)
            stop.wait(min(interval, 5))
            continue
        if status is not None and (
            status.phase is NodePhase.WAITING_FOR_DEVICE_PLUGIN or status.evicted_pods_stopping()
        ):
            stop.wait(min(interval, FOLLOW_UP_SECONDS))  # the node, not the partition, moves
            continue
        try:
            agent.api.plans.watch_node_partition(
                name=agent.node, timeout=int(interval), since=agent.seen_version
            )
        except Exception:
            log.warning("watch failed", node=agent.node)
            stop.wait(min(interval, 5))
