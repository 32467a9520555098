"""How much migplan asks of the API server: every request the client layer makes, by verb,
resource and answer (kopf's own watches go through its own client and are not counted)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from prometheus_client import Counter

API_REQUESTS = Counter(
    "migplan_api_requests_total",
    "Kubernetes API requests made through migplan's client layer",
    ["verb", "resource", "code"],
)
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def describe(method: str, url: str) -> tuple[str, str]:
    """(Kubernetes verb, resource[/subresource]) of a request: GET is get, list or watch."""
    parts = urlsplit(url)
    path = [p for p in parts.path.split("/") if p]
    # /api/v1/... or /apis/<group>/<version>/...
    rest = path[2:] if path[:1] == ["api"] else path[3:]
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) > 2:
        rest = rest[2:]
    resource = rest[0] if rest else "-"
    named = len(rest) >= 2
    if len(rest) >= 3:
        resource = f"{resource}/{rest[2]}"
    if method.upper() == "GET":
        # The Python client sends watch=True, kubectl watch=true.
        if [v.lower() for v in parse_qs(parts.query).get("watch", [])] in (["true"], ["1"]):
            return "watch", resource
        return ("get" if named else "list"), resource
    return _VERBS.get(method.upper(), method.lower()), resource
