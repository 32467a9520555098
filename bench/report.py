"""The JSON every benchmark writes beside its table: the machine it ran on and its rows."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path


def write_json(
    path: Path, *, benchmark: str, rows: list[dict[str, object]], **fields: object
) -> None:
    """Write `rows` (and `fields`) for `benchmark` to `path` with the Python version, machine
    and CPU count, and say where."""
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "benchmark": benchmark,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        **fields,
        "rows": rows,
    }
    path.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {path}")
