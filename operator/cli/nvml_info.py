"""`migplan nvml-info`: what NVML reports, and how it compares with profiles/ (read-only)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from migplan.operator.cli.context import OutputFormat, console, state
from migplan.operator.nvml.adapter import NvmlAdapter
from migplan.operator.nvml.compare import compare
from migplan.planner.errors import MigplanInputError, UnknownModelError

EXIT_MISMATCH = 1


def _simulated(models: str) -> Any:
    from migplan.operator.nvml.emulator import FakeNvml

    names = [m.strip() for m in models.split(",") if m.strip()]
    if not names:
        raise MigplanInputError("--simulate needs at least one GPU model")
    return FakeNvml(names, mig=True)


def nvml_info(
    ctx: typer.Context,
    simulate: Annotated[
        str | None,
        typer.Option(
            "--simulate",
            metavar="MODEL[,MODEL...]",
            help="Ask the NVML emulator (GPUs of these models) instead of the driver.",
        ),
    ] = None,
    output: Annotated[OutputFormat, typer.Option("--output", "-o")] = OutputFormat.TEXT,
) -> None:
    """Show, read-only, what NVML reports on this node and how it compares with profiles/.

    For each GPU: name, UUID, MIG mode (current and pending), every GPU-instance profile with
    its possible placements, and the instances that exist. Run it first on a new GPU model:
    differences from profiles/ are listed (exit code 1), so the catalog can be corrected. It
    never changes MIG mode, instances or any other GPU setting.
    """
    catalog = state(ctx).catalog
    report = []
    with NvmlAdapter(_simulated(simulate).pynvml if simulate else None) as nvml:
        for device in nvml.devices():
            entry: dict[str, Any] = {
                "index": device.index,
                "name": device.name,
                "uuid": device.uuid,
                "memoryMiB": device.memory_mib,
                "migEnabled": device.mig_enabled,
                "migPending": device.mig_pending,
            }
            try:
                model = catalog.model(device.name)
            except UnknownModelError:
                entry.update(model=None, differences=[f"{device.name!r} is not in profiles/"])
                report.append(entry)
                continue
            profiles = nvml.profiles(device.index)
            entry["model"] = model.model
            entry["profiles"] = [
                {
                    "id": p.id,
                    "name": getattr(model.profile_by_id(p.id), "name", None),
                    "computeSlices": p.compute_slices,
                    "maxCount": p.max_count,
                    "memoryMiB": p.memory_mib,
                    "placements": [list(x) for x in p.placements],
                }
                for p in profiles
            ]
            if device.mig_enabled:
                entry["layout"] = str(nvml.layout(device.index, model)[0])
            entry["differences"] = [str(d) for d in compare(model, profiles)]
            report.append(entry)
    if output is OutputFormat.JSON:
        typer.echo(json.dumps(report, indent=2))
    else:
        _print(report)
    if any(e["differences"] for e in report):
        raise typer.Exit(EXIT_MISMATCH)


def _print(report: list[dict[str, Any]]) -> None:
    out = console()
    for e in report:
        mode = "on" if e["migEnabled"] else "off"
        if e["migPending"] != e["migEnabled"]:
            mode += f" (pending {'on' if e['migPending'] else 'off'}: reset needed)"
        out.print(
            Text(
                f"GPU {e['index']}: {e['name']}  {e['uuid']}  MIG {mode}  "
                f"catalog model {e.get('model') or '?'}",
                style="bold",
            )
        )
        if e.get("profiles"):
            table = Table("id", "profile", "compute", "max", "MiB", "placements (start:size)")
            for p in e["profiles"]:
                table.add_row(
                    str(p["id"]),
                    p["name"] or "?",
                    str(p["computeSlices"]),
                    str(p["maxCount"]),
                    str(p["memoryMiB"]),
                    " ".join(f"{s}:{z}" for s, z in p["placements"]),
                )
            out.print(table)
        if "layout" in e:
            out.print(f"  instances: {e['layout']}")
        if e["differences"]:
            out.print(Text("  differs from profiles/:", style="bold yellow"))
            for d in e["differences"]:
                out.print(Text(f"    - {d}"))
        else:
            out.print(Text("  matches profiles/", style="green"))
