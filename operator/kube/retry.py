"""Retrying API calls: writes on conflicts, throttling and transient errors; reads on
anything but an answer about the request itself (paced by the server's Retry-After)."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from kubernetes.client.exceptions import ApiException
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    retry_if_result,
    stop_after_attempt,
    wait_exponential_jitter,
)
from tenacity.retry import retry_base
from tenacity.wait import wait_base
from urllib3.exceptions import HTTPError as TransportError

RETRIED = frozenset({409, 429, 500, 502, 503, 504})
"""Conflicts, throttling (API Priority and Fairness) and transient server errors: a write
that meets one is tried again."""

TRIES = 5

RETRY_AFTER_CAP = 30.0
"""The longest wait a server's Retry-After is taken at (seconds)."""

P = ParamSpec("P")

R = TypeVar("R")


def _retriable(exc: BaseException) -> bool:
    """A 409 AlreadyExists is an answer, not a conflict: passed on at once. A connection
    lost on the way (reset, closed without an answer) is tried again too: every write
    retried this way is idempotent (a merge patch, or a create that takes AlreadyExists as
    done)."""
    if isinstance(exc, TransportError):
        return True
    return (
        isinstance(exc, ApiException) and exc.status in RETRIED and _reason(exc) != "AlreadyExists"
    )


READ_RETRIED = RETRIED - {409}


def read_retriable(exc: BaseException) -> bool:
    """A read is safe to send again on anything but an answer about the request itself."""
    return isinstance(exc, TransportError) or (
        isinstance(exc, ApiException) and exc.status in READ_RETRIED
    )


def unanswered_read(response: Any) -> bool:
    """A read's raw answer that says "not now" (throttled, a transient server error); its
    body is read so the connection goes back to the pool."""
    if getattr(response, "status", 200) not in READ_RETRIED:
        return False
    response.read()
    return True


def retry_after(exc: BaseException | None) -> float | None:
    """The seconds a throttled or unavailable API server asked to wait (its Retry-After
    header), at most RETRY_AFTER_CAP; None when it did not say."""
    return _seconds((getattr(exc, "headers", None) or {}).get("Retry-After"))


def _seconds(value: object) -> float | None:
    try:
        return min(max(float(str(value)), 0.0), RETRY_AFTER_CAP)
    except (TypeError, ValueError):
        return None


class _ServerPaced(wait_base):
    """Wait as long as the server asked (Retry-After, on an error or on a retried
    answer), else back off exponentially."""

    def __init__(self) -> None:
        self._backoff = wait_exponential_jitter(multiplier=0.2, max=5.0, jitter=0.1)

    def __call__(self, retry_state: RetryCallState) -> float:
        outcome = retry_state.outcome
        if outcome is None:
            asked = None
        elif outcome.failed:
            asked = retry_after(outcome.exception())
        else:
            asked = _seconds(getattr(outcome.result(), "headers", {}).get("Retry-After"))
        return asked if asked is not None else self._backoff(retry_state)


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


def _last_answer(retry_state: RetryCallState) -> Any:
    """After the last try, the answer as it came (the caller raises on it as usual)."""
    assert retry_state.outcome is not None
    return retry_state.outcome.result()


def retried(
    call: Callable[P, R],
    when: Callable[[BaseException], bool],
    *,
    unanswered: Callable[[Any], bool] | None = None,
) -> Callable[P, R]:
    """`call` tried up to TRIES times while it raises what `when` accepts (or returns what
    `unanswered` accepts), paced by the server."""
    retry: retry_base = retry_if_exception(when)
    if unanswered is not None:
        retry = retry | retry_if_result(unanswered)

    @functools.wraps(call)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        retrying_ = Retrying(
            retry=retry,
            stop=stop_after_attempt(TRIES),
            wait=_ServerPaced(),
            sleep=_sleep,
            reraise=True,
            retry_error_callback=_last_answer if unanswered is not None else None,
        )
        return retrying_(call, *args, **kwargs)

    return wrapper


def retrying(call: Callable[P, R]) -> Callable[P, R]:
    """Retry `call` on a write conflict, throttling, a transient server error or a lost
    connection (TRIES tries, waiting as long as the server's Retry-After says, else backing
    off with jitter)."""
    return retried(call, _retriable)


def _reason(exc: ApiException) -> str:
    """The Status reason of a failed call (`AlreadyExists`, `Conflict`, ...)."""
    try:
        return str(json.loads(exc.body or "{}").get("reason", ""))
    except (ValueError, TypeError, AttributeError):
        return ""
