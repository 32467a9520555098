"""State shared by the CLI commands of one invocation, and small option types."""

from __future__ import annotations

import io
import json
import os
import sys
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, TextIO, cast

import typer
import yaml
from rich import box
from rich.console import Console
from rich.table import Table

from migplan.planner.hardware.catalog import Catalog, GpuModel, default_catalog, load_catalog


class OutputFormat(StrEnum):
    """How a command prints its result."""

    TEXT = "text"
    JSON = "json"
    YAML = "yaml"

    @property
    def structured(self) -> bool:
        """Whether the result is printed as one document (json or yaml)."""
        return self is not OutputFormat.TEXT


def print_document(document: Any, output: OutputFormat) -> None:
    """`document` on stdout as `output` says: indented JSON, or block-style YAML in the
    document's own key order."""
    if output is OutputFormat.YAML:
        typer.echo(yaml.safe_dump(document, sort_keys=False), nl=False)
    else:
        typer.echo(json.dumps(document, indent=2))


@dataclass
class CliState:
    """Options of the `migplan` group, available to every command through the context."""

    profiles_dir: Path | None = None
    _catalog: Catalog | None = field(default=None, repr=False)

    @property
    def catalog(self) -> Catalog:
        """The GPU catalog (shipped, or from --profiles-dir), loaded on first use."""
        if self._catalog is None:
            self._catalog = (
                load_catalog(self.profiles_dir) if self.profiles_dir else (default_catalog())
            )
        return self._catalog

    def model(self, name: str) -> GpuModel:
        """The catalog model matching a key or product name."""
        return self.catalog.model(name)


def state(ctx: typer.Context) -> CliState:
    """The CliState of this invocation (set by the root callback)."""
    found = ctx.find_object(CliState)
    return found if found is not None else CliState()


PIPED_WIDTH = 200
"""Columns when stdout is not a terminal and COLUMNS does not say: wide enough that nothing
wraps; the lines carry no trailing spaces, so a wide page costs nothing."""


class _Trimmed(io.TextIOBase):
    """Writes through to `out`, each line without trailing spaces (a table's padding, a
    title centred on the width)."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._line = ""

    def write(self, text: str) -> int:
        lines = (self._line + text).split("\n")
        self._line = lines.pop()
        for line in lines:
            self._out.write(line.rstrip() + "\n")
        return len(text)

    def flush(self) -> None:
        self._out.flush()


def console() -> Console:
    """A rich console for stdout: the terminal's width on a terminal; piped, COLUMNS or wide,
    plain ASCII tables, no trailing spaces."""
    if sys.stdout.isatty():
        return Console()
    columns = os.environ.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() and int(columns) > 0 else PIPED_WIDTH
    trimmed = cast(TextIO, _Trimmed(sys.stdout))
    return Console(file=trimmed, width=width, no_color=True, soft_wrap=True)


def new_table(*columns: str, **options: Any) -> Table:
    """A rich table for `console()`: box lines on a terminal, plain ASCII when piped (where
    `box=None` is not asked for)."""
    if "box" not in options:
        options["box"] = box.HEAVY_HEAD if sys.stdout.isatty() else box.ASCII
    return Table(*columns, **options)


KubeconfigOpt = Annotated[
    str | None,
    typer.Option(
        "--kubeconfig",
        help="Kubeconfig to use; else KUBECONFIG (files joined with ':'), else "
        "~/.kube/config, else (inside a pod) its service account, as kubectl looks.",
    ),
]
"""The --kubeconfig option every command that talks to a cluster takes."""

ContextOpt = Annotated[
    str | None,
    typer.Option("--context", help="The kubeconfig context to use (default: its current one)."),
]
"""The --context option of the commands people run against a cluster."""

PlanFileArg = Annotated[
    Path,
    typer.Argument(
        metavar="PLAN.yaml",
        help="A GPUPartitionPlan manifest (`-`: read it from stdin).",
        show_default=False,
    ),
]
"""The plan manifest argument of the planning commands."""

ClusterOpt = Annotated[
    Path | None,
    typer.Option(
        "--cluster",
        metavar="INVENTORY.yaml",
        help="Plan against this inventory file (from `migplan inventory`, or written by "
        "hand; `-`: from stdin) instead of the live cluster.",
    ),
]
"""--cluster: an inventory file instead of the live cluster."""
