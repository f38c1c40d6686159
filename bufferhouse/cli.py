"""The `bufferhouse` command: parse options, call the library, render.

No SQL and no parsing here. Results go to stdout, everything else to stderr;
library errors are turned into messages and exit codes in one place.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable

import click

import bufferhouse
from bufferhouse.errors import BufferhouseError
from bufferhouse.schema.warehouse import ENV_DB, default_db

DB_HELP = f"Warehouse file (default: ${ENV_DB} or ./bufferhouse.duckdb)."


def _handle_errors(func: Callable) -> Callable:
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except BufferhouseError as exc:
            click.echo(f"bufferhouse: error: {exc}", err=True)
            sys.exit(2)

    return wrapper


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(bufferhouse.__version__, prog_name="bufferhouse")
def main() -> None:
    """An SQL warehouse for XLA buffer-assignment dumps."""


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--db", default=None, help=DB_HELP)
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="Label the modules (repeatable).")
@click.option("--strict", is_flag=True, help="Stop at the first module that fails.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Parser processes (default: all cores).")
@click.option("--wait", type=click.FloatRange(min=0), default=30.0, show_default=True,
              help="Seconds to wait for another process to release the warehouse.")
@click.option("--max-bytes", type=click.IntRange(min=1), default=None,
              help="Skip (as failed) any module with more text than this, after decompression.")
@click.option("-q", "--quiet", is_flag=True, help="No progress, only the summary.")
@_handle_errors
def ingest(paths, db, labels, strict, jobs, wait, max_bytes, quiet) -> None:
    """Load XLA dump files or directories into the warehouse.

    PATHS may be dump directories (searched recursively), single
    -buffer-assignment.txt files, or .gz copies of them. Modules already in the
    warehouse are skipped, so re-running on the same tree adds nothing.

    Example: bufferhouse ingest dumps/ --db fleet.duckdb --label jax=0.7.2
    """
    interactive = sys.stderr.isatty() and not quiet

    def progress(outcome, done, total):
        if outcome.status == "failed" and outcome.error is not None:
            click.echo(f"failed: {outcome.error.describe()}", err=True)
        elif not quiet:
            for w in outcome.warnings:
                click.echo(f"warning: {w.describe()}", err=True)
        if interactive:
            click.echo(f"\r[{done}/{total}] {outcome.files.stem[:70]:<70}", err=True, nl=False)
        elif not quiet and (done % 500 == 0):
            click.echo(f"[{done}/{total}] modules", err=True)

    report = bufferhouse.ingest(
        paths, db, labels=labels, strict=strict, jobs=jobs, wait=wait, max_bytes=max_bytes, progress=progress
    )
    if interactive:
        click.echo("\r" + " " * 80 + "\r", err=True, nl=False)
    mb = report.bytes_read / 1e6
    rate = mb / report.seconds if report.seconds > 0 else 0.0
    click.echo(
        f"{len(report.loaded)} loaded, {len(report.present)} already present, "
        f"{len(report.failed)} failed; {_human(report.bytes_read)} read in {report.seconds:.1f}s "
        f"({rate:.1f} MB/s) -> {report.db}",
        err=True,
    )
    if report.failed:
        click.echo("failures (first error of each module):", err=True)
        for o in report.failed:
            click.echo(f"  {o.error.describe() if o.error else o.files.display}", err=True)
    if report.stopped_early:
        click.echo("stopped at the first failure (--strict)", err=True)
    sys.exit(0 if report.ok else 1)


if __name__ == "__main__":
    main()
