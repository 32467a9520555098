"""A proxy in front of the test API server that misbehaves on purpose: throttling (429 with
Retry-After, as API Priority and Fairness answers), server errors (500, 503), connections
reset before the request reaches the server or after it did (the answer lost), slow answers,
and watches cut short. For the fault suite: a component is pointed at it with `kubeconfig()`.

Loopback only; it terminates TLS with a certificate from the cluster's own CA and forwards
requests as they came, so token authentication passes through (client certificates cannot,
which is why components under test use ServiceAccount tokens). Built on aiohttp, which kopf
already brings.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import ssl
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiohttp import web
from operator_proc import free_port

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)


@dataclass(frozen=True)
class Faults:
    """What share of requests meets each fault (shares add up to at most 1)."""

    throttle: float = 0.0
    """Answered 429 with `Retry-After: retry_after`, never reaching the server."""
    retry_after: int = 1
    server_error: float = 0.0
    """Answered 500 or 503 (alternately), never reaching the server."""
    reset: float = 0.0
    """The connection closed without an answer: half before the server sees the request,
    half after it acted on it (the answer lost)."""
    latency: float = 0.0
    """Held `delay` seconds before being forwarded."""
    delay: float = 0.5
    watch_drop_after: float | None = None
    """Every watch is ended after this many seconds (as an API server restart does)."""

    def __post_init__(self) -> None:
        if self.throttle + self.server_error + self.reset + self.latency > 1:
            raise ValueError("fault shares add up to more than 1")


CALM = Faults()


def _status(code: int, reason: str, message: str) -> bytes:
    return json.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
    ).encode()


class FaultProxy:
    """The proxy, run on its own event loop thread while used as a context manager.

    `faults` may be replaced while it runs; `counts` says how many requests met each fault
    (`throttled`, `server_error`, `reset_before`, `reset_after`, `delayed`, `watch_dropped`)
    and how many were `forwarded` in all."""

    def __init__(self, cp, faults: Faults = CALM, *, seed: int = 7) -> None:
        self.faults = faults
        self.counts: Counter[str] = Counter()
        self.port = free_port()
        self._upstream = cp.server
        self._ca = cp.pki_dir / "ca.crt"
        self._serving = cp.serving_certificate("fault-proxy")
        self._rng = random.Random(seed)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._errors = 0

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def kubeconfig(self, source: Path) -> Path:
        """A copy of kubeconfig `source` that talks to the API server through this proxy."""
        config = yaml.safe_load(source.read_text())
        for cluster in config["clusters"]:
            cluster["cluster"]["server"] = self.url
        path = source.with_name(f"{source.stem}-via-proxy-{self.port}.kubeconfig")
        path.write_text(json.dumps(config))
        return path

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    async def _start(self) -> None:
        serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        serving.load_cert_chain(*self._serving)
        upstream = ssl.create_default_context(cafile=str(self._ca))
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=upstream, limit=0),
            auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=5),
        )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # Open watches are cut at once on stop: they never end by themselves.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port, ssl_context=serving).start()

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()
        rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    def _draw(self) -> str | None:
        faults, roll = self.faults, self._rng.random()
        for kind, share in (
            ("throttled", faults.throttle),
            ("server_error", faults.server_error),
            ("reset", faults.reset),
            ("delayed", faults.latency),
        ):
            if roll < share:
                if kind == "reset":
                    return "reset_before" if self._rng.random() < 0.5 else "reset_after"
                return kind
            roll -= share
        return None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        fault = self._draw()
        if fault:
            self.counts[fault] += 1
        if fault == "throttled":
            return web.Response(
                status=429,
                body=_status(429, "TooManyRequests", "injected: too many requests"),
                headers={"Retry-After": str(self.faults.retry_after)},
                content_type="application/json",
            )
        if fault == "server_error":
            code = 500 if self.counts[fault] % 2 else 503
            return web.Response(
                status=code,
                body=_status(code, "InternalError", "injected: server error"),
                content_type="application/json",
            )
        if fault == "reset_before":
            return self._reset(request)
        if fault == "delayed":
            await asyncio.sleep(self.faults.delay)
        self.counts["forwarded"] += 1
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        async with self._session.request(
            request.method,
            self._upstream + request.path_qs,
            headers=headers,
            data=await request.read() if request.can_read_body else None,
            allow_redirects=False,
            # Forward what the client sent, nothing more: an invented Content-Type
            # (application/octet-stream) is a 415 to the API server.
            skip_auto_headers=("Content-Type", "Accept", "Accept-Encoding", "User-Agent"),
        ) as upstream:
            answer_headers = {
                k: v for k, v in upstream.headers.items() if k.lower() not in HOP_BY_HOP
            }
            if request.query.get("watch") in ("true", "1") and upstream.status == 200:
                return await self._stream(request, upstream, answer_headers)
            body = await upstream.read()
        if fault == "reset_after":
            return self._reset(request)
        return web.Response(status=upstream.status, body=body, headers=answer_headers)

    def _reset(self, request: web.Request) -> web.StreamResponse:
        if request.transport is not None:
            request.transport.abort()
        return web.Response(status=500)  # never reaches the client: the connection is gone

    async def _stream(
        self, request: web.Request, upstream: Any, headers: dict[str, str]
    ) -> web.StreamResponse:
        """A watch, relayed event by event; ended early when `watch_drop_after` says."""
        answer = web.StreamResponse(status=upstream.status, headers=headers)
        answer.enable_chunked_encoding()
        await answer.prepare(request)
        drop_after = self.faults.watch_drop_after
        between_events = True
        try:
            async with asyncio.timeout(drop_after):
                async for chunk in upstream.content.iter_any():
                    await answer.write(chunk)
                    between_events = chunk.endswith(b"\n")
        except TimeoutError:
            self.counts["watch_dropped"] += 1
            if not between_events:
                # A server ends a watch between events; a cut inside one is a broken
                # connection, as a load balancer's would be (a clean end there would hand
                # the watcher half an event, which no API server does).
                if request.transport is not None:
                    request.transport.abort()
                return answer
        except (ConnectionResetError, aiohttp.ClientError):
            return answer  # the watcher or the server went away: so does the relay
        with contextlib.suppress(ConnectionResetError, aiohttp.ClientError):
            await answer.write_eof()
        return answer
