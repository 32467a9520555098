"""Progress of a long planning pass on stderr, so a person knows what the wait is for."""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import TextIO

QUIET_SECONDS = 2.0
"""A pass shorter than this prints nothing."""


class StderrProgress:
    """Prints each step of a pass as `migplan: [4.2 s] step`, once the pass has run for
    `QUIET_SECONDS` (the step under way then is printed at that moment)."""

    def __init__(self, *, stream: TextIO | None = None, quiet: float | None = None) -> None:
        self._stream = stream or sys.stderr
        self._quiet = QUIET_SECONDS if quiet is None else quiet
        self._started = time.monotonic()
        self._step: str | None = None
        self._printed: str | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(self._quiet, self._flush)
        self._timer.daemon = True

    def __enter__(self) -> StderrProgress:
        self._timer.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._timer.cancel()

    def __call__(self, step: str) -> None:
        """Record `step`; print it if the pass is already past the quiet time."""
        with self._lock:
            self._step = step
        if time.monotonic() - self._started >= self._quiet:
            self._flush()

    def _flush(self) -> None:
        with self._lock:
            if self._step is None or self._step == self._printed:
                return
            self._printed = self._step
            elapsed = time.monotonic() - self._started
            self._stream.write(f"migplan: [{elapsed:4.1f} s] {self._step}\n")
            self._stream.flush()
