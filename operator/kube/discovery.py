"""Which API groups the API server serves (discovery)."""

from __future__ import annotations

from kubernetes import client
from kubernetes.client.exceptions import ApiException


def group_served(api: client.ApiClient, *, group: str, version: str) -> bool:
    """Whether the API server serves `group`/`version`; False when discovery is refused."""
    return (group, version) in served_versions(api)


def served_versions(api: client.ApiClient) -> set[tuple[str, str]]:
    """Every (group, version) the API server serves; none when discovery is refused."""
    try:
        groups = client.ApisApi(api).get_api_versions().groups or []
    except ApiException as exc:
        if exc.status in (403, 404):
            return set()
        raise
    return {(g.name, v.version) for g in groups for v in g.versions or []}
