"""The client layer's retries (conflicting and transient writes, failed reads) and its
request counting (no cluster needed)."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.exceptions import ApiException

from migplan.operator.kube import connect, retry


def failing(*statuses: int, reason: str = "Conflict"):
    """A call that fails with `statuses` in turn, then returns "ok"; it counts its calls."""
    calls = []

    def call() -> str:
        calls.append(1)
        if len(calls) <= len(statuses):
            error = ApiException(status=statuses[len(calls) - 1])
            error.body = json.dumps({"reason": reason})
            raise error
        return "ok"

    return call, calls


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch):
    monkeypatch.setattr(retry.time, "sleep", lambda _: None)


def test_conflicts_and_server_errors_are_retried() -> None:
    call, calls = failing(409, 503, 500)
    assert retry.retrying(call)() == "ok"
    assert len(calls) == 4


def test_already_exists_and_client_errors_are_not_retried() -> None:
    call, calls = failing(409, reason="AlreadyExists")
    with pytest.raises(ApiException):
        retry.retrying(call)()
    assert len(calls) == 1
    call, calls = failing(422, reason="Invalid")
    with pytest.raises(ApiException):
        retry.retrying(call)()
    assert len(calls) == 1


def test_retries_give_up_after_five_tries() -> None:
    call, calls = failing(409, 409, 409, 409, 409, 409)
    with pytest.raises(ApiException):
        retry.retrying(call)()
    assert len(calls) == 5


def throttled(retry_after: str | None):
    """A call the API server throttles once (429, with Retry-After if given), then answers."""
    calls = []

    def call() -> str:
        calls.append(1)
        if len(calls) == 1:
            error = ApiException(status=429)
            error.body = json.dumps({"reason": "TooManyRequests"})
            error.headers = {"Retry-After": retry_after} if retry_after is not None else {}
            raise error
        return "ok"

    return call


def test_throttling_waits_as_long_as_the_server_asks(monkeypatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(retry.time, "sleep", slept.append)
    assert retry.retrying(throttled("3"))() == "ok"
    assert slept == [3.0]
    slept.clear()
    assert retry.retrying(throttled("600"))() == "ok"  # capped: a broken header cannot stall us
    assert slept == [retry.RETRY_AFTER_CAP]
    slept.clear()
    assert retry.retrying(throttled(None))() == "ok"  # no header: a short back-off
    assert len(slept) == 1
    assert 0 < slept[0] < 1


@pytest.mark.parametrize(
    ("method", "url", "described"),
    [
        ("GET", "https://k/api/v1/nodes", ("list", "nodes")),
        ("GET", "https://k/api/v1/nodes/gpu-1", ("get", "nodes")),
        ("GET", "https://k/api/v1/pods?fieldSelector=spec.nodeName%3Dn", ("list", "pods")),
        ("GET", "https://k/api/v1/namespaces/ns/pods/p", ("get", "pods")),
        ("POST", "https://k/api/v1/namespaces/ns/pods/p/eviction", ("create", "pods/eviction")),
        ("GET", "https://k/api/v1/namespaces", ("list", "namespaces")),
        ("GET", "https://k/api/v1/namespaces/ns", ("get", "namespaces")),
        (
            "GET",
            "https://k/apis/migplan.io/v1alpha1/nodepartitions?fieldSelector=x&watch=true",
            ("watch", "nodepartitions"),
        ),
        (
            "GET",
            "https://k/api/v1/pods?fieldSelector=status.phase%3DPending&watch=True",
            ("watch", "pods"),
        ),
        (
            "PATCH",
            "https://k/apis/migplan.io/v1alpha1/gpupartitionplans/p/status",
            ("patch", "gpupartitionplans/status"),
        ),
        (
            "PUT",
            "https://k/apis/coordination.k8s.io/v1/namespaces/s/leases/l",
            ("update", "leases"),
        ),
    ],
)
def test_requests_are_counted_by_verb_and_resource(method, url, described) -> None:
    from migplan.operator.kube.metrics import describe

    assert describe(method, url) == described


def answering(*answers):
    """An API client whose transport gives `answers` in turn: (status, headers) pairs or
    exceptions to raise; the last is repeated. It records the methods it was asked."""
    import urllib3
    from kubernetes import client
    from kubernetes.client.rest import RESTResponse

    asked: list[str] = []
    api = client.ApiClient()

    def request(method, url, *args, **kwargs):
        asked.append(method)
        answer = answers[min(len(asked), len(answers)) - 1]
        if isinstance(answer, BaseException):
            raise answer
        status, headers = answer
        body = {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "gpu-1"}}
        return RESTResponse(
            urllib3.HTTPResponse(
                body=json.dumps(body if status == 200 else {"code": status}).encode(),
                status=status,
                headers={"Content-Type": "application/json", **headers},
                preload_content=True,
            )
        )

    api.rest_client.request = request
    return connect._counted(api), asked


def test_reads_are_retried_on_throttling_server_errors_and_lost_connections(monkeypatch) -> None:
    from kubernetes import client
    from urllib3.exceptions import ProtocolError

    slept: list[float] = []
    monkeypatch.setattr(retry.time, "sleep", slept.append)
    api, asked = answering(
        (503, {}), (429, {"Retry-After": "2"}), ProtocolError("reset"), (200, {})
    )
    assert client.CoreV1Api(api).read_node("gpu-1").metadata.name == "gpu-1"
    assert asked == ["GET"] * 4
    assert slept[1] == 2.0


def test_a_read_that_keeps_failing_fails_with_the_servers_answer() -> None:
    from kubernetes import client

    api, asked = answering((503, {}))
    with pytest.raises(ApiException) as failed:
        client.CoreV1Api(api).read_node("gpu-1")
    assert failed.value.status == 503
    assert len(asked) == retry.TRIES


def test_writes_are_not_retried_by_the_transport() -> None:
    from kubernetes import client

    api, asked = answering((503, {}))
    with pytest.raises(ApiException):
        client.CoreV1Api(api).patch_node("gpu-1", {"metadata": {"labels": {"a": "b"}}})
    assert asked == ["PATCH"]


def test_a_write_whose_connection_was_lost_is_tried_again() -> None:
    from urllib3.exceptions import ProtocolError

    calls = []

    def call() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise ProtocolError("Connection aborted.", ConnectionResetError())
        return "ok"

    assert retry.retrying(call)() == "ok"
    assert len(calls) == 2
