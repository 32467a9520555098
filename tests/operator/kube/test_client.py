"""The client layer's retry of conflicting and transient writes (no cluster needed)."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.exceptions import ApiException

from migplan.operator.kube import client as kube


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
    monkeypatch.setattr(kube.time, "sleep", lambda _: None)


def test_conflicts_and_server_errors_are_retried() -> None:
    call, calls = failing(409, 503, 500)
    assert kube.retrying(call)() == "ok"
    assert len(calls) == 4


def test_already_exists_and_client_errors_are_not_retried() -> None:
    call, calls = failing(409, reason="AlreadyExists")
    with pytest.raises(ApiException):
        kube.retrying(call)()
    assert len(calls) == 1
    call, calls = failing(422, reason="Invalid")
    with pytest.raises(ApiException):
        kube.retrying(call)()
    assert len(calls) == 1


def test_retries_give_up_after_five_tries() -> None:
    call, calls = failing(409, 409, 409, 409, 409, 409)
    with pytest.raises(ApiException):
        kube.retrying(call)()
    assert len(calls) == 5
