"""The NVML emulator: emulated GPUs beneath the real, unmodified pynvml binding.

`FakeNvml(["A100-40GB", "H100-80GB"], mig=True)` emulates a node's GPUs (built from
`profiles/`) and its libnvidia-ml (library.py: the C entry points pynvml resolves).
`fake.pynvml` is a private copy of the installed pynvml module loaded with that library in
place of the CDLL, so everything that talks to it — the adapter, the agent, `nvml-info` —
goes through pynvml's own functions, structs, buffers and return codes, exactly as on a GPU
node. Each FakeNvml has its own copy, as each node has its own driver.

Tests attach fake processes and inject faults by C entry-point name (the name pynvml resolves,
e.g. `nvmlDeviceGetCount_v2`): an error on the n-th call, a call that hangs, an action just
before a call.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
import threading
import time
from collections.abc import Callable, Iterable
from types import ModuleType

from migplan.operator.nvml.emulator.gpus import MIG_DISABLE, MIG_ENABLE, Gpu, Process
from migplan.operator.nvml.emulator.library import BindingMisuse, EmulatedLibrary
from migplan.planner.hardware.catalog import GpuModel, default_catalog
from migplan.planner.hardware.layout import Instance, Layout

__all__ = ["BindingMisuse", "FakeNvml", "load_pynvml"]

_COPIES = itertools.count()


def load_pynvml(library: object) -> ModuleType:
    """A fresh copy of the installed pynvml module whose library is `library` (read from
    pynvml's own file, unmodified; the module is not imported or registered as `pynvml`)."""
    spec = importlib.util.find_spec("pynvml")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("nvidia-ml-py (pynvml) is not installed")
    name = f"migplan_emulated_pynvml_{next(_COPIES)}"
    copy_spec = importlib.util.spec_from_file_location(name, spec.origin)
    assert copy_spec is not None
    assert copy_spec.loader is not None
    module = importlib.util.module_from_spec(copy_spec)
    sys.modules[name] = module  # pynvml builds its error classes through sys.modules
    try:
        copy_spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    module.nvmlLib = library  # type: ignore[attr-defined]
    return module


class FakeNvml:
    """Emulated GPUs of one node and the pynvml that drives them (`.pynvml`)."""

    def __init__(self, models: Iterable[str | GpuModel], *, mig: bool = False) -> None:
        catalog = default_catalog()
        self._lock = threading.RLock()
        mode = MIG_ENABLE if mig else MIG_DISABLE
        self._gpus: list[Gpu] = []
        for n, model in enumerate(models):
            resolved = model if isinstance(model, GpuModel) else catalog.model(model)
            uuid = f"GPU-emulated-{n:04d}-{resolved.model.lower()}"
            self._gpus.append(Gpu(n, resolved, uuid, mode, mode))
        self._faults: dict[str, list[tuple[int, Callable[[], int | None]]]] = {}
        self._counts: dict[str, int] = {}
        self.calls: list[str] = []
        """C entry points that ran, by name, in order (tests count NVML operations with it;
        a call an injected fault answered is not in it)."""
        self.library = EmulatedLibrary(self._gpus, lock=self._lock, hooks=self._hooks)
        self.pynvml = load_pynvml(self.library)
        """The unmodified pynvml module over these GPUs: what to hand the adapter."""

    # ---- test controls ----------------------------------------------------------------------

    def fail(self, call: str, *, code: int, nth: int = 1) -> None:
        """Make the `nth` next call of entry point `call` return NVML code `code`."""
        self._at(call, nth, lambda: code)

    def hang(self, call: str, *, seconds: float, nth: int = 1) -> None:
        """Make the `nth` next call of `call` block for `seconds` before it runs."""

        def sleep() -> None:
            time.sleep(seconds)

        self._at(call, nth, sleep)

    def before(self, call: str, action: Callable[[], None], *, nth: int = 1) -> None:
        """Run `action` just before the `nth` next call of `call` (tests crash the caller
        there by raising: the exception comes out of the pynvml function)."""

        def run() -> None:
            action()

        self._at(call, nth, run)

    def _at(self, call: str, nth: int, action: Callable[[], int | None]) -> None:
        if not hasattr(self.library, call) or call.startswith("_"):
            raise ValueError(f"{call} is not an NVML entry point of the emulator")
        with self._lock:
            target = self._counts.get(call, 0) + nth
            self._faults.setdefault(call, []).append((target, action))

    def _hooks(self, call: str) -> int | None:
        with self._lock:
            count = self._counts[call] = self._counts.get(call, 0) + 1
            due = [a for n, a in self._faults.get(call, []) if n == count]
            self._faults[call] = [(n, a) for n, a in self._faults.get(call, []) if n != count]
        for action in due:
            code = action()
            if code is not None:
                return code
        self.calls.append(call)
        return None

    def attach_process(self, gpu: int, *, gi: int | None = None, pid: int) -> None:
        """Pretend process `pid` runs on GPU instance `gi` (its first compute instance if it
        has one), or on the whole GPU when `gi` is None."""
        with self._lock:
            target = self._gpus[gpu]
            if gi is None:
                target.processes.append(Process(pid))
                return
            instance = target.instances[gi]
            if instance.compute:
                next(iter(instance.compute.values())).processes.append(Process(pid))
            else:
                instance.processes.append(Process(pid))

    def detach_process(self, gpu: int, pid: int) -> None:
        """Process `pid` ends."""
        with self._lock:
            target = self._gpus[gpu]
            groups = [target.processes] + [gi.processes for gi in target.instances.values()]
            groups += [
                ci.processes for gi in target.instances.values() for ci in gi.compute.values()
            ]
            for group in groups:
                group[:] = [p for p in group if p.pid != pid]

    def detach_processes(self, gpu: int) -> None:
        """Every process on `gpu` ends."""
        with self._lock:
            target = self._gpus[gpu]
            target.processes.clear()
            for gi in target.instances.values():
                gi.processes.clear()
                for ci in gi.compute.values():
                    ci.processes.clear()

    def gpu_instance_id(self, gpu: int, instance: Instance) -> int | None:
        """The GPU-instance id of `instance` on `gpu`, if it exists."""
        target = self._gpus[gpu]
        for gi in target.instances.values():
            if gi.start == instance.start and target.profile(gi.profile_id).name == (
                instance.profile
            ):
                return gi.id
        return None

    def gpu_count(self) -> int:
        """How many GPUs are emulated."""
        return len(self._gpus)

    def reset_gpu(self, gpu: int) -> None:
        """A GPU reset: the pending MIG mode applies and every instance is gone."""
        with self._lock:
            self._gpus[gpu].reset()

    def layout(self, gpu: int) -> Layout:
        """The GPU's instances as a layout (for assertions)."""
        with self._lock:
            return self._gpus[gpu].layout()
