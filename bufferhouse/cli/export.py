"""`bufferhouse export` and `attach`: a warehouse to Parquet, and Parquet back to views."""

from __future__ import annotations

import click

from bufferhouse.cli.options import check_labels, db_option, handle_errors
from bufferhouse.render import human_bytes
from bufferhouse.schema.warehouse import ENV_DB, default_db


@click.command("export")
@click.argument("out_dir", required=False, type=click.Path(file_okay=False))
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(file_okay=False),
    default=None,
    help="Directory to write the dataset into (as plot's and report's -o); "
    "the positional OUT_DIR says the same.",
)
@db_option()
@click.option(
    "--label",
    "labels",
    multiple=True,
    metavar="KEY=VALUE",
    callback=check_labels,
    help="Only modules with this label (repeatable: all must match).",
)
@click.option(
    "--tables",
    default=None,
    metavar="A,B",
    help="Only these tables (comma-separated); modules is always written.",
)
@click.option("--overwrite", is_flag=True, help="Replace an earlier export in OUT_DIR.")
@handle_errors
def export_command(out_dir, output, db, labels, tables, overwrite) -> None:
    """Write the warehouse as a Parquet dataset: one directory per table.

    zstd Parquet, Hive-partitioned by ingest run (TABLE/run_id=N/), with the
    warehouse's column names, types and docs (also in _schema.json and
    README.md beside the data). The warehouse is opened read-only.

    Example: bufferhouse export -o out/ --db fleet.duckdb --label run=nightly-1121
    """
    out_dir = _out_dir(out_dir, output)
    names = [t.strip() for t in tables.split(",") if t.strip()] if tables else None
    from bufferhouse.export import export_warehouse  # imported by the commands that use it

    report = export_warehouse(out_dir, db, labels=labels, tables=names, overwrite=overwrite)
    rows = sum(report.tables.values())
    click.echo(
        f"{report.modules} modules, {rows} rows in {len(report.tables)} tables, "
        f"{report.files} files ({human_bytes(report.bytes_written)}) in {report.seconds:.1f}s "
        f"-> {report.out_dir}",
        err=True,
    )


def _out_dir(positional: str | None, output: str | None) -> str:
    """The one directory named by OUT_DIR or -o (both only when they agree)."""
    if positional is None and output is None:
        raise click.UsageError("name the directory to write: -o DIR (or OUT_DIR)")
    if positional is not None and output is not None and positional != output:
        raise click.UsageError(f"two directories given, {positional!r} and -o {output!r}: give one")
    return output if output is not None else positional


@click.command("attach")
@click.argument("source")
@db_option(
    f"File to write the views into (default: ${ENV_DB} or ./bufferhouse.duckdb). "
    "Replaces an earlier attach; never a warehouse."
)
@handle_errors
def attach_command(source, db) -> None:
    """Make a warehouse of views over a Parquet dataset (a directory, glob or URL).

    Every table becomes a view over the dataset's files (modules written by
    several machines counted once), with the bh_* macros, so every canned
    query and `bufferhouse query --db FILE` work on it as on a warehouse.
    The file holds only views; new part files show up without re-attaching.

    Example: bufferhouse attach out/ --db fleet-views.duckdb
    """
    from bufferhouse.export import attach

    report = attach(source, db or default_db())
    click.echo(f"{report.modules} modules in {report.source} -> {report.db} (views)", err=True)
    if report.empty_tables:
        click.echo(f"no files yet for: {', '.join(report.empty_tables)}", err=True)
