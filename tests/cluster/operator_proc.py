"""Run `migplan operator` as a real process against the test cluster."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

MIGPLAN = str(Path(sys.executable).parent / "migplan")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_operator(
    cp,
    *,
    metrics_port: int = 0,
    env: dict[str, str] | None = None,
    tick: float = 0.5,
    agent_timeout: float = 60,
):
    """Start the operator (standalone, fast ticks); its output goes to a pipe."""
    return subprocess.Popen(
        [
            MIGPLAN,
            "operator",
            "--standalone",
            "--kubeconfig",
            str(cp.kubeconfig),
            "--tick",
            str(tick),
            "--metrics-port",
            str(metrics_port),
            "--agent-timeout",
            str(agent_timeout),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "MIGPLAN_LOG_LEVEL": "info", **(env or {})},
    )


def stop_operator(proc) -> str:
    """SIGTERM the operator; its output. Fails if it does not exit 0."""
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, output[-3000:]
    return output


@contextlib.contextmanager
def running_operator(cp, **kwargs) -> Iterator[subprocess.Popen]:
    """The operator for the duration of a `with` block; stopped cleanly after (its logs are
    then in `proc.output`)."""
    proc = start_operator(cp, **kwargs)
    try:
        yield proc
    except BaseException:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
        print(output[-20000:])  # shown by pytest with the failure
        raise
    proc.output = stop_operator(proc)  # for tests that read the logs afterwards
