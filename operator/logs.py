"""structlog set-up: one event per line, key-value; JSON when stderr is not a terminal."""

from __future__ import annotations

import logging
import sys
from enum import StrEnum

import structlog

from migplan.planner.errors import MigplanInputError

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


class LogFormat(StrEnum):
    """How log events are written: JSON, for people (console), or JSON unless on a terminal."""

    AUTO = "auto"
    JSON = "json"
    CONSOLE = "console"

    def as_json(self) -> bool | None:
        """`configure_logging`'s `json` argument for this format."""
        return None if self is LogFormat.AUTO else self is LogFormat.JSON


_rendering = {"json": True}
"""How the last configure_logging renders, for stdlib records (stdlib_formatter)."""


def _renderer(*, as_json: bool) -> structlog.typing.Processor:
    if as_json:
        return structlog.processors.JSONRenderer()
    return structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())


def _tracebacks(*, as_json: bool) -> list[structlog.typing.Processor]:
    """An event logged with exc_info keeps its stack: as structured frames in JSON (the
    console renderer prints the traceback itself)."""
    return [structlog.processors.dict_tracebacks] if as_json else []


def _kubernetes_object(
    _: object, __: str, event: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    """kopf's records name the object they concern (record.k8s_ref): keep it as `object`."""
    ref = getattr(event.get("_record"), "k8s_ref", None)
    if isinstance(ref, dict):
        event["object"] = {k: ref[k] for k in ("kind", "namespace", "name") if ref.get(k)}
    return event


def stdlib_formatter() -> logging.Formatter:
    """A formatter that writes standard-library log records (kopf's) as migplan's own events:
    one line each, the same keys (event, level, timestamp, plus logger and the Kubernetes
    object) and the same rendering as configure_logging chose, so a log pipeline sees one
    shape."""
    return structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[
            structlog.stdlib.add_log_level,
            structlog.stdlib.add_logger_name,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _kubernetes_object,
        ],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            *_tracebacks(as_json=_rendering["json"]),
            _renderer(as_json=_rendering["json"]),
        ],
    )


def configure_logging(*, level: str = "info", json: bool | None = None) -> None:
    """Send structlog events at `level` or above to stderr, as JSON unless on a terminal."""
    try:
        threshold = _LEVELS[level.lower()]
    except KeyError:
        raise MigplanInputError(
            f"unknown log level {level!r} (use one of: {', '.join(_LEVELS)})"
        ) from None
    as_json = (not sys.stderr.isatty()) if json is None else json
    _rendering["json"] = as_json
    renderer = _renderer(as_json=as_json)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            *_tracebacks(as_json=as_json),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        # Look stderr up when a logger is made, not now: it may be replaced (tests, daemons).
        # WriteLogger writes the line and its newline in one call: PrintLogger's print() writes
        # them apart, and a stdlib record (kopf's, from another thread) landed between them.
        logger_factory=lambda *_: structlog.WriteLogger(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    _quiet_client_libraries(show=threshold <= logging.DEBUG)


class _LibraryHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Where the client libraries' stdlib logging goes (shown at debug only)."""


def _quiet_client_libraries(*, show: bool) -> None:
    """Give stdlib logging a root handler of migplan's own.

    Without one, the Kubernetes client's `logging.error` sets up a default handler itself and
    urllib3's retry warnings reach stderr: a failing kubeconfig exec plugin printed five lines
    before migplan's one. Their messages now show with `--log-level debug` only; a process
    that configures logging itself (kopf in the operator) adds its own handlers beside this.
    """
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _LibraryHandler)]:
        root.removeHandler(handler)
    handler = _LibraryHandler(sys.stderr)
    handler.setLevel(logging.DEBUG if show else logging.CRITICAL + 1)
    root.addHandler(handler)
