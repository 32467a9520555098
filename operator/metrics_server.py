"""Serving Prometheus metrics (the operator's and the node agent's), optionally only to callers
RBAC allows.

With `--metrics-auth=kubernetes` a scrape must carry a bearer token; the API server says whose
it is (TokenReview) and whether that identity may `get` the non-resource URL `/metrics`
(SubjectAccessReview), as kube-rbac-proxy and the Kubernetes components' own metrics
endpoints do. Decisions are cached for a minute, so a scraper costs two API calls a minute;
the cache keeps at most MAX_DECISIONS tokens (least recently used go first) and unknown
tokens are reviewed at most REVIEWS_PER_SECOND a second (429 beyond), so a flood of junk
tokens costs neither memory nor the API server. (A bounded LRU in a few lines here, rather
than a new dependency for the image.)
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import platform
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import structlog
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    Info,
    disable_created_metrics,
    generate_latest,
)

from migplan.operator.kube.seam import Kube

log = structlog.get_logger("migplan.metrics")
METRICS_PATH = "/metrics"
MAX_DECISIONS = 1024
REVIEWS_PER_SECOND = 10
Authorizer = Callable[[str | None], HTTPStatus]
"""Given the Authorization header (or None), OK, UNAUTHORIZED or FORBIDDEN."""


class KubernetesAuthorizer:
    """Admit a bearer token whose identity RBAC lets `get` /metrics; remember each answer
    for `ttl` seconds (by the token's hash, never the token itself)."""

    def __init__(
        self,
        *,
        api: Kube,
        ttl: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        max_decisions: int = MAX_DECISIONS,
        reviews_per_second: int = REVIEWS_PER_SECOND,
    ):
        self._api, self._ttl, self._clock = api, ttl, clock
        self._max, self._rate = max_decisions, reviews_per_second
        self._decisions: OrderedDict[str, tuple[HTTPStatus, float]] = OrderedDict()
        self._reviews: deque[float] = deque()
        self._lock = threading.Lock()

    def __call__(self, header: str | None) -> HTTPStatus:
        scheme, _, token = (header or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return HTTPStatus.UNAUTHORIZED
        key = hashlib.sha256(token.strip().encode()).hexdigest()
        now = self._clock()
        with self._lock:
            cached = self._decisions.get(key)
            if cached and cached[1] > now:
                self._decisions.move_to_end(key)
                return cached[0]
            while self._reviews and self._reviews[0] <= now - 1.0:
                self._reviews.popleft()
            if len(self._reviews) >= self._rate:
                return HTTPStatus.TOO_MANY_REQUESTS
            self._reviews.append(now)
        decision = self._decide(token.strip())
        with self._lock:
            self._decisions[key] = (decision, now + self._ttl)
            self._decisions.move_to_end(key)
            while len(self._decisions) > self._max:
                self._decisions.popitem(last=False)
        return decision

    def _decide(self, token: str) -> HTTPStatus:
        who = self._api.auth.review_token(token=token)
        if who is None:
            return HTTPStatus.UNAUTHORIZED
        if self._api.auth.may_access_path(who=who, verb="get", path=METRICS_PATH):
            return HTTPStatus.OK
        log.info("metrics scrape forbidden", user=who.username)
        return HTTPStatus.FORBIDDEN


BUILD_INFO = Info("migplan_build", "The migplan build serving these metrics")
# A counter's `_created` series (when it was first touched) reads like a domain metric on a
# dashboard and doubles the series count; no rule or panel of migplan's uses it.
disable_created_metrics()  # type: ignore[no-untyped-call]  # untyped in prometheus-client


def record_build_info() -> None:
    """Publish `migplan_build_info{version, python}` (one series, value 1)."""
    BUILD_INFO.info({"version": _version(), "python": platform.python_version()})


def _version() -> str:
    try:
        return importlib.metadata.version("migplan")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def serve_metrics(
    *, port: int, host: str = "0.0.0.0", authorize: Authorizer | None = None
) -> ThreadingHTTPServer:
    """Serve GET /metrics on `host:port` in a daemon thread; with `authorize`, only to callers
    it admits (401 without or with a bad token, 403 when RBAC says no)."""
    record_build_info()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != METRICS_PATH:
                self._answer(HTTPStatus.NOT_FOUND, b"not found\n")
                return
            try:
                decision = authorize(self.headers.get("Authorization")) if authorize else None
            except Exception as exc:  # the API server is unreachable or refused the review
                log.warning("metrics authorization failed", error=str(exc))
                self._answer(HTTPStatus.SERVICE_UNAVAILABLE, b"cannot authorize now\n")
                return
            if decision not in (None, HTTPStatus.OK):
                self._answer(decision, f"{decision.phrase.lower()}\n".encode())
                return
            self._answer(HTTPStatus.OK, generate_latest(REGISTRY), CONTENT_TYPE_LATEST)

        def _answer(self, status: HTTPStatus, body: bytes, kind: str = "text/plain") -> None:
            self.send_response(status)
            if status == HTTPStatus.UNAUTHORIZED:
                self.send_header("WWW-Authenticate", 'Bearer realm="migplan"')
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True, name="metrics").start()
    return server
