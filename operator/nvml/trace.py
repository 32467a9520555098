"""A record of the NVML C entry points a reading called, with their arguments and return codes.

pynvml resolves each NVML function with `getattr(nvmlLib, name)` (nvml_h.py's note). Putting a
`TracedLibrary` where that library stands records every call as the binding made it: the entry
point's name, the integer arguments, the return code, and the integers the call wrote back
(counts, modes). Run on a GPU node (`migplan nvml-info --trace FILE`, read-only), it is the
evidence the emulator is held to: the same reading on the emulator must call the same entry
points in the same order and get the same codes and counts (tests/operator/nvml/
test_real_traces.py replays each trace in profiles/evidence/).
"""

from __future__ import annotations

import ctypes
from dataclasses import asdict, dataclass
from types import ModuleType
from typing import Any

from migplan.operator.nvml import errors
from migplan.operator.nvml.emulator import load_pynvml

_UNRECORDED = ("nvmlErrorString",)  # the text of an error already recorded by its code


@dataclass(frozen=True)
class TracedCall:
    """One NVML entry point called: integers in, return code, integers written back."""

    entry: str
    args: tuple[int | str | None, ...]
    code: int | None
    """The NVML return code; None where the library has no such entry point."""
    out: tuple[int, ...] = ()

    def document(self) -> dict[str, Any]:
        """The call as JSON."""
        found = asdict(self)
        found["args"] = list(self.args)
        found["out"] = list(self.out)
        return found

    @classmethod
    def read(cls, document: dict[str, Any]) -> TracedCall:
        """A call from its JSON."""
        return cls(
            entry=document["entry"],
            args=tuple(document["args"]),
            code=document["code"],
            out=tuple(document.get("out", ())),
        )


def _argument(value: Any) -> int | str | None:
    """What a call's argument says independently of addresses: integers as they are, the rest
    by kind."""
    if value is None or isinstance(value, int):
        return value
    if isinstance(value, ctypes.c_uint | ctypes.c_int | ctypes.c_ulonglong):
        return int(value.value)
    if type(value).__name__ == "CArgObject":
        return "ref"
    if isinstance(value, ctypes.Array):
        return "buffer"
    return "handle"


def _written(value: Any) -> int | None:
    """The integer a call wrote through a `byref(c_uint())`-style argument, else None."""
    target = getattr(value, "_obj", None) if type(value).__name__ == "CArgObject" else None
    if isinstance(target, ctypes.c_uint | ctypes.c_int | ctypes.c_ulonglong):
        return int(target.value)
    return None


class _TracedEntry:
    """One resolved entry point that records its calls; forwards `restype` and `argtypes`
    (pynvml sets `restype` on some functions)."""

    def __init__(self, trace: TracedLibrary, name: str, function: Any) -> None:
        object.__setattr__(self, "_trace", trace)
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_function", function)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._function, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._function, name, value)

    def __call__(self, *args: Any) -> Any:
        result = self._function(*args)
        if self._name not in _UNRECORDED:
            out = tuple(w for w in (_written(a) for a in args) if w is not None)
            code = int(result) if isinstance(result, int) else None
            self._trace.calls.append(
                TracedCall(self._name, tuple(_argument(a) for a in args), code, out)
            )
        return result


class TracedLibrary:
    """Stands where pynvml's library stands and records each call (`calls`)."""

    def __init__(self, library: Any) -> None:
        self._library = library
        self.calls: list[TracedCall] = []

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            function = getattr(self._library, name)
        except AttributeError:
            self.calls.append(TracedCall(name, (), None))
            raise
        return _TracedEntry(self, name, function)


def traced_pynvml(library: Any = None) -> tuple[ModuleType, TracedLibrary]:
    """A fresh copy of the installed pynvml whose calls are recorded: over `library` (an
    emulator's), or over the driver's libnvidia-ml, loaded as pynvml loads it."""
    if library is None:
        loader = load_pynvml(None)
        try:
            loader._LoadNvmlLibrary()
        except loader.NVMLError as exc:  # no driver here: as the adapter's nvmlInit says it
            raise errors.typed(int(exc.value), "nvmlInit") from None
        library = loader.nvmlLib
    trace = TracedLibrary(library)
    return load_pynvml(trace), trace
