"""Connect to the API server: one `KubeClient` whose areas make every call migplan makes,
each request counted and each read retried."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, cast

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from migplan.operator.kube import metrics as api_metrics
from migplan.operator.kube.auth import Auth
from migplan.operator.kube.cached import (
    CachedCore,
    CachedDra,
    CachedGangs,
    CachedKueue,
    CachedPlans,
)
from migplan.operator.kube.core import Core
from migplan.operator.kube.dra import Dra
from migplan.operator.kube.gangs import Gangs
from migplan.operator.kube.informers import ClusterCache
from migplan.operator.kube.kueue import Kueue
from migplan.operator.kube.plans import Plans
from migplan.operator.kube.retry import read_retriable, retried, unanswered_read
from migplan.operator.kube.seam import Kube
from migplan.planner.errors import MigplanInputError


@dataclass(frozen=True)
class KubeClient:
    """The real API server behind every area of the kube seam (`seam.Kube`); `client` is
    the raw connection, for what only the Kubernetes library does (leader election)."""

    connection: client.ApiClient
    core: Core
    plans: Plans
    dra: Dra
    kueue: Kueue
    gangs: Gangs
    auth: Auth
    cache: ClusterCache | None = None
    """The informer caches behind the cached areas (`cached`), if any."""

    @classmethod
    def over(cls, api: client.ApiClient) -> KubeClient:
        """Every area over one connection."""
        return cls(
            connection=api,
            core=Core(api),
            plans=Plans(api),
            dra=Dra(api),
            kueue=Kueue(api),
            gangs=Gangs(api),
            auth=Auth(api),
        )

    def cached(self, *, pod_sets: frozenset[tuple[str, str]] = frozenset()) -> KubeClient:
        """The same client with a planning pass's whole-cluster lists answered from informer
        caches (`cached.py`), `pod_sets` (namespace, label selector) among them; the
        informers list and watch over a connection of their own (each watch holds one
        open), counted like every other request."""
        api = self.connection
        cache = ClusterCache(_counted(client.ApiClient(configuration=api.configuration)))
        return KubeClient(
            connection=api,
            core=CachedCore(api, cache, pod_sets),
            plans=CachedPlans(api, cache),
            dra=CachedDra(api, cache),
            kueue=CachedKueue(api, cache),
            gangs=CachedGangs(api, cache),
            auth=self.auth,
            cache=cache,
        )


def _counted(api: client.ApiClient) -> client.ApiClient:
    """`api` with every request counted in migplan_api_requests_total, and every read (GET,
    watches included) retried on throttling, a transient server error or a lost connection:
    reads are most of the operator's calls and each is safe to repeat, so one bad answer
    does not fail a whole tick."""
    request = api.rest_client.request

    def counted(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if method == "GET":
            return read(method, url, *args, **kwargs)
        return count(method, url, *args, **kwargs)

    def count(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        verb, resource = api_metrics.describe(method, url)
        code = "error"
        try:
            response = request(method, url, *args, **kwargs)
            code = str(getattr(response, "status", "") or "")
            return response
        except ApiException as exc:
            code = str(exc.status)
            raise
        finally:
            api_metrics.API_REQUESTS.labels(verb=verb, resource=resource, code=code).inc()

    read = retried(count, read_retriable, unanswered=unanswered_read)
    api.rest_client.request = counted  # type: ignore[method-assign]
    return api


DEFAULT_KUBECONFIG = "~/.kube/config"


def kubeconfig_files(kubeconfig: str | None = None) -> str | None:
    """Where the kubeconfig is, as kubectl looks: `kubeconfig` (--kubeconfig), else
    KUBECONFIG (a list of files, merged), else ~/.kube/config if it exists; None when none
    applies (in a pod: its service account)."""
    if kubeconfig:
        return kubeconfig
    listed = os.environ.get("KUBECONFIG", "")
    if any(part for part in listed.split(os.pathsep)):
        return listed
    default = os.path.expanduser(DEFAULT_KUBECONFIG)
    return default if os.path.isfile(default) else None


def connect(*, kubeconfig: str | None = None, context: str | None = None) -> KubeClient:
    """An API client as kubectl would make one: from `kubeconfig_files` (its `context`, or
    its current context), else the in-cluster service account."""
    files = kubeconfig_files(kubeconfig)
    try:
        if files:
            api = config.new_client_from_config(config_file=files, context=context)
            return KubeClient.over(_counted(cast(client.ApiClient, api)))
        if context:
            raise config.ConfigException(f"--context {context}: no kubeconfig to find it in")
        config.load_incluster_config()
    except (config.ConfigException, OSError, yaml.YAMLError, TypeError, AttributeError) as exc:
        # A kubeconfig that is not YAML, or YAML of another shape, is bad input too.
        raise MigplanInputError(
            f"no cluster to talk to ({' '.join(str(exc).split())}): pass --kubeconfig or "
            f"--context, set KUBECONFIG, or write {DEFAULT_KUBECONFIG}"
        ) from None
    return KubeClient.over(_counted(client.ApiClient()))


def as_kube(api: KubeClient) -> Kube:
    """The client as the seam's type (mypy checks here that every area conforms)."""
    return api
