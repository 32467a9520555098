"""Informer caches where the API server does not answer (the real-server behaviour is in
tests/cluster/test_informers.py)."""

from __future__ import annotations

import time

from kubernetes import client

from migplan.operator.kube.informers import ClusterCache


def test_an_informer_that_never_syncs_holds_only_the_first_read() -> None:
    # Nothing listens on port 9: every list the informer tries fails to connect.
    nowhere = client.ApiClient(client.Configuration(host="http://127.0.0.1:9"))
    cache = ClusterCache(nowhere, sync_timeout=1.0)
    try:
        started = time.monotonic()
        assert cache.nodes(label_selector="a=b") is None  # the caller lists directly
        first = time.monotonic() - started
        started = time.monotonic()
        assert cache.nodes(label_selector="a=b") is None
        again = time.monotonic() - started
    finally:
        cache.stop()
    assert first >= 1.0, "the first read did not wait for the first list"
    assert again < 0.5, f"a later read waited {again:.1f} s for an informer that never synced"
