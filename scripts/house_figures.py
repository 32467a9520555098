"""Figures of the code's shape (issue #30): the largest modules, the longest functions, how
often `Any` and `dict[str, Any]` appear in operator/, raw phase/step string literals, and the
import-linter contracts. Run: .venv/bin/python scripts/house_figures.py [--json FILE]"""

from __future__ import annotations

import argparse
import ast
import json
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("operator", "planner")
GENERATED = ("operator/agent/podresources_v1",)
PHASES = {
    "Pending", "Progressing", "Waiting", "Ready", "Failed", "Invalid", "Suspended", "Conflict",
    "Cordoning", "Evicting", "Partitioning", "Verifying", "Uncordoning", "Done", "RollingBack",
    "RolledBack", "Applied", "WaitingForDevicePlugin", "Blocked", "ResetRequired",
}  # fmt: skip


def _sources() -> list[Path]:
    return sorted(
        p
        for package in PACKAGES
        for p in (ROOT / package).rglob("*.py")
        if not any(str(p.relative_to(ROOT)).startswith(g) for g in GENERATED)
    )


def figures() -> dict[str, object]:
    """The figures, from the files as they are."""
    modules, functions = [], []
    any_count = dict_any = dict_any_real = literals = 0
    for path in _sources():
        rel = str(path.relative_to(ROOT))
        text = path.read_text()
        modules.append((len(text.splitlines()), rel))
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                functions.append((length, f"{rel}:{node.name}"))
            if (
                rel.startswith("operator/controller")
                and isinstance(node, ast.Constant)
                and node.value in PHASES
            ):
                literals += 1
        if rel.startswith("operator/"):
            any_count += len(re.findall(r"\bAny\b", text))
            dict_any += text.count("dict[str, Any]")
            if not rel.startswith("operator/sim/"):
                dict_any_real += text.count("dict[str, Any]")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    return {
        "largest_modules": [f"{rel} {n}" for n, rel in sorted(modules, reverse=True)[:3]],
        "longest_functions": [f"{name} {n}" for n, name in sorted(functions, reverse=True)[:3]],
        "any_in_operator": any_count,
        "dict_str_any_in_operator": dict_any,
        "dict_str_any_outside_sim": dict_any_real,
        "raw_phase_literals_in_controller": literals,
        "import_contracts": len(contracts),
        "import_contract_kinds": sorted({c["type"] for c in contracts}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    found = figures()
    width = max(len(k) for k in found)
    for key, value in found.items():
        shown = ", ".join(map(str, value)) if isinstance(value, list) else value
        print(f"{key:<{width}}  {shown}")
    if args.json:
        args.json.write_text(json.dumps(found, indent=2) + "\n")


if __name__ == "__main__":
    main()
