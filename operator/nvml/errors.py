"""NVML errors as typed exceptions carrying the NVML code and what they concern."""

from __future__ import annotations

from dataclasses import dataclass

# NVML return codes (nvml.h), the numbers pynvml exposes as NVML_ERROR_*; written out so the
# emulator needs no pynvml (tests/operator/nvml/test_errors.py compares them with pynvml).
SUCCESS = 0
UNINITIALIZED = 1
INVALID_ARGUMENT = 2
NOT_SUPPORTED = 3
NO_PERMISSION = 4
NOT_FOUND = 6
DRIVER_NOT_LOADED = 9
TIMEOUT = 10
LIBRARY_NOT_FOUND = 12
GPU_IS_LOST = 15
RESET_REQUIRED = 16
IN_USE = 19
INSUFFICIENT_RESOURCES = 23
UNKNOWN = 999

NAMES = {
    value: name
    for name, value in dict(globals()).items()
    if name.isupper() and isinstance(value, int) and not name.startswith("_")
}
"""NVML return code -> the name after NVML_ERROR_ (SUCCESS for 0)."""


@dataclass
class NvmlError(Exception):
    """An NVML call failed: `code` is the NVML return code, `where` what it concerned."""

    code: int
    call: str
    where: str = ""
    detail: str = ""

    def __str__(self) -> str:
        name = NAMES.get(self.code, str(self.code))
        where = f" on {self.where}" if self.where else ""
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.call}{where} failed with NVML_ERROR_{name}{detail}"


class InUseError(NvmlError):
    """NVML_ERROR_IN_USE: processes or compute instances still hold the instance."""


class InsufficientResourcesError(NvmlError):
    """NVML_ERROR_INSUFFICIENT_RESOURCES: the placement is occupied or a limit is reached."""


class NotSupportedError(NvmlError):
    """NVML_ERROR_NOT_SUPPORTED: e.g. a MIG operation while MIG mode is off."""


_TYPES: dict[int, type[NvmlError]] = {
    IN_USE: InUseError,
    INSUFFICIENT_RESOURCES: InsufficientResourcesError,
    NOT_SUPPORTED: NotSupportedError,
}


def typed(code: int, call: str, where: str = "", detail: str = "") -> NvmlError:
    """The most specific NvmlError for `code`."""
    return _TYPES.get(code, NvmlError)(code, call, where, detail)
