"""`migplan operator`, killed (exit 17) at one step boundary of a node's rollout: the point
(`before:<Step>` or `after:<Step>`) is the first argument, the operator's arguments follow.
The crash is the controller's `boundary` callback; production code has no such hook."""

from __future__ import annotations

import functools
import os
import sys

from migplan.operator.cli.app import main
from migplan.operator.controller import handlers
from migplan.planner.rollout.records import NodeStep

CRASHED = 17


def crash_at(point: str):
    """A boundary callback that ends the process at `point`, as a kill would."""

    def boundary(when: str, step: NodeStep) -> None:
        if f"{when}:{step.value}" == point:
            print(f"crashing on purpose at {point}", flush=True)
            sys.stderr.flush()
            os._exit(CRASHED)

    return boundary


if __name__ == "__main__":
    point = sys.argv.pop(1)
    handlers.configure = functools.partial(handlers.configure, boundary=crash_at(point))
    main()
