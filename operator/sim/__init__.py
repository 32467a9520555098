"""Simulated cluster parts for tests and demos: GPU nodes whose GPUs are NVML emulators."""
