"""The `migplan-cel` helper: Kubernetes' CEL for device selectors, one child process per
operator, spoken to in JSON lines.

Why a helper and not a Python CEL library: the scheduler decides with cel-go and Kubernetes'
own environment (optional types, quantity and semver libraries, estimated and runtime cost
limits, a parser recursion limit). A Python implementation parses a different language
(cel-python rejects `.?name.orValue(...)`), has no cost model, and recursed past Python's stack
on 60 nested parentheses. The helper is that environment, built from Go modules
(`scripts/build-cel`, shipped in the image next to `migplan`).

Bounds, so one tenant's selector cannot stall or bloat planning:
- each call carries the time left in the planning pass; the helper interrupts CEL when it is
  spent (cel-go checks the context as it runs), and this side stops waiting shortly after;
- the helper's compile cache holds 128 selectors (its LRU); here, results are cached per
  (selectors, device) in a bounded LRU of digests, not of the texts.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import selectors as io_select
import shutil
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from migplan.operator.dra.cel import Device, Outcome

HELPER = "migplan-cel"
RESULTS = 4096
"""Cached (selectors, device) outcomes; each entry is two digests and an Outcome."""
GRACE_S = 2.0
"""How long past a call's budget this side waits before it restarts the helper."""


class CelUnavailable(RuntimeError):
    """The helper cannot be found or started, or stopped answering."""


class CompileError(ValueError):
    """A selector the API server would refuse: not CEL, too long, or over the cost limit."""


class BudgetSpent(RuntimeError):
    """The planning pass's time for CEL is spent."""


def helper_path() -> Path:
    """Where `migplan-cel` is: $MIGPLAN_CEL, beside this Python (a venv's or the image's
    bin/), or on PATH."""
    named = os.environ.get("MIGPLAN_CEL")
    if named:
        return Path(named)
    beside = Path(sys.executable).parent / HELPER
    if beside.is_file():
        return beside
    found = shutil.which(HELPER)
    if found:
        return Path(found)
    raise CelUnavailable(
        f"{HELPER} not found (beside {sys.executable}, on PATH, or named by $MIGPLAN_CEL); "
        "build it with scripts/build-cel"
    )


@dataclass
class Budget:
    """The time a planning pass may spend evaluating selectors."""

    seconds: float = 10.0

    def __post_init__(self) -> None:
        self.deadline = time.monotonic() + self.seconds

    def left(self) -> float:
        """Seconds left; raises BudgetSpent when none are."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise BudgetSpent(f"the pass's {self.seconds:g} s for CEL selectors is spent")
        return left


class Evaluator:
    """One `migplan-cel` child process and a results cache; safe to share between threads."""

    def __init__(self, path: Path | None = None) -> None:
        self._path = path
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._results: OrderedDict[tuple[bytes, bytes], Outcome] = OrderedDict()

    def match(
        self, selectors: Sequence[str], devices: Sequence[Device], *, budget: Budget
    ) -> list[Outcome]:
        """Per device, whether every selector selects it; raises CompileError for a selector
        the API server would refuse, BudgetSpent when the pass's time is spent."""
        chosen = hashlib.sha256(json.dumps(list(selectors)).encode()).digest()
        keys = [(chosen, d.digest) for d in devices]
        with self._lock:
            fresh: dict[tuple[bytes, bytes], Outcome] = {}
            missing = [i for i, key in enumerate(keys) if key not in self._results]
            if missing:
                answer = self._call(
                    {
                        "op": "match",
                        "selectors": list(selectors),
                        "devices": [devices[i].published() for i in missing],
                    },
                    budget=budget,
                )
                for i, raw in zip(missing, answer["results"], strict=True):
                    fresh[keys[i]] = Outcome(bool(raw["selected"]), raw.get("error"))
            found = [fresh.get(key) or self._results[key] for key in keys]
            for key, outcome in zip(keys, found, strict=True):
                self._remember(key, outcome)
            return found

    def versions(self) -> dict[str, str]:
        """The Go, cel-go and Kubernetes module versions the helper was built with."""
        with self._lock:
            return dict(self._call({"op": "version"}, budget=Budget(10.0))["versions"])

    def close(self) -> None:
        """Stop the helper (it is started again on the next call)."""
        with self._lock:
            self._stop()

    def _remember(self, key: tuple[bytes, bytes], outcome: Outcome) -> None:
        self._results[key] = outcome
        self._results.move_to_end(key)
        while len(self._results) > RESULTS:
            self._results.popitem(last=False)

    def _call(self, request: dict[str, Any], *, budget: Budget) -> dict[str, Any]:
        left = budget.left()
        proc = self._started()
        assert proc.stdin is not None
        assert proc.stdout is not None
        request["timeoutMs"] = max(1, int(left * 1000))
        try:
            proc.stdin.write(json.dumps(request).encode() + b"\n")
            proc.stdin.flush()
            line = _read_line(proc, timeout=left + GRACE_S)
        except (OSError, TimeoutError) as exc:
            self._stop()
            raise CelUnavailable(f"{HELPER} stopped answering: {exc}") from None
        answer: dict[str, Any] = json.loads(line)
        if answer.get("timedOut"):
            raise BudgetSpent(f"the pass's {budget.seconds:g} s for CEL selectors is spent")
        if answer.get("compileError"):
            raise CompileError(str(answer["compileError"]).splitlines()[0])
        if answer.get("error"):
            raise CelUnavailable(f"{HELPER}: {answer['error']}")
        return answer

    def _started(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        path = self._path or helper_path()
        try:
            self._proc = subprocess.Popen(
                [str(path)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        except OSError as exc:
            raise CelUnavailable(f"cannot start {path}: {exc.strerror or exc}") from None
        return self._proc

    def _stop(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            for stream in (self._proc.stdin, self._proc.stdout):
                if stream is not None:
                    stream.close()
            self._proc = None


def _read_line(proc: subprocess.Popen[bytes], *, timeout: float) -> bytes:
    """One line from the helper, or TimeoutError / OSError when it hangs or died."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    with io_select.DefaultSelector() as waiting:
        waiting.register(fd, io_select.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not waiting.select(left):
                raise TimeoutError(f"no answer within {timeout:.1f} s")
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise OSError(f"exited with code {proc.wait()}")
            chunks.append(chunk)
            if chunk.endswith(b"\n"):
                return b"".join(chunks)


@functools.cache
def evaluator() -> Evaluator:
    """The process's one evaluator (the helper starts on first use)."""
    return Evaluator()
