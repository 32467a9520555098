"""NVML access: `adapter.py` is the only module that calls NVML (the `pynvml` functions of
nvidia-ml-py, or the emulator in `emulator.py`, which answers the same functions with the
real rules and error codes)."""
