"""Leader election on a coordination.k8s.io Lease (the client library's implementation), so
that of several operator replicas exactly one plans and rolls out.

kopf's peering would pause equal-priority replicas all together and does not pause
migplan's own ticker thread; a Lease says who leads, and a leader that cannot renew it exits
at once, so two replicas never step the same rollout.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import structlog
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

log = structlog.get_logger("migplan.operator")

LEASE_SECONDS = 10
"""A dead leader's lease runs out this long after its last renewal; a follower retries
every RETRY_SECONDS, so it takes over within about LEASE_SECONDS + RETRY_SECONDS."""
RENEW_SECONDS = 7
RETRY_SECONDS = 2


class Leadership:
    """Campaigns for the Lease `namespace/name` in a background thread."""

    def __init__(
        self,
        api: client.ApiClient,
        *,
        namespace: str,
        name: str,
        identity: str,
        on_lead: Callable[[], None],
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        self.identity = identity
        self.leading = threading.Event()
        self._on_lead = on_lead
        self._on_lost = on_lost or _exit_now
        self._lock = _ObservedLock(name, namespace, identity)
        self._lock.api_instance = client.CoordinationV1Api(api)  # not the library's default
        self._config = electionconfig.Config(
            lock=self._lock,
            lease_duration=LEASE_SECONDS,
            renew_deadline=RENEW_SECONDS,
            retry_period=RETRY_SECONDS,
            onstarted_leading=self._started,
            onstopped_leading=self._stopped,
        )

    def _started(self) -> None:
        log.info("leading", identity=self.identity)
        self.leading.set()
        self._on_lead()

    def _stopped(self) -> None:
        self.leading.clear()
        log.error("lost the lease: exiting so that only one replica acts", identity=self.identity)
        self._on_lost()

    def start(self) -> None:
        """Campaign (and, once leading, renew) until the process ends."""
        election = leaderelection.LeaderElection(self._config)
        threading.Thread(target=election.run, name="migplan-leader", daemon=True).start()

    def step_down(self) -> bool:
        """Stop campaigning and renewing, and give the Lease up if held, so that a follower
        takes over within one retry (RETRY_SECONDS) rather than after the lease runs out,
        as client-go's ReleaseOnCancel does. For a clean shutdown only: the process must
        end soon after, as the election thread keeps running. Whether a held Lease was
        released."""
        self._lock.resigned = True
        if not self.leading.is_set():
            return False
        self.leading.clear()
        released = self._lock.release()
        log.info("stepped down", identity=self.identity, released=released)
        return released


class _ObservedLock(LeaseLock):
    """The library's Lease lock, saying once per leader whom this replica follows."""

    _followed: str | None = None
    resigned = False
    """Set by `Leadership.step_down`: create and renew nothing more."""

    def create(self, name: str, namespace: str, election_record: Any) -> bool:
        return False if self.resigned else bool(super().create(name, namespace, election_record))

    def update(self, name: str, namespace: str, updated_record: Any) -> bool:
        return False if self.resigned else bool(super().update(name, namespace, updated_record))

    def release(self, *, attempts: int = 3) -> bool:
        """Clear the holder of a Lease this replica holds (an empty holder is free to take
        for client-go and the Python client alike). Retried on a conflict with a renewal
        in flight; False when the Lease is someone else's or the API refuses."""
        for _ in range(attempts):
            try:
                lease = self.api_instance.read_namespaced_lease(self.name, self.namespace)
                spec = lease.spec
                if spec is None or spec.holder_identity != self.identity:
                    return False
                spec.holder_identity = None
                spec.lease_duration_seconds = 1
                self.api_instance.replace_namespaced_lease(
                    name=self.name, namespace=self.namespace, body=lease
                )
                return True
            except ApiException as exc:
                if exc.status != HTTPStatus.CONFLICT:
                    log.warning("could not release the lease", status=exc.status)
                    return False
        return False

    def get(self, name: str, namespace: str) -> tuple[bool, Any]:
        found, record = super().get(name, namespace)
        holder = getattr(record, "holder_identity", None) if found else None
        if holder and holder not in (self.identity, self._followed):
            self._followed = holder
            log.info("following", leader=holder, identity=self.identity)
        return found, record


def _exit_now() -> None:
    os._exit(1)


def identity() -> str:
    """This replica's name in the Lease: the pod's name (POD_NAME, else HOSTNAME) and pid."""
    return f"{os.environ.get('POD_NAME') or os.environ.get('HOSTNAME') or 'migplan'}-{os.getpid()}"
