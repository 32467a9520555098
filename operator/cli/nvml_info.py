"""`migplan nvml-info`: what NVML reports, and how it compares with profiles/ (read-only)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from migplan.operator.cli.context import OutputFormat, console, new_table, print_document, state
from migplan.operator.nvml.errors import NvmlError
from migplan.planner.errors import MigplanInputError, UnknownModelError

if TYPE_CHECKING:
    from migplan.operator.nvml.adapter import NvmlAdapter
    from migplan.operator.nvml.trace import TracedLibrary

EXIT_MISMATCH = 1
ENGINES = ("copy", "decoder", "encoder", "jpeg", "ofa")


def _simulated(models: str) -> Any:
    names = [m.strip() for m in models.split(",") if m.strip()]
    if not names:
        raise MigplanInputError("--simulate needs at least one GPU model")
    # Lazy (PLC0415), as the NVML modules below: the binding, its emulator and their metrics
    # cost every other command 0.1 s.
    from migplan.operator.nvml.emulator import FakeNvml  # noqa: PLC0415

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
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Also compare memory, SMs, engines, P2P and the GPU's total memory, give the "
            "edit to profiles/ that fixes each difference, and list the inferred facts NVML "
            "confirms.",
        ),
    ] = False,
    output: Annotated[
        OutputFormat, typer.Option("--output", "-o", help="text, json or yaml.")
    ] = OutputFormat.TEXT,
    trace: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            metavar="FILE",
            help="Also write every NVML call this reading made (entry point, integer "
            "arguments, return code, counts written back) to FILE as JSON: the evidence the "
            "emulator is tested against (profiles/evidence/). The trace also covers the "
            "agent's reads of instances and MIG devices, whatever they answer.",
        ),
    ] = None,
) -> None:
    """Show, read-only, what NVML reports on this node and how it compares with profiles/.

    For each GPU: name, UUID, PCI device ID, MIG mode (current and pending), every GPU-instance
    profile with its possible placements, SMs and engines, and the instances that exist. Run it
    first on a new GPU model: differences from profiles/ are listed (exit code 1), so the
    catalog can be corrected. With --check every fact is compared and each difference comes
    with its fix; send that output (-o json) with a report. It never changes MIG mode,
    instances or any other GPU setting.
    """
    from migplan.operator.nvml.adapter import NvmlAdapter  # noqa: PLC0415
    from migplan.operator.nvml.compare import compare, confirmations  # noqa: PLC0415

    catalog = state(ctx).catalog
    report = []
    binding, recorder = _binding(simulate, traced=trace is not None)
    with NvmlAdapter(binding) as nvml:
        driver = nvml.driver_version()
        for device in nvml.devices():
            entry: dict[str, Any] = {
                "index": device.index,
                "driverVersion": driver,
                "name": device.name,
                "uuid": device.uuid,
                "memoryMiB": device.memory_mib,
                "pciDeviceId": device.pci_device_id,
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
            if recorder is not None:
                _agent_reads(nvml, device.index)
            entry["model"] = model.model
            entry["profiles"] = [
                {
                    "id": p.id,
                    "name": getattr(model.profile_by_id(p.id), "name", None),
                    "computeSlices": p.compute_slices,
                    "maxCount": p.max_count,
                    "memoryMiB": p.memory_mib,
                    "multiprocessors": p.multiprocessors,
                    "engines": dict(zip(ENGINES, p.engines, strict=True)),
                    "p2p": p.p2p,
                    "placements": [list(x) for x in p.placements],
                }
                for p in profiles
            ]
            if device.mig_enabled:
                entry["layout"] = str(nvml.layout(device.index, model)[0])
            found = compare(model, profiles, hardware=check, memory_mib=device.memory_mib)
            entry["differences"] = [str(d) for d in found]
            if check:
                entry["check"] = {
                    "differences": [
                        {
                            "profile": d.profile,
                            "fact": d.fact,
                            "nvml": d.nvml,
                            "profiles": d.catalog,
                            "kind": d.kind.value,
                            "fix": d.fix,
                        }
                        for d in found
                    ],
                    "confirmed": [
                        {"profile": c.profile, "fact": c.fact, "fix": c.fix}
                        for c in confirmations(model, profiles, memory_mib=device.memory_mib)
                    ],
                }
            report.append(entry)
    if trace is not None and recorder is not None:
        _write_trace(trace, recorder=recorder, report=report)
    if output.structured:
        print_document(report, output)
    else:
        _print(report)
        if simulate and check:
            console().print(
                Text(
                    "(--simulate: the emulator answers from profiles/ itself, so a check "
                    "here proves nothing about hardware; run it on a GPU node.)"
                )
            )
    if any(e["differences"] for e in report):
        raise typer.Exit(EXIT_MISMATCH)


def _binding(simulate: str | None, *, traced: bool) -> tuple[Any, TracedLibrary | None]:
    """The pynvml to read through (the driver's, or the emulator's), recorded when traced."""
    from migplan.operator.nvml.trace import traced_pynvml  # noqa: PLC0415

    fake = _simulated(simulate) if simulate else None
    if not traced:
        return (fake.pynvml if fake is not None else None), None
    return traced_pynvml(fake.library if fake is not None else None)


def _agent_reads(nvml: NvmlAdapter, index: int) -> None:
    """The agent's other reads (instances, processes, MIG devices), traced for the record
    whatever they answer: with MIG off they fail, and how they fail is evidence too."""
    for read in (nvml.instances, nvml.mig_devices):
        try:
            read(index)
        except NvmlError:
            continue


def _write_trace(path: Path, *, recorder: TracedLibrary, report: list[dict[str, Any]]) -> None:
    document = {
        "devices": [
            {"name": e["name"], "migEnabled": e["migEnabled"], "migPending": e["migPending"]}
            for e in report
        ],
        "calls": [c.document() for c in recorder.calls],
    }
    try:
        path.write_text(json.dumps(document, indent=1) + "\n")
    except OSError as exc:
        raise MigplanInputError(f"cannot write the trace to {path}: {exc.strerror}") from None


def _print(report: list[dict[str, Any]]) -> None:
    out = console()
    for e in report:
        mode = "on" if e["migEnabled"] else "off"
        if e["migPending"] != e["migEnabled"]:
            mode += f" (pending {'on' if e['migPending'] else 'off'}: reset needed)"
        out.print(
            Text(
                f"GPU {e['index']}: {e['name']}  {e['uuid']}  PCI {e['pciDeviceId'] or '?'}  "
                f"driver {e['driverVersion']}  "
                f"MIG {mode}  "
                f"catalog model {e.get('model') or '?'}",
                style="bold",
            )
        )
        if e.get("profiles"):
            table = new_table(
                "id",
                "profile",
                "compute",
                "max",
                "MiB",
                "SMs",
                "CE/DEC/ENC/JPG/OFA",
                "P2P",
                "placements (start:size)",
            )
            for p in e["profiles"]:
                table.add_row(
                    str(p["id"]),
                    p["name"] or "?",
                    str(p["computeSlices"]),
                    str(p["maxCount"]),
                    str(p["memoryMiB"]),
                    str(p["multiprocessors"]),
                    "/".join(str(p["engines"][k]) for k in ENGINES),
                    "yes" if p["p2p"] else "no",
                    " ".join(f"{s}:{z}" for s, z in p["placements"]),
                )
            out.print(table)
        if "layout" in e:
            out.print(f"  instances: {e['layout']}")
        if "check" in e:
            _print_check(e["check"])
        elif e["differences"]:
            out.print(Text("  differs from profiles/:", style="bold yellow"))
            for d in e["differences"]:
                out.print(Text(f"    - {d}"))
        else:
            out.print(Text("  matches profiles/", style="green"))
    if any("check" in e for e in report):
        differences = sum(len(e["check"]["differences"]) for e in report if "check" in e)
        confirmed = sum(len(e["check"]["confirmed"]) for e in report if "check" in e)
        out.print(
            Text(
                f"{differences} difference(s), {confirmed} inferred fact(s) confirmed. Send this "
                "check to the migplan project: `migplan nvml-info --check -o json > "
                "nvml-check.json` (read-only; it holds GPU UUIDs, nothing else of the node).",
                style="bold",
            )
        )


def _print_check(check: dict[str, Any]) -> None:
    out = console()
    if not check["differences"]:
        out.print(Text("  every fact matches profiles/", style="green"))
    for d in check["differences"]:
        out.print(
            Text(
                f"  - [{d['kind']}] {d['profile']}: {d['fact']} is {d['nvml']} here, "
                f"{d['profiles']} in profiles/",
                style="yellow",
            )
        )
        out.print(Text(f"      fix: {d['fix']}"))
    for c in check["confirmed"]:
        out.print(Text(f"  + {c['profile']}: {c['fact']} confirmed ({c['fix']})", style="green"))
