"""The `migplan` command: global options, the command groups, and error handling.

Bad input never shows a traceback: it is reported as one line on stderr with exit code 2.
"""

from __future__ import annotations

import os
import sys
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperOption

from migplan.operator.cli import (
    IMPORTED,
    agent,
    begin,
    catalog_commands,
    cluster_commands,
    crds,
    doctor,
    export,
    nvml_info,
    operator_command,
    preview,
)
from migplan.operator.cli.context import CliState
from migplan.operator.logs import LogFormat, configure_logging
from migplan.operator.nvml.errors import NvmlError
from migplan.planner.errors import MigplanInputError

EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 70
EXIT_NVML = 3
EXIT_API = 4

_typed = TyperOption.display_type_rich


def _flags_take_no_value(self: TyperOption, ctx: Any) -> str | None:
    """typer 0.29 prints `<bool>` after a flag, as if `--all true` were how to use it."""
    return None if self.is_flag else _typed(self, ctx)


TyperOption.display_type_rich = _flags_take_no_value  # type: ignore[method-assign]

app = typer.Typer(
    name="migplan",
    help=(
        "Plan and apply NVIDIA MIG geometries across a Kubernetes cluster.\n\n"
        "The planning commands work offline from the GPU catalog in profiles/; MODEL is a "
        "catalog key (A100-40GB, H100-80GB, ...) or a product name as NVML or GPU feature "
        "discovery report it ('NVIDIA H100 80GB HBM3', NVIDIA-A100-SXM4-40GB), any case."
    ),
    epilog=(
        "Exit codes: 0 done; 1 a finding (doctor: a blocking one; nvml-info: NVML differs "
        "from profiles/); 2 bad input; 3 NVML failed; 4 the Kubernetes API failed; 70 a "
        "migplan bug (please report it with the log)."
    ),
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
catalog_commands.register(app)
app.command("preview")(preview.preview)
app.command("inventory")(preview.inventory)
app.command("crds")(crds.crds)
app.command("reference")(crds.reference)
app.command("nvml-info")(nvml_info.nvml_info)
app.command("agent")(agent.agent)
app.command("operator")(operator_command.operator)
app.command("doctor")(doctor.doctor)
app.command("status")(cluster_commands.status)
app.command("rebalance")(cluster_commands.rebalance)
app.add_typer(export.app, name="export")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"migplan {package_version('migplan')}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    profiles_dir: Annotated[
        Path | None,
        typer.Option(
            "--profiles-dir",
            envvar="MIGPLAN_PROFILES_DIR",
            help="Load GPU profile files from this directory instead of the shipped catalog.",
        ),
    ] = None,
    log_level: Annotated[
        str,
        typer.Option(
            "--log-level",
            envvar="MIGPLAN_LOG_LEVEL",
            help="debug, info, warning or error (logs go to stderr; JSON when not a terminal).",
        ),
    ] = "warning",
    log_format: Annotated[
        LogFormat,
        typer.Option(
            "--log-format",
            envvar="MIGPLAN_LOG_FORMAT",
            help="json, console, or auto: JSON unless stderr is a terminal.",
        ),
    ] = LogFormat.AUTO,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Show the version."),
    ] = False,
) -> None:
    """Global options shared by every command."""
    configure_logging(level=log_level, json=log_format.as_json())
    ctx.obj = CliState(profiles_dir=profiles_dir)


def printable(text: str) -> str:
    """`text` with control characters (terminal escape sequences among them) written as
    escapes, so input cannot drive the terminal it is echoed to."""
    return "".join(
        c if c.isprintable() or c == " " else c.encode("unicode_escape").decode() for c in text
    )


def _fail(message: str, code: int) -> int:
    sys.stderr.write(f"migplan: error: {printable(' '.join(message.split()))}\n")
    return code


def _api_failure(exc: Exception) -> str | None:
    """What went wrong talking to the Kubernetes API, if `exc` says so. The client is looked
    up, not imported: commands that never loaded it (preview of a file) cannot have raised
    its exceptions, and importing it costs them a third of a second."""
    api = sys.modules.get("kubernetes.client.exceptions")
    if api is not None and isinstance(exc, api.ApiException):
        body = exc.body or ""
        return f"the Kubernetes API answered {exc.status} {exc.reason}: {body[:300]}"
    transport = sys.modules.get("urllib3.exceptions")
    if transport is not None and isinstance(exc, transport.MaxRetryError):
        return f"cannot reach the Kubernetes API: {exc.reason}"
    return None


def run(argv: list[str] | None = None, *, started: float | None = None) -> int:
    """Run the CLI on `argv` and return the exit code instead of raising SystemExit.
    `started` (time.monotonic()) is when the command began, if before this call."""
    begin(started)
    command = typer.main.get_command(app)
    try:
        result = command.main(args=argv, prog_name="migplan", standalone_mode=False)
    except typer.TyperException as exc:
        # Usage errors (missing argument, bad option value, unknown command) carry the
        # context of the command they concern.
        ctx = getattr(exc, "ctx", None)
        message = exc.format_message()
        if not message and ctx is not None:  # a bare group: show its help
            typer.echo(ctx.get_help())
            return EXIT_BAD_INPUT
        where = ctx.command_path if ctx is not None else "migplan"
        return _fail(f"{message} (see '{where} --help')", EXIT_BAD_INPUT)
    except typer.Abort:
        return _fail("aborted", 130)
    except MigplanInputError as exc:
        return _fail(str(exc), EXIT_BAD_INPUT)
    except NvmlError as exc:
        return _fail(
            f"{exc} (is this a GPU node with the NVIDIA driver? --simulate MODEL "
            "uses the emulator)",
            EXIT_NVML,
        )
    except BrokenPipeError:
        # The reader went away (`migplan layouts ... | head`); nothing left to say.
        sys.stderr.close()
        return 0
    except Exception as exc:
        api_failure = _api_failure(exc)
        if api_failure is not None:
            return _fail(api_failure, EXIT_API)
        if os.environ.get("MIGPLAN_DEBUG"):
            raise
        return _fail(
            f"internal error: {type(exc).__name__}: {exc}; "
            "rerun with MIGPLAN_DEBUG=1 for the traceback and please report it",
            EXIT_INTERNAL,
        )
    return result if isinstance(result, int) else 0


def main() -> None:
    """Console-script entry point (`migplan`, `kubectl-migplan`)."""
    sys.exit(run(started=IMPORTED))
