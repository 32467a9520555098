"""structlog set-up: one event per line, key-value; JSON when stderr is not a terminal."""

from __future__ import annotations

import logging
import sys

import structlog

from migplan.planner.errors import MigplanInputError

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


def configure_logging(*, level: str = "info", json: bool | None = None) -> None:
    """Send structlog events at `level` or above to stderr, as JSON unless on a terminal."""
    try:
        threshold = _LEVELS[level.lower()]
    except KeyError:
        raise MigplanInputError(
            f"unknown log level {level!r} (use one of: {', '.join(_LEVELS)})"
        ) from None
    as_json = (not sys.stderr.isatty()) if json is None else json
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if as_json else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        # Look stderr up when a logger is made, not now: it may be replaced (tests, daemons).
        logger_factory=lambda *_: structlog.PrintLogger(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
