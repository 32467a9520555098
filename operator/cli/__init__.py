"""The `migplan` command line (also installed as the kubectl plugin `kubectl-migplan`)."""

import gc
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


def main() -> None:
    """The `migplan` executable: the command line is loaded with the cyclic collector paused,
    then run. What loading makes lives as long as the process, so collecting while it grows
    only costs time (0.05 s of the 0.6 s every command spends loading); it is frozen out of
    later collections too."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        from migplan.operator.cli.app import main as run_command  # noqa: PLC0415
    finally:
        if collecting:
            gc.freeze()
            gc.enable()
    run_command()
