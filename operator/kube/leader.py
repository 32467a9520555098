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
from typing import Any

import structlog
from kubernetes import client
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
        api: Any,
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
        lock = _ObservedLock(name, namespace, identity)
        lock.api_instance = client.CoordinationV1Api(api)  # not the library's default client
        self._config = electionconfig.Config(
            lock=lock,
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


class _ObservedLock(LeaseLock):
    """The library's Lease lock, saying once per leader whom this replica follows."""

    _followed: str | None = None

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
