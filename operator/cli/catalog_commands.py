"""Offline catalog commands: `profiles`, `layouts`, `check-layout`."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.text import Text

from migplan.operator.cli.context import OutputFormat, console, new_table, print_document, state
from migplan.operator.cli.pictures import slice_bar_text
from migplan.planner.errors import MigplanInputError
from migplan.planner.hardware.catalog import GpuModel, Profile
from migplan.planner.hardware.enumeration import enumerate_layouts
from migplan.planner.hardware.layout import Layout, check_layout

EXIT_INVALID = 1

ModelArg = Annotated[
    str,
    typer.Argument(
        help="GPU model: catalog key (H100-80GB) or product name ('NVIDIA H100 80GB HBM3').",
        show_default=False,
    ),
]
OutputOpt = Annotated[
    OutputFormat, typer.Option("--output", "-o", help="text (a table), json or yaml.")
]


def profiles(
    ctx: typer.Context,
    model: Annotated[
        str | None,
        typer.Argument(
            help="Show this model's profiles; all models when omitted.", show_default=False
        ),
    ] = None,
    output: OutputOpt = OutputFormat.TEXT,
) -> None:
    """List the GPU models migplan knows, or one model's MIG profiles with their placements.

    Evidence says how each fact is known: read (hardware output or NVIDIA's table for that
    product), derived (arithmetic on read values) or inferred (from a sibling product; confirm
    it with `migplan nvml-info` on a real node).
    """
    cli = state(ctx)
    if model is None:
        models = list(cli.catalog)
        if output.structured:
            print_document(output=output, document=[_model_summary(m) for m in models])
        else:
            _print_models(models)
        return
    gpu = cli.model(model)
    if output.structured:
        print_document(
            output=output, document=gpu.model_dump(mode="json", by_alias=True, exclude_none=True)
        )
    else:
        _print_profiles(gpu)


def _model_summary(m: GpuModel) -> dict[str, Any]:
    return {
        "model": m.model,
        "description": m.description,
        "computeSlices": m.compute_slices,
        "memorySlices": m.memory_slices,
        "profiles": [p.name for p in m.profiles],
        "products": [p.nvml for p in m.products],
    }


def _print_models(models: list[GpuModel]) -> None:
    table = new_table(title="GPU models (migplan profiles MODEL shows one)", title_justify="left")
    for column in ("model", "compute / memory slices", "profiles", "products (NVML names)"):
        table.add_column(column)
    for m in models:
        table.add_row(
            m.model,
            f"{m.compute_slices} / {m.memory_slices}",
            ", ".join(p.name for p in m.profiles),
            "\n".join(p.nvml for p in m.products),
        )
    console().print(table)


def _print_profiles(gpu: GpuModel) -> None:
    out = console()
    out.print(
        f"[bold]{gpu.model}[/bold] - {gpu.description}: {gpu.compute_slices} compute slices, "
        f"{gpu.memory_slices} memory slices, at most {gpu.max_instances} instances; "
        f"MIG mode change {'needs' if gpu.mig_mode_change_needs_reset else 'needs no'} GPU reset"
        + (
            f"; {gpu.memory.mib} MiB in all ({gpu.memory.evidence.value})"
            if gpu.memory is not None
            else ""
        )
    )
    table = new_table(show_lines=False)
    for column in (
        "profile",
        "id",
        "compute",
        "slices",
        "starts",
        "max",
        "MiB",
        "SMs",
        "CE/DEC/ENC/JPG/OFA",
        "media",
        "placements",
        "SMs, engines",
    ):
        table.add_column(
            column, justify="right" if column in ("id", "max", "MiB", "SMs") else "left"
        )
    for p in gpu.profiles:
        table.add_row(
            p.name,
            str(p.id),
            str(p.compute_slices),
            str(p.size),
            ",".join(map(str, p.starts)),
            str(p.max_count),
            str(p.memory_mib) if p.memory_mib else "?",
            str(p.multiprocessors or "?"),
            _engines(p),
            p.media.value,
            p.evidence.placements.value,
            p.evidence.multiprocessors.value if p.evidence.multiprocessors else "?",
        )
    out.print(table)
    products = new_table(
        "NVML name",
        "GFD label (nvidia.com/gpu.product)",
        "PCI id",
        "evidence",
        title="Matches",
        title_justify="left",
    )
    for prod in gpu.products:
        products.add_row(prod.nvml, prod.gfd, prod.pci_device_id or "?", prod.evidence.value)
    out.print(products)
    for note in gpu.notes:
        out.print(f"note: {note}", highlight=False)


def _engines(profile: Profile) -> str:
    e = profile.engines
    if e is None:
        return "?"
    return f"{e.copy_engines}/{e.decoder}/{e.encoder}/{e.jpeg}/{e.ofa}"


def _profile_list(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise MigplanInputError("--profiles needs at least one profile name")
    return names


def layouts(
    ctx: typer.Context,
    model: ModelArg,
    profiles_: Annotated[
        str | None,
        typer.Option(
            "--profiles",
            help="Only these profiles, comma-separated (1g.10gb,3g.40gb). Default: all.",
            show_default=False,
        ),
    ] = None,
    maximal: Annotated[
        bool,
        typer.Option(
            "--maximal",
            help="Only layouts to which no further instance (of the allowed profiles) fits.",
        ),
    ] = False,
    output: OutputOpt = OutputFormat.TEXT,
) -> None:
    """List every valid MIG layout of a GPU model, derived from its placement facts.

    A layout is written profile@start joined by +, sorted by start (3g.40gb@0+2g.20gb@4);
    - is the empty GPU. With -o json, stdout is a JSON array of layout strings and nothing else.
    """
    gpu = state(ctx).model(model)
    found = enumerate_layouts(gpu, profiles=_profile_list(profiles_), maximal=maximal)
    if output.structured:
        print_document(output=output, document=[str(layout) for layout in found])
        return
    kind = "maximal layouts" if maximal else "valid layouts"
    which = profiles_ or "all profiles"
    out = console()
    table = new_table(
        title=f"{gpu.model}: {len(found)} {kind} of {which}",
        title_justify="left",
        show_edge=False,
    )
    table.add_column("#", justify="right")
    table.add_column("layout", overflow="fold")
    table.add_column(f"memory slices 0..{gpu.memory_slices - 1}", no_wrap=True)
    table.add_column("compute", justify="right")
    for n, layout in enumerate(found, 1):
        compute = sum(gpu.profile(i.profile).compute_slices for i in layout.instances)
        table.add_row(
            str(n), str(layout), slice_bar_text(gpu, layout), f"{compute}/{gpu.compute_slices}"
        )
    out.print(table)


def check_layout_command(
    ctx: typer.Context,
    model: ModelArg,
    layout: Annotated[
        str,
        typer.Argument(
            help="Layout such as 4g.40gb@0+3g.40gb@4 (- for empty).", show_default=False
        ),
    ],
    output: OutputOpt = OutputFormat.TEXT,
) -> None:
    """Say whether a layout is valid on a GPU model and, if not, exactly why.

    Exit code 0: valid; 1: not valid (reasons printed); 2: bad input (unknown model,
    unreadable layout).
    """
    gpu = state(ctx).model(model)
    parsed = Layout.parse(layout)
    violations = check_layout(gpu, parsed)
    if output.structured:
        print_document(
            output=output,
            document={
                "model": gpu.model,
                "layout": str(parsed),
                "valid": not violations,
                "violations": [{"rule": v.rule.value, "message": v.message} for v in violations],
            },
        )
    else:
        out = console()
        if violations:
            out.print(Text(f"invalid on {gpu.model}: {parsed}", style="bold red"))
            for v in violations:
                out.print(Text(f"  - {v.message}"))
        else:
            out.print(Text(f"valid on {gpu.model}: {parsed}", style="bold green"))
            out.print(Text("  ") + slice_bar_text(gpu, parsed))
    if violations:
        raise typer.Exit(EXIT_INVALID)


def register(app: typer.Typer) -> None:
    """Add the catalog commands to the `migplan` app."""
    app.command("profiles")(profiles)
    app.command("layouts")(layouts)
    app.command("check-layout")(check_layout_command)
