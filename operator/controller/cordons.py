"""Which GPU nodes a plan holds cordoned, kept up to date from the node watch the operator
runs anyway (the node informer's, or kopf's with `--no-informers`), so the ticker need not
list every node every round (at 1,000 nodes and a 2 s tick that list was 30 full Node lists
a minute, the most expensive call the operator made)."""

from __future__ import annotations

import threading
from collections.abc import Mapping


class CordonIndex:
    """Node name -> the plan that cordoned it, from watch events (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owners: dict[str, str] = {}
        self.seen = False
        """Whether any node event arrived yet: until then the index knows nothing."""

    def saw(self, *, name: str, annotations: Mapping[str, str] | None, owner_key: str) -> None:
        """Node `name` as the watch delivered it (its annotations)."""
        owner = (annotations or {}).get(owner_key)
        with self._lock:
            self.seen = True
            if owner:
                self._owners[name] = owner
            else:
                self._owners.pop(name, None)

    def forget(self, name: str) -> None:
        """Node `name` is gone (or no longer cordoned, as a fresh read showed)."""
        with self._lock:
            self._owners.pop(name, None)

    def cordoned(self) -> dict[str, str]:
        """A copy: node -> plan."""
        with self._lock:
            return dict(self._owners)
