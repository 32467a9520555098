"""Informer caches: the objects a planning pass lists, kept in memory by a list and then a
watch from its resourceVersion (the Kubernetes client's `SharedInformer`), so that a pass
costs the API server O(changes) instead of a list of the whole cluster every time.

An informer starts the first time a pass asks for its objects and waits for its first list;
from then on its watch keeps it current (a watch that expires lists again). Where the first
list is refused (RBAC, a kind not served), the informer is given up and the caller lists
directly, as it would without caches. Reads from a cache trail the API server by the watch's
latency (milliseconds): planning reads what other actors write (agents, the scheduler, users),
which it never could read atomically anyway; every write re-reads what it acts on.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, cast

import structlog
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.informer import ADDED, DELETED, ERROR, MODIFIED, SharedInformer

log = structlog.get_logger("migplan.operator")

SYNC_TIMEOUT = 60.0
"""Seconds the first read of a kind waits for its informer's first list before listing
directly (later reads list directly at once until the informer has synced)."""

ERROR_PAUSE = 1.0
"""Seconds an informer waits after a watch or list that failed."""


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def slim(obj: Any) -> None:
    """Drop, in place, what no reader of a cache needs and what weighs most: managedFields
    (16 of a kwok Node's 36 KB in memory), kubectl's last-applied annotation and a Node's
    image list (tens of KB on a real GPU node)."""
    if isinstance(obj, dict):
        meta = obj.get("metadata") or {}
        meta.pop("managedFields", None)
        (meta.get("annotations") or {}).pop(LAST_APPLIED, None)
        return
    meta = getattr(obj, "metadata", None)
    if meta is not None:
        meta.managed_fields = None
        if meta.annotations:
            meta.annotations.pop(LAST_APPLIED, None)
    status = getattr(obj, "status", None)
    if status is not None and getattr(status, "images", None):
        status.images = None


class Watched:
    """One kind (with its selectors) kept current by a `SharedInformer`."""

    def __init__(
        self,
        call: Callable[..., Any],
        *,
        custom: bool,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> None:
        self._first_list = threading.Event()
        self.refused: ApiException | None = None
        """Why the first list failed with an answer about the request (403, 404)."""
        self._done = threading.Event()
        self._started = False
        self._read = threading.Event()
        self._informer = SharedInformer(
            self._lister(call, custom=custom),
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
        )
        # The informer reconnects at once after a failed watch; this handler runs on its
        # thread, so a refused or broken watch is tried again at most once a second.
        self._informer.add_event_handler(ERROR, lambda _: time.sleep(ERROR_PAUSE))
        # Handlers get the object just cached: slimming it there is client-go's transform.
        self._informer.add_event_handler(ADDED, slim)
        self._informer.add_event_handler(MODIFIED, slim)

    def _lister(self, call: Callable[..., Any], *, custom: bool) -> Callable[..., Any]:
        """`call` as the informer calls it: for the list and (watch=True) for the watch. The
        informer lists before it first watches, so its first watch call means its cache is
        filled: that is when it counts as synced (the library has no HasSynced yet)."""

        def listing(**kwargs: Any) -> Any:
            if kwargs.get("watch"):
                self._first_list.set()
                self._done.set()
                return call(**kwargs)
            try:
                found = call(**kwargs)
            except ApiException as exc:
                if exc.status in (403, 404) and not self._first_list.is_set():
                    self.refused = exc
                    self._done.set()
                raise
            if not custom:
                return found
            # Custom objects come as a dictionary; the informer reads `.items` and
            # `.metadata.resource_version` as on the generated list models.
            body = cast(dict[str, Any], found)
            return SimpleNamespace(
                items=body.get("items") or [],
                metadata=SimpleNamespace(
                    resource_version=(body.get("metadata") or {}).get("resourceVersion")
                ),
            )

        # The watch decodes events into the type `call`'s signature says it returns.
        return functools.wraps(call)(listing)

    def start(self) -> None:
        """List and watch in the informer's thread."""
        self._started = True
        self._informer.start()

    def stop(self, *, wait: bool = True) -> None:
        """Stop the informer. Its thread ends at once where it waits to retry, else at the
        watch's next event or error: without `wait` that is left to a helper thread."""
        if wait:
            self._informer.stop()
        else:
            threading.Thread(target=self._informer.stop, daemon=True).start()

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` s for the first list (or its refusal); whether it synced."""
        self._done.wait(timeout)
        return self._first_list.is_set()

    def first_read(self) -> bool:
        """True the first time it is asked: whether this read is the informer's first (only
        that one waits for its list, wherever the informer was started)."""
        first = not self._read.is_set()
        self._read.set()
        return first

    @property
    def synced(self) -> bool:
        """Whether the cache has been filled by a list."""
        return self._first_list.is_set()

    def items(self) -> list[Any]:
        """A snapshot of the cached objects."""
        return list(self._informer.cache.list())

    def listen(self, handler: Callable[[str, Any], None], *, timeout: float) -> None:
        """Call `handler(event_type, obj)` for each object added, modified or deleted, on the
        informer's thread. On an informer started already, the objects of its first list
        (waited for up to `timeout` s) are handed over as added here too: an object may come
        twice, and handlers must not mind."""
        for kind in (ADDED, MODIFIED, DELETED):
            self._informer.add_event_handler(kind, functools.partial(handler, kind))
        if self._started and self.wait(timeout):
            for obj in self.items():
                handler(ADDED, obj)


@dataclass(frozen=True)
class Kind:
    """What one informer watches: its cache key, the list call, and the selectors."""

    key: Hashable
    call: Callable[..., Any]
    custom: bool
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None

    def informer(self) -> Watched:
        """A new informer for this kind (not started)."""
        return Watched(
            self.call,
            custom=self.custom,
            namespace=self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
        )


class ClusterCache:
    """The informers of one operator, one per kind and selectors, started on first read."""

    def __init__(self, api: client.ApiClient, *, sync_timeout: float = SYNC_TIMEOUT) -> None:
        self.api = api
        """The connection the informers list and watch through (its own pool: each
        watch holds a connection open)."""
        self.sync_timeout = sync_timeout
        self._lock = threading.Lock()
        self._watched: dict[Hashable, Watched] = {}

    def stop(self) -> None:
        """Tell every informer to stop (without waiting for their watches to end), so none
        is left retrying once the API server is gone (tests stop theirs this way)."""
        with self._lock:
            watched, self._watched = list(self._watched.values()), {}
        for one in watched:
            one.stop(wait=False)

    def _nodes(self, label_selector: str) -> Kind:
        return Kind(
            ("nodes", label_selector),
            client.CoreV1Api(self.api).list_node,
            custom=False,
            label_selector=label_selector,
        )

    def nodes(self, *, label_selector: str) -> list[Any] | None:
        """Nodes matching `label_selector`; None where no cache could be filled."""
        return self._read(self._nodes(label_selector))

    def on_nodes(self, *, label_selector: str, handler: Callable[[str, Any], None]) -> None:
        """Hand `handler(event_type, node)` every change to the nodes matching
        `label_selector` as their cache hears of it (`Watched.listen`), starting that
        informer now if no read has: the operator's node handling rides on the watch its
        planning passes read from, so each node update is decoded once."""
        self._watched_for(self._nodes(label_selector), listener=handler)

    def pods(
        self,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[Any] | None:
        """Pods of `namespace` (None: every namespace) matching the selectors; None where no
        cache could be filled."""
        core = client.CoreV1Api(self.api)
        return self._read(
            Kind(
                ("pods", namespace, label_selector, field_selector),
                core.list_namespaced_pod if namespace else core.list_pod_for_all_namespaces,
                custom=False,
                namespace=namespace,
                label_selector=label_selector,
                field_selector=field_selector,
            )
        )

    def namespaces(self) -> list[Any] | None:
        """Every namespace; None where no cache could be filled."""
        core = client.CoreV1Api(self.api)
        return self._read(Kind(("namespaces",), core.list_namespace, custom=False))

    def custom(self, *, group: str, version: str, plural: str) -> list[dict[str, Any]] | None:
        """Every object of a custom or aggregated kind (all namespaces, as dictionaries);
        None where no cache could be filled."""
        objects = client.CustomObjectsApi(self.api)

        @functools.wraps(objects.list_cluster_custom_object)
        def call(**kwargs: Any) -> Any:
            return objects.list_cluster_custom_object(group, version, plural, **kwargs)

        return self._read(Kind((group, version, plural), call, custom=True))

    def _watched_for(
        self, kind: Kind, *, listener: Callable[[str, Any], None] | None = None
    ) -> Watched:
        """The informer for `kind`, started if there was none, with `listener` listening
        (from before its first list, where this call starts it)."""
        with self._lock:
            watched = self._watched.get(kind.key)
            first = watched is None
            if watched is None:
                watched = kind.informer()
                self._watched[kind.key] = watched
                if listener is not None:
                    watched.listen(listener, timeout=0)
                watched.start()
        if listener is not None and not first:
            watched.listen(listener, timeout=self.sync_timeout)
        return watched

    def _read(self, kind: Kind) -> list[Any] | None:
        watched = self._watched_for(kind)
        # Only the first read waits (also of an informer a listener started): one that has
        # not synced by then (its list failing, say) must not hold every later pass for the
        # timeout again.
        if watched.synced or (watched.first_read() and watched.wait(self.sync_timeout)):
            return watched.items()
        if watched.refused is not None:  # asked again on the next read
            with self._lock:
                if self._watched.get(kind.key) is watched:
                    del self._watched[kind.key]
            watched.stop()
        log.warning(
            "informer_not_synced",
            kind=str(kind.key),
            why=f"refused ({watched.refused.status})" if watched.refused else "timed out",
        )
        return None
