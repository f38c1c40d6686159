"""What every command shares: the options, error handling and result output.

Results go to stdout, everything else to stderr. Library errors become a
message and an exit code here, once, as grep and diff do: 1 when the data
says no (a bad dump, an unknown module; and, in their commands, failed
modules, failed checks, a tripped diff gate), 2 for a usage error or trouble
(a bad option or parameter, SQL that does not run, no warehouse at the path,
a locked file, a full disk, a missing extra).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from bufferhouse.errors import (
    BufferhouseError,
    DumpError,
    UnknownEventError,
    UnknownLabelError,
    UnknownModuleError,
    UnknownSnapshotError,
)
from bufferhouse.render import RenderOptions, column_notes, render
from bufferhouse.schema.warehouse import ENV_DB

if TYPE_CHECKING:
    import pyarrow as pa

DB_HELP = f"Warehouse file (default: ${ENV_DB} or ./bufferhouse.duckdb)."
#: Exit status when the data says no: a bad dump, an unknown module, event, snapshot or label.
DATA = 1
#: Exit status for a usage error (click's own for bad options) or trouble.
USAGE = 2


def exit_code(exc: BufferhouseError) -> int:
    return (
        DATA
        if isinstance(
            exc,
            (
                DumpError,
                UnknownModuleError,
                UnknownEventError,
                UnknownSnapshotError,
                UnknownLabelError,
            ),
        )
        else USAGE
    )


def handle_errors(func: Callable) -> Callable:
    """Turn a library error into `bufferhouse: error: ...` and its exit status."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except BufferhouseError as exc:
            click.echo(f"bufferhouse: error: {exc}", err=True)
            sys.exit(exit_code(exc))

    return wrapper


class _StderrNotices(logging.Handler):
    """The library's notices (e.g. a writer waiting for the file) as `bufferhouse: ...`
    lines on stderr, through click so tests capture them."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(f"bufferhouse: {record.getMessage()}", err=True)


def show_notices() -> None:
    """Route the `bufferhouse` loggers' INFO notices to stderr (once per process)."""
    logger = logging.getLogger("bufferhouse")
    if not any(isinstance(h, _StderrNotices) for h in logger.handlers):
        logger.addHandler(_StderrNotices())
    logger.setLevel(logging.INFO)


def db_option(help: str = DB_HELP):
    return click.option("--db", default=None, help=help)


def parse_pairs(pairs: tuple[str, ...], option: str) -> dict[str, str]:
    """KEY=VALUE options as a dict; a malformed one is a usage error naming the option."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint=option)
        out[key.strip()] = value
    return out


def check_labels(ctx, param, labels: tuple[str, ...]) -> tuple[str, ...]:
    """click callback: every --label is key=value (a usage error otherwise)."""
    for label in labels:
        key, sep, _ = label.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"label {label!r} is not of the form key=value")
    return labels


params_option = click.option(
    "-p",
    "--param",
    "params",
    multiple=True,
    metavar="KEY=VALUE",
    help="Query parameter (repeatable).",
)
format_option = click.option(
    "-f",
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json", "markdown", "parquet"]),
    default=None,
    help="Output format (default: table on a terminal, csv otherwise; parquet for -o *.parquet).",
)
output_option = click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write to FILE instead of stdout.",
)
limit_option = click.option(
    "--limit", type=click.IntRange(min=0), default=None, help="Print at most N rows."
)
human_option = click.option(
    "-H",
    "--human",
    is_flag=True,
    help="Byte columns as KiB/MiB/GiB in table and markdown output (exact bytes otherwise).",
)
wait_option = click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="Seconds to wait for another process (an ingest) to release the warehouse.",
)
wide_option = click.option(
    "--wide",
    is_flag=True,
    help="Do not shorten wide cells to fit the terminal (table format on a terminal).",
)


def output_format(fmt: str | None, output: str | None) -> str:
    """The format asked for, or the default: parquet for -o *.parquet, table on a
    terminal, csv otherwise (a pipe or a file)."""
    if fmt is not None:
        return fmt
    if output and output.endswith(".parquet"):
        return "parquet"
    return "table" if output is None and sys.stdout.isatty() else "csv"


def terminal_width() -> int | None:
    """Columns of the terminal stdout writes to; None when it is not one."""
    if not sys.stdout.isatty():
        return None
    return shutil.get_terminal_size().columns


def write_text_file(output: str, text: str) -> None:
    """Write a text result to a file; a failed write leaves no partial file behind."""
    emit_to_file(output, lambda f: f.write(text), binary=False)


def emit_to_file(output: str, write: Callable, binary: bool) -> None:
    opened = False
    try:
        with open(output, "wb") if binary else open(output, "w", encoding="utf-8", newline="") as f:
            opened = True
            write(f)
    except OSError as exc:  # a full disk, a directory that is not there
        if opened:  # no half-written file stays behind
            with contextlib.suppress(OSError):
                os.remove(output)
        raise BufferhouseError(f"cannot write {output}: {exc.strerror or exc}") from None


def emit(
    table: pa.Table,
    fmt: str | None,
    output: str | None,
    limit: int | None = None,
    *,
    human: bool = False,
    wide: bool = False,
) -> None:
    """Render a result to stdout or `output` in the chosen (or default) format."""
    if limit is not None:
        table = table.slice(0, limit)
    fmt = output_format(fmt, output)
    options = RenderOptions(
        human_bytes=human,
        max_width=None if wide or output is not None else terminal_width(),
    )
    if fmt == "parquet" and output is None:
        if sys.stdout.isatty():
            raise click.UsageError("parquet output is binary: pass -o FILE")
        render(table, fmt, sys.stdout.buffer)
    elif output is None:
        render(table, fmt, sys.stdout, options)
    else:
        emit_to_file(output, lambda f: render(table, fmt, f, options), binary=fmt == "parquet")
    if output is not None:
        click.echo(f"{table.num_rows} rows -> {output}", err=True)
    for note in column_notes(table.column_names):  # on stderr: the data stays clean
        click.echo(f"note: {note}", err=True)
