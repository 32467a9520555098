"""The `migplan` command line (also installed as the kubectl plugin `kubectl-migplan`)."""

import time

IMPORTED = time.monotonic()
"""When the command line package was first imported: for the `migplan` process, its start
(before the heavy imports)."""


class _Command:
    began = IMPORTED


def begin(at: float | None = None) -> None:
    """Record that a command begins `at` (time.monotonic(); default now)."""
    _Command.began = time.monotonic() if at is None else at


def began() -> float:
    """When the running command began: a preview's time limit counts from here, so
    `spec.solver.timeLimitSeconds` bounds what the user waits for, not only the solver."""
    return _Command.began
