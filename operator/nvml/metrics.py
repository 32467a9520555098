"""Prometheus metrics of NVML calls, recorded by the adapter for the real library and the
emulator alike (served by the node agent's `--metrics-port`)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

NVML_CALL_SECONDS = Histogram(
    "migplan_agent_nvml_call_seconds",
    "Duration of NVML calls, by NVML function",
    ["call"],
    buckets=(0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30),
)
NVML_ERRORS = Counter(
    "migplan_agent_nvml_errors_total",
    "NVML calls that failed, by NVML function and error (NVML_ERROR_<error>)",
    ["call", "error"],
)
