"""The metrics endpoint's authorizer: a flood of junk tokens costs neither memory nor the API
server (the reviews themselves are tested against the real API server in tests/cluster)."""

from __future__ import annotations

from dataclasses import dataclass
from http import HTTPStatus

import pytest
from prometheus_client import generate_latest

from migplan.operator import metrics_server
from migplan.operator.kube.auth import Identity


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Reviews:
    """The auth area of the kube seam: records the tokens sent to TokenReview; 'good'
    belongs to a scraper RBAC admits."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def review_token(self, *, token: str) -> Identity | None:
        self.seen.append(token)
        return Identity("prometheus", "u", (), {}) if token == "good" else None

    def may_access_path(self, *, who: Identity, verb: str, path: str) -> bool:
        return True


@dataclass
class Api:
    auth: Reviews


@pytest.fixture
def api() -> Api:
    return Api(Reviews())


def test_a_known_token_is_reviewed_once_a_minute(api) -> None:
    clock = Clock()
    authorize = metrics_server.KubernetesAuthorizer(api=api, clock=clock)
    assert [authorize("Bearer good") for _ in range(5)] == [HTTPStatus.OK] * 5
    clock.now += 61
    assert authorize("Bearer good") is HTTPStatus.OK
    assert api.auth.seen == ["good", "good"]


def test_junk_tokens_are_rate_limited_and_the_cache_stays_bounded(api) -> None:
    clock = Clock()
    authorize = metrics_server.KubernetesAuthorizer(
        api=api, clock=clock, max_decisions=50, reviews_per_second=10
    )
    answers = [authorize(f"Bearer junk-{n}") for n in range(25)]
    assert answers.count(HTTPStatus.UNAUTHORIZED) == 10
    assert answers.count(HTTPStatus.TOO_MANY_REQUESTS) == 15
    assert len(api.auth.seen) == 10  # one TokenReview per junk token, ten a second at most
    for second in range(20):
        clock.now += 1
        for n in range(10):
            authorize(f"Bearer junk-{second}-{n}")
    assert len(authorize._decisions) == 50
    clock.now += 1
    assert authorize("Bearer good") is HTTPStatus.OK  # a real scraper still gets in


def test_the_endpoint_says_which_build_serves_it_and_no_created_series() -> None:
    from urllib.request import urlopen

    from migplan.operator.controller import metrics

    metrics.EVICTIONS.labels(plan="metrics-test").inc()
    server = metrics_server.serve_metrics(port=0, host="127.0.0.1")
    try:
        body = urlopen(f"http://127.0.0.1:{server.server_port}/metrics", timeout=5).read()
    finally:
        server.shutdown()
    text = body.decode()
    assert 'migplan_build_info{python="' in text
    assert 'version="' in text
    assert 'migplan_evictions_total{plan="metrics-test"} 1.0' in text
    assert "_created" not in text
    metrics.set_phase("metrics-test", None)  # a deleted plan's series go
    assert 'plan="metrics-test"' not in generate_latest().decode()
