"""CEL benchmark: DRA selectors through migplan-cel (Kubernetes' own CEL), the hostile cases.

- costly: the selector that took cel-python 9-15 s per device (three nested `.all()` over
  40-element lists, estimated cost 598,971), on every profile of three GPU models;
- distinct: 1,024 different selectors of ~10 KiB each (the API's longest), one per claim,
  against 21 devices: compile time and the helper's peak memory (its compile cache holds 128);
- pass: 2,000 pending claims of 40 distinct selector sets on 21 devices, cold then warm (the
  results cache per (selectors, device)).

    .venv/bin/python bench/cel.py [--json bench/results/cel.json]
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

from migplan.operator.dra.cel import Device, Quantity
from migplan.operator.dra.helper import Budget, Evaluator

LIST = "[" + ",".join(f"'{i:02d}'" for i in range(40)) + "]"
COSTLY = f"{LIST}.all(a, {LIST}.all(b, {LIST}.all(c, a + b + c != '')))"
PROFILES = ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "1g.10gb+me")


def devices() -> list[Device]:
    """Every profile of three models, as claims.py shows them to selectors."""
    return [
        Device(
            driver="gpu.nvidia.com",
            attributes={
                "gpu.nvidia.com": {
                    "type": "mig",
                    "profile": profile,
                    "productName": product,
                    "architecture": "Hopper",
                }
            },
            capacity={"gpu.nvidia.com": {"memory": Quantity.parse("10Gi")}},
        )
        for product in ("NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA A100-SXM4-80GB")
        for profile in PROFILES
    ]


def long_selector(n: int) -> str:
    """A distinct selector of about 10 KiB (the API's limit is 10,240 characters)."""
    names = " || ".join(
        f"device.attributes['gpu.nvidia.com'].?profile.orValue('') == 'p{n}-{i:04d}'"
        for i in range(130)
    )
    return f"({names}) || device.attributes['gpu.nvidia.com'].profile == '{PROFILES[n % 7]}'"


def helper_peak_kib(found: Evaluator) -> int:
    assert found._proc is not None
    status = Path(f"/proc/{found._proc.pid}/status").read_text()
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM"))


def costly(shown: list[Device]) -> dict[str, object]:
    found = Evaluator()
    try:
        began = time.perf_counter()
        outcomes = found.match([COSTLY], shown, budget=Budget(60))
        took = time.perf_counter() - began
        return {
            "case": "costly",
            "devices": len(shown),
            "selected": sum(o.selected for o in outcomes),
            "seconds": round(took, 3),
            "per_device_ms": round(took / len(shown) * 1000, 2),
            "helper_peak_mib": round(helper_peak_kib(found) / 1024, 1),
        }
    finally:
        found.close()


def distinct(shown: list[Device], count: int = 1024) -> dict[str, object]:
    found = Evaluator()
    try:
        selectors = [long_selector(n) for n in range(count)]
        assert all(len(s) <= 10 * 1024 for s in selectors)
        began = time.perf_counter()
        for s in selectors:
            found.match([s], shown, budget=Budget(60))
        took = time.perf_counter() - began
        return {
            "case": "distinct",
            "selectors": count,
            "selector_chars": max(len(s) for s in selectors),
            "devices": len(shown),
            "seconds": round(took, 2),
            "per_selector_ms": round(took / count * 1000, 2),
            "helper_peak_mib": round(helper_peak_kib(found) / 1024, 1),
        }
    finally:
        found.close()


def one_pass(shown: list[Device], claims: int = 2000, sets: int = 40) -> dict[str, object]:
    found = Evaluator()
    try:
        row: dict[str, object] = {"case": "pass", "claims": claims, "selector_sets": sets}
        for label in ("cold", "warm"):
            budget = Budget(10)
            began = time.perf_counter()
            for n in range(claims):
                k = n % sets
                found.match(
                    [
                        "device.driver == 'gpu.nvidia.com'",
                        f"device.attributes['gpu.nvidia.com'].?profile.orValue('') "
                        f"== '{PROFILES[k % 7]}' || {k} == 0",
                    ],
                    shown,
                    budget=budget,
                )
            row[f"{label}_seconds"] = round(time.perf_counter() - began, 3)
        row["helper_peak_mib"] = round(helper_peak_kib(found) / 1024, 1)
        return row
    finally:
        found.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=Path("bench/results/cel.json"))
    args = parser.parse_args()
    shown = devices()
    rows = [costly(shown), distinct(shown), one_pass(shown)]
    python_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{'case':<10} figures")
    for row in rows:
        figures = ", ".join(f"{k}={v}" for k, v in row.items() if k != "case")
        print(f"{row['case']:<10} {figures}")
    print(f"python process peak RSS: {python_peak:.0f} MiB")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps({"rows": rows, "python_peak_mib": round(python_peak, 1)}, indent=2) + "\n"
    )


if __name__ == "__main__":
    main()
