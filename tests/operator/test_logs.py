"""Log events: one line each, JSON or for people as --log-format says."""

from __future__ import annotations

import json
import logging
import sys

import pytest
import structlog

from migplan.operator.cli.app import run
from migplan.operator.logs import LogFormat, configure_logging, stdlib_formatter


@pytest.fixture(autouse=True)
def _restore_logging():
    yield
    structlog.reset_defaults()


def test_json_format_writes_one_json_object_per_event(capsys) -> None:
    configure_logging(level="info", json=LogFormat.JSON.as_json())
    structlog.get_logger().info("plan.planned", plan="pool", met=3)
    line = capsys.readouterr().err.strip()
    event = json.loads(line)
    assert (event["event"], event["plan"], event["met"], event["level"]) == (
        "plan.planned",
        "pool",
        3,
        "info",
    )


def test_console_format_is_for_people(capsys) -> None:
    configure_logging(level="info", json=LogFormat.CONSOLE.as_json())
    structlog.get_logger().info("plan.planned", plan="pool")
    line = capsys.readouterr().err.strip()
    assert "plan.planned" in line
    assert "plan=pool" in line
    with pytest.raises(json.JSONDecodeError):
        json.loads(line)


def test_auto_format_decides_by_the_terminal() -> None:
    assert LogFormat.AUTO.as_json() is None


def test_unknown_log_format_is_bad_input(capsys) -> None:
    assert run(["--log-format", "xml", "profiles"]) == 2
    assert "xml" in capsys.readouterr().err


def test_kopf_records_come_out_in_migplans_shape(capsys) -> None:
    import logging
    import sys

    configure_logging(level="info", json=True)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(stdlib_formatter())
    kopf = logging.getLogger("kopf.objects")
    kopf.addHandler(handler)
    try:
        ref = {"apiVersion": "migplan.io/v1alpha1", "kind": "GPUPartitionPlan", "name": "pool"}
        kopf.warning("Handler 'plan' failed temporarily", extra={"k8s_ref": ref})
    finally:
        kopf.removeHandler(handler)
    event = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert event["event"] == "Handler 'plan' failed temporarily"
    assert event["level"] == "warning"
    assert event["logger"] == "kopf.objects"
    assert event["object"] == {"kind": "GPUPartitionPlan", "name": "pool"}
    assert "timestamp" in event


def test_each_event_reaches_the_stream_in_one_write(monkeypatch) -> None:
    """kopf's records come from other threads through stdlib logging: an event written in two
    pieces (the line, then its newline) let one land between them and two events shared a
    line."""
    import sys

    class Writes:
        def __init__(self) -> None:
            self.calls: list[str] = []

        def write(self, text: str) -> int:
            self.calls.append(text)
            return len(text)

        def flush(self) -> None:
            pass

        def isatty(self) -> bool:
            return False

    stream = Writes()
    monkeypatch.setattr(sys, "stderr", stream)
    configure_logging(level="info", json=True)
    structlog.get_logger().info("node partition created", node="gpu-1")
    assert len(stream.calls) == 1
    line = stream.calls[0]
    assert line.endswith("\n")
    assert line.count("\n") == 1
    assert json.loads(line)["node"] == "gpu-1"


def _fails_deep_inside() -> None:
    raise RuntimeError("the API server is away")


def test_a_logged_exception_keeps_its_stack_in_json(capsys) -> None:
    configure_logging(level="info", json=True)
    try:
        _fails_deep_inside()
    except RuntimeError:
        structlog.get_logger().exception("pass failed", node="n1")
    event = json.loads(capsys.readouterr().err.strip())
    (raised,) = event["exception"]
    assert raised["exc_type"] == "RuntimeError"
    assert raised["exc_value"] == "the API server is away"
    assert "_fails_deep_inside" in [frame["name"] for frame in raised["frames"]]
    assert "exc_info" not in event


def test_a_kopf_record_with_an_exception_keeps_its_stack(capsys) -> None:
    configure_logging(level="info", json=True)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(stdlib_formatter())
    logger = logging.getLogger("kopf.objects.test")
    logger.addHandler(handler)
    try:
        try:
            _fails_deep_inside()
        except RuntimeError:
            logger.exception("Handler 'on_spec' failed")
    finally:
        logger.removeHandler(handler)
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line]
    event = next(e for e in lines if e["event"] == "Handler 'on_spec' failed")
    assert "_fails_deep_inside" in [f["name"] for f in event["exception"][0]["frames"]]
