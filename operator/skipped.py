"""Objects a planning pass could not read, skipped one by one so that no tenant's object stops
anyone's plan.

A pod, claim, Workload or agent report that breaks the planner's bounds (a request of 1025
instances, a claim name past 253 characters) is left out of the pass with a note on the plan
and a Warning event on the object itself; everything else is planned as usual. The note says
which field broke which bound, never the object's content.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from pydantic import ValidationError

T = TypeVar("T")


@dataclass(frozen=True)
class Skipped:
    """An object a pass left out, and why."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str | None
    why: str

    @property
    def where(self) -> str:
        return (
            f"{self.kind} {self.namespace}/{self.name}"
            if self.namespace
            else (f"{self.kind} {self.name}")
        )

    def note(self) -> str:
        """One line for the plan's status."""
        return f"{self.where} skipped: {self.why}"

    def body(self) -> dict[str, object]:
        """Enough of the object to post an event about it."""
        meta: dict[str, object] = {"name": self.name, "uid": self.uid}
        if self.namespace:
            meta["namespace"] = self.namespace
        return {"apiVersion": self.api_version, "kind": self.kind, "metadata": meta}


def why_invalid(exc: ValidationError) -> str:
    """The first broken bound as `field: what`, without the value that broke it."""
    errors = exc.errors(include_url=False, include_input=False)
    first = errors[0]
    where = ".".join(str(p) for p in first["loc"]) or "object"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {first['msg']}{more}"


def guarded(
    build: Callable[[], T],
    *,
    skipped: list[Skipped],
    api_version: str,
    kind: str,
    namespace: str,
    name: str,
    uid: str | None,
) -> T | None:
    """`build()`, or None with the object recorded in `skipped` when it breaks a bound."""
    try:
        return build()
    except ValidationError as exc:
        skipped.append(Skipped(api_version, kind, namespace, name, uid, why_invalid(exc)))
        return None
