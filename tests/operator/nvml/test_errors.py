"""Our NVML constants are pynvml's."""

from __future__ import annotations

import pynvml

from migplan.operator.nvml import errors
from migplan.operator.nvml.adapter import CI_PROFILE_BY_SLICES


def test_error_codes_match_pynvml() -> None:
    for code, name in errors.NAMES.items():
        if name != "SUCCESS":
            assert getattr(pynvml, f"NVML_ERROR_{name}") == code, name
    assert pynvml.NVML_SUCCESS == errors.SUCCESS


def test_compute_instance_profiles_match_pynvml() -> None:
    for slices, index in CI_PROFILE_BY_SLICES.items():
        assert getattr(pynvml, f"NVML_COMPUTE_INSTANCE_PROFILE_{slices}_SLICE") == index


def test_typed_errors_say_what_and_where() -> None:
    error = errors.typed(errors.IN_USE, "nvmlGpuInstanceDestroy", "GPU 0 GI 3")
    assert isinstance(error, errors.InUseError)
    assert str(error) == "nvmlGpuInstanceDestroy on GPU 0 GI 3 failed with NVML_ERROR_IN_USE"
