"""`bufferhouse diff`: two runs compared module by module, with a CI gate."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable

import click

import bufferhouse
from bufferhouse.cli.options import (
    USAGE,
    db_option,
    emit,
    format_option,
    output_format,
    output_option,
    write_text_file,
)
from bufferhouse.compare import Side, SnapshotDiffResult, SnapshotSide
from bufferhouse.compare.snapshots import sides_kind
from bufferhouse.errors import BufferhouseError
from bufferhouse.schema.warehouse import ENV_DB


def gate_exit_only(func: Callable) -> Callable:
    """Every error exits 2 here, whatever its kind (a damaged profile, a snapshot name
    that selects none): exit 1 means the gate tripped, and nothing else."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except BufferhouseError as exc:
            click.echo(f"bufferhouse: error: {exc}", err=True)
            sys.exit(USAGE)

    return wrapper


@click.command("diff")
@click.option(
    "--base",
    required=True,
    metavar="SIDE",
    help="The old run: a label KEY=VALUE[,KEY=VALUE] in --db, a warehouse file, or a dump tree;"
    " or a device memory profile, a directory of them, or a snapshot of --db.",
)
@click.option("--head", required=True, metavar="SIDE", help="The new run, given like --base.")
@db_option(
    f"Warehouse of the label and snapshot sides (default: ${ENV_DB} or ./bufferhouse.duckdb)."
)
@click.option(
    "--module",
    default=None,
    metavar="NAME",
    help="Drill down into one module: name, file stem, module_id or hash prefix.",
)
@click.option(
    "--peak",
    type=click.Choice(["heap", "logical", "total"]),
    default="heap",
    show_default=True,
    help="The peak the report ranks modules by and the gate checks.",
)
@click.option(
    "--fail-above",
    metavar="PCT|BYTES",
    default=None,
    help="Exit 1 when a matched module's peak (a device's live bytes, for snapshots) grows by"
    " more than this (5%, 10MiB, 1048576).",
)
@click.option(
    "--show",
    type=click.Choice(["changes", "modules", "buffers", "sources", "causes", "devices"]),
    default=None,
    help="Print this result table instead of the report (default for csv/json/parquet: "
    "changes, or buffers with --module). causes: why each module changed (docs/diff.md). "
    "Snapshots: sources (default, by allocating line) or devices (the totals).",
)
@click.option(
    "--causes",
    "with_causes",
    is_flag=True,
    default=False,
    help="Add the causes of each module's change to the report (implied by --show causes).",
)
@click.option(
    "--top",
    type=click.IntRange(min=0),
    default=25,
    show_default=True,
    help="Rows per table in the report (0: all).",
)
@format_option
@output_option
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help="Parser processes for dump-tree sides (default: all cores).",
)
@gate_exit_only
def diff_command(
    base, head, db, module, peak, fail_above, show, with_causes, top, fmt, output, jobs
) -> None:
    """Compare two runs module by module: what changed in memory, with a CI gate.

    A side is a label in --db (jax=0.7.2), a warehouse file, or a dump tree
    (ingested into a temporary warehouse). Modules pair up by jit name, then by
    parameter shapes and instructions where a name has several. The table and
    markdown formats print a report (markdown fits a pull-request comment);
    csv, json and parquet print one result table (--show). --show causes (or
    --causes in the report) says why: each module's change in total bytes and
    in the peak split into causes that sum to it.

    Two device memory profiles (or directories of them, or snapshots of --db)
    are compared by allocating line per device instead, and --fail-above gates
    each device's live bytes. Exit status: 0, 1 when --fail-above trips, 2 for
    any error (a bad side, option or file).

    Example: bufferhouse diff --base jax=0.6.2 --head jax=0.7.2 --fail-above 5% --format markdown
    """
    if show in ("buffers", "sources", "devices") and module is None:
        # these tables depend on the sides' kind: told before a long ingest, not after
        snapshots = sides_kind(base, head, db) == "snapshots"
        if not snapshots and show == "devices":
            raise click.UsageError("--show devices is for device memory snapshots")
        if not snapshots:
            raise click.UsageError(f"--show {show} needs --module")
    result = bufferhouse.diff(
        base,
        head,
        db,
        module=module,
        peak=peak,
        fail_above=fail_above,
        jobs=jobs,
        causes=with_causes or show == "causes",
    )
    for role, side in (("base", result.base), ("head", result.head)):
        click.echo(f"{role}: {side.spec} ({_what(side)})", err=True)
    fmt = output_format(fmt, output)
    if show is None and fmt in ("table", "markdown"):
        text = result.report(fmt, top=top or None)
        if output is None:
            click.echo(text, nl=False)
        else:
            write_text_file(output, text)
            click.echo(f"report -> {output}", err=True)
    else:
        default = (
            "sources"
            if isinstance(result, SnapshotDiffResult)
            else ("buffers" if module else "changes")
        )
        emit(result.table(show or default), fmt, output)
    if result.gate is not None:
        click.echo(result.gate.describe(), err=True)
    sys.exit(1 if result.failed else 0)


def _what(side: Side | SnapshotSide) -> str:
    """A side's kind and size: `label, 4 modules` or `profile, 1 snapshot`."""
    if isinstance(side, SnapshotSide):
        n = len(side.snapshots)
        return f"{side.kind}, {n} snapshot{'s' if n != 1 else ''}"
    return f"{side.kind}, {side.modules} modules"
