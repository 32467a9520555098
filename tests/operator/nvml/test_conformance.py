"""The adapter and the emulator held to the installed pynvml (nvidia-ml-py), the real binding.

- every pynvml function the adapter calls accepts the arguments the adapter passes;
- every C entry point those functions resolve is one the emulator implements;
- the emulator's nvml.h structs, struct versions and constants are pynvml's, field by field;
- the module the emulator hands out is the installed pynvml, unmodified.
"""

from __future__ import annotations

import ast
import ctypes
import inspect
import re
from pathlib import Path

import pynvml
import pytest

from migplan.operator.nvml import adapter
from migplan.operator.nvml.emulator import FakeNvml, gpus, nvml_h

ADAPTER = Path(adapter.__file__)


def _adapter_calls() -> list[tuple[str, str, int]]:
    """(label, pynvml function, positional arguments) of every `self._call(...)`."""
    found = []
    for node in ast.walk(ast.parse(ADAPTER.read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "_call"
        ):
            label, _, function, *args = node.args
            assert isinstance(function, ast.Attribute | ast.Name), ast.dump(function)
            name = function.attr if isinstance(function, ast.Attribute) else function.id
            label_text = label.value if isinstance(label, ast.Constant) else name
            found.append((label_text, name, len(args)))
    return found


def _binding_names_used() -> set[str]:
    """Every `self._nvml.NAME` the adapter reads (functions, constants, struct types)."""
    return {
        node.attr
        for node in ast.walk(ast.parse(ADAPTER.read_text()))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "_nvml"
    }


CALLS = _adapter_calls()


def test_the_adapter_calls_were_found() -> None:
    names = {name for _, name, _ in CALLS}
    assert {"nvmlDeviceGetGpuInstances", "nvmlGpuInstanceGetComputeInstances"} <= names
    assert len(CALLS) >= 25


@pytest.mark.parametrize(("label", "name", "arguments"), CALLS, ids=[c[1] for c in CALLS])
def test_each_call_fits_the_installed_binding(label: str, name: str, arguments: int) -> None:
    assert label == name, "the metrics label should name the function called"
    signature = inspect.signature(getattr(pynvml, name))
    signature.bind(*[object()] * arguments)  # TypeError: the call would fail on a GPU


def test_every_binding_name_the_adapter_reads_exists() -> None:
    missing = sorted(n for n in _binding_names_used() if not hasattr(pynvml, n))
    assert not missing


def _entry_points(function_name: str, seen: set[str] | None = None) -> set[str]:
    """The C symbols a pynvml function resolves, following the pynvml functions it calls."""
    seen = set() if seen is None else seen
    if function_name in seen:
        return set()
    seen.add(function_name)
    source = inspect.getsource(getattr(pynvml, function_name))
    symbols = set(re.findall(r'_nvmlGetFunctionPointer\("(\w+)"\)', source))
    for called in set(re.findall(r"\b(nvml\w+)\(", source)) - {function_name}:
        if inspect.isfunction(getattr(pynvml, called, None)):
            symbols |= _entry_points(called, seen)
    return symbols


def test_the_emulator_implements_every_entry_point_the_adapter_reaches() -> None:
    used = {name for _, name, _ in CALLS}
    needed = set().union(*(_entry_points(name) for name in used))
    assert needed - set(nvml_h.PROTOTYPES) == set()
    assert "nvmlDeviceGetGpuInstancePossiblePlacements_v2" in needed


STRUCTS = [
    (nvml_h.PciInfo, "nvmlPciInfo_t"),
    (nvml_h.Memory, "c_nvmlMemory_t"),
    (nvml_h.MemoryV2, "c_nvmlMemory_v2_t"),
    (nvml_h.GpuInstancePlacement, "c_nvmlGpuInstancePlacement_t"),
    (nvml_h.GpuInstanceProfileInfo, "c_nvmlGpuInstanceProfileInfo_t"),
    (nvml_h.GpuInstanceProfileInfoV2, "c_nvmlGpuInstanceProfileInfo_v2_t"),
    (nvml_h.GpuInstanceInfo, "c_nvmlGpuInstanceInfo_t"),
    (nvml_h.ComputeInstanceProfileInfo, "c_nvmlComputeInstanceProfileInfo_t"),
    (nvml_h.ComputeInstanceProfileInfoV2, "c_nvmlComputeInstanceProfileInfo_v2_t"),
    (nvml_h.ComputeInstanceInfo, "c_nvmlComputeInstanceInfo_t"),
    (nvml_h.ProcessInfo, "c_nvmlProcessInfo_t"),
]


def _layout(struct: type[ctypes.Structure]) -> list[tuple[str, int, int]]:
    return [
        (name, getattr(struct, name).offset, getattr(struct, name).size)
        for name, *_ in struct._fields_
    ]


@pytest.mark.parametrize(("ours", "theirs"), STRUCTS, ids=[t for _, t in STRUCTS])
def test_structs_match_the_binding_field_by_field(ours, theirs: str) -> None:
    binding = getattr(pynvml, theirs)
    assert _layout(ours) == _layout(binding)
    assert ctypes.sizeof(ours) == ctypes.sizeof(binding)


def test_struct_versions_and_constants_match_the_binding() -> None:
    assert pynvml.nvmlMemory_v2 == nvml_h.MEMORY_V2
    assert pynvml.nvmlGpuInstanceProfileInfo_v2 == nvml_h.GPU_INSTANCE_PROFILE_INFO_V2
    assert pynvml.nvmlComputeInstanceProfileInfo_v2 == nvml_h.COMPUTE_INSTANCE_PROFILE_INFO_V2
    assert nvml_h.GPU_INSTANCE_PROFILE_COUNT == pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT
    assert nvml_h.NVML_DEVICE_NAME_V2_BUFFER_SIZE == pynvml.NVML_DEVICE_NAME_V2_BUFFER_SIZE
    assert nvml_h.NVML_DEVICE_UUID_V2_BUFFER_SIZE == pynvml.NVML_DEVICE_UUID_V2_BUFFER_SIZE
    assert (gpus.MIG_DISABLE, gpus.MIG_ENABLE) == (
        pynvml.NVML_DEVICE_MIG_DISABLE,
        pynvml.NVML_DEVICE_MIG_ENABLE,
    )
    assert gpus.ENGINE_PROFILE_SHARED == pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
    for slices, index in gpus.CI_PROFILE_BY_SLICES.items():
        assert getattr(pynvml, f"NVML_COMPUTE_INSTANCE_PROFILE_{slices}_SLICE") == index
    assert adapter.CI_PROFILE_BY_SLICES == gpus.CI_PROFILE_BY_SLICES


def test_the_emulated_binding_is_the_installed_pynvml_unmodified() -> None:
    fake = FakeNvml(["A30"])
    assert Path(fake.pynvml.__file__) == Path(pynvml.__file__)
    assert inspect.getsource(fake.pynvml) == inspect.getsource(pynvml)
    assert fake.pynvml is not pynvml  # a private copy: the real module's library is untouched
    assert pynvml.nvmlLib is None or not hasattr(pynvml.nvmlLib, "hooks")
