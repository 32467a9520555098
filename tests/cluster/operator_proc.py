"""Run `migplan operator` as a real process against the test cluster."""

from __future__ import annotations

import collections
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

MIGPLAN = str(Path(sys.executable).parent / "migplan")
ROOT = Path(__file__).resolve().parents[2]
CRASHING = str(Path(__file__).with_name("crashing_operator.py"))


def install_crds(cp):
    """Install migplan's CRDs on `cp` and wait until they are established; returns `cp`."""
    cp.kubectl("apply", "-k", str(ROOT / "crds"))
    cp.kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/gpupartitionplans.migplan.io",
        "crd/nodepartitions.migplan.io",
    )
    return cp


def operator_service_account(cp) -> Path:
    """Apply the RBAC deploy/ ships for the operator (with the mig-manager component, and
    kopf's peering CRD); a kubeconfig that acts as the operator's ServiceAccount."""
    for namespace in ("migplan-system", "gpu-operator"):
        cp.kubectl(
            "apply",
            "-f",
            "-",
            stdin=json.dumps(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            ),
        )
    for manifest in (
        "base/operator-rbac.yaml",
        "optional/kopf-peering.yaml",
        "components/mig-manager/mig-config-role.yaml",
    ):
        cp.kubectl("apply", "-f", str(ROOT / "deploy" / manifest))
    return cp.service_account_kubeconfig(namespace="migplan-system", name="migplan-operator")


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
    kubeconfig: Path | None = None,
    extra_args: tuple[str, ...] = (),
    crash_at: str | None = None,
):
    """Start the operator (standalone, fast ticks) as `kubeconfig` says (the admin by
    default); its output is collected as it comes (`communicate()` returns it). With
    `crash_at` (`before:<Step>`, `after:<Step>`) it exits 17 at that step boundary."""
    command = [MIGPLAN] if crash_at is None else [sys.executable, CRASHING, crash_at]
    return OperatorProcess(
        [
            *command,
            "operator",
            "--standalone",
            "--kubeconfig",
            str(kubeconfig or cp.kubeconfig),
            "--tick",
            str(tick),
            "--metrics-port",
            str(metrics_port),
            "--agent-timeout",
            str(agent_timeout),
            *extra_args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "MIGPLAN_LOG_LEVEL": "info", **(env or {})},
    )


class OperatorProcess(subprocess.Popen):
    """The operator's process, its output drained by a thread as it comes: left in a pipe
    nobody reads, a chatty operator (a thousand nodes) fills it and blocks on its next log
    line. `communicate()` waits for the exit and returns the output."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._lines: collections.deque[str] = collections.deque(maxlen=200_000)
        self._drain = threading.Thread(target=self._read, daemon=True)
        self._drain.start()

    def _read(self) -> None:
        assert self.stdout is not None
        for line in self.stdout:
            self._lines.append(line)

    def output(self) -> str:
        """What it has written so far."""
        return "".join(list(self._lines))

    def communicate(self, input=None, timeout=None):
        self.wait(timeout=timeout)
        self._drain.join(timeout=10)
        return "".join(self._lines), None


def stop_operator(proc) -> str:
    """SIGTERM the operator; its output. Fails if it does not exit 0."""
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, output[-3000:]
    return output


@contextlib.contextmanager
def running_operator(cp, **kwargs) -> Iterator[subprocess.Popen]:
    """The operator for the duration of a `with` block; afterwards every plan is deleted and
    the operator stopped cleanly (its logs are then in `proc.output`)."""
    proc = start_operator(cp, **kwargs)
    try:
        yield proc
    except BaseException:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
        print(output[-20000:])  # shown by pytest with the failure
        raise
    # Leave no plan behind for the next test's operator (deletion needs this one running:
    # kopf's finalizer).
    cp.kubectl("delete", "gpp", "--all", "--wait=true", "--timeout=90s")
    proc.output = stop_operator(proc)  # for tests that read the logs afterwards
