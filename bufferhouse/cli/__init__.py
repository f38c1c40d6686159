"""The `bufferhouse` command: parse options, call the library, render.

No SQL and no parsing here. Results go to stdout, everything else to stderr;
library errors are turned into messages and exit codes in one place.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable

import click

import bufferhouse
from bufferhouse.errors import BufferhouseError
from bufferhouse.load import PARALLEL_MIN_BYTES, PARALLEL_MIN_MODULES
from bufferhouse.render import human_bytes
from bufferhouse.schema.warehouse import ENV_DB

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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(bufferhouse.__version__, prog_name="bufferhouse")
def main() -> None:
    """An SQL warehouse for XLA buffer-assignment dumps."""


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--db", default=None, help=DB_HELP)
@click.option(
    "--label", "labels", multiple=True, metavar="KEY=VALUE", help="Label the modules (repeatable)."
)
@click.option("--strict", is_flag=True, help="Stop at the first module that fails.")
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help=(
        "Parser processes (default: all cores; one for fewer than "
        f"{PARALLEL_MIN_MODULES} modules holding less than "
        f"{PARALLEL_MIN_BYTES >> 20} MiB of dumps)."
    ),
)
@click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="Seconds to wait for another process to release the warehouse.",
)
@click.option(
    "--max-bytes",
    type=click.IntRange(min=1),
    default=None,
    help="Skip (as failed) any module with more text than this, after decompression.",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress, only the summary.")
@click.option(
    "--to-parquet",
    "to_parquet",
    type=click.Path(file_okay=False),
    default=None,
    metavar="OUT_DIR",
    help="Write a Parquet dataset (part files) instead of a warehouse; "
    "many machines may write one OUT_DIR at once.",
)
@_handle_errors
def ingest(paths, db, labels, strict, jobs, wait, max_bytes, quiet, to_parquet) -> None:
    """Load XLA dump files or directories into the warehouse.

    PATHS may be dump directories (searched recursively), single
    -buffer-assignment.txt files, or .gz copies of them. Modules already in the
    warehouse are skipped, so re-running on the same tree adds nothing.

    With --to-parquet OUT_DIR the same tables go to a Parquet dataset instead
    (see `bufferhouse attach`); each process writes its own uniquely named
    part files, so shards of a fleet can be parsed on many machines at once.

    Example: bufferhouse ingest dumps/ --db fleet.duckdb --label jax=0.7.2
    """
    if to_parquet is not None and db is not None:
        raise click.UsageError("--db and --to-parquet are exclusive: give one destination")
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

    if to_parquet is not None:
        from bufferhouse.export import ingest_to_parquet

        report = ingest_to_parquet(
            paths,
            to_parquet,
            labels=labels,
            strict=strict,
            jobs=jobs,
            max_bytes=max_bytes,
            progress=progress,
        )
    else:
        report = bufferhouse.ingest(
            paths,
            db,
            labels=labels,
            strict=strict,
            jobs=jobs,
            wait=wait,
            max_bytes=max_bytes,
            progress=progress,
        )
    if interactive:
        click.echo("\r" + " " * 80 + "\r", err=True, nl=False)
    mb = report.bytes_read / 1e6
    rate = mb / report.seconds if report.seconds > 0 else 0.0
    click.echo(
        f"{len(report.loaded)} loaded, {len(report.present)} already present, "
        f"{len(report.failed)} failed; {human_bytes(report.bytes_read)} read in {report.seconds:.1f}s "
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


def _parse_params(pairs: tuple[str, ...]) -> dict[str, str]:
    params = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--param")
        params[key.strip()] = value
    return params


def _emit(table, fmt: str | None, output: str | None, limit: int | None) -> None:
    from bufferhouse.render import render

    if limit is not None:
        table = table.slice(0, limit)
    if fmt is None:
        fmt = (
            "parquet"
            if output and output.endswith(".parquet")
            else ("table" if output is None and sys.stdout.isatty() else "csv")
        )
    if fmt == "parquet" and output is None:
        if sys.stdout.isatty():
            raise click.UsageError("parquet output is binary: pass -o FILE")
        render(table, fmt, sys.stdout.buffer)
    elif output is None:
        render(table, fmt, sys.stdout)
    else:
        opened = False
        try:
            with open(output, "wb") if fmt == "parquet" else open(
                output, "w", encoding="utf-8", newline=""
            ) as f:
                opened = True
                render(table, fmt, f)
        except OSError as exc:  # a full disk, a directory that is not there
            if opened:  # no half-written file stays behind
                with contextlib.suppress(OSError):
                    os.remove(output)
            raise BufferhouseError(f"cannot write {output}: {exc.strerror or exc}") from None
    if output is not None:
        click.echo(f"{table.num_rows} rows -> {output}", err=True)


_FORMAT = click.option(
    "-f",
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json", "markdown", "parquet"]),
    default=None,
    help="Output format (default: table on a terminal, csv otherwise; parquet for -o *.parquet).",
)
_OUTPUT = click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write to FILE instead of stdout.",
)
_LIMIT = click.option(
    "--limit", type=click.IntRange(min=0), default=None, help="Print at most N rows."
)

_IMAGE = click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False),
    help="Image file; .png or .svg chooses the format.",
)


@main.group()
def plot() -> None:
    """Draw one module's memory as PNG or SVG (needs: pip install 'bufferhouse[plot]').

    MODULE is a module name, file stem, module_id or 12-digit hash prefix. A
    name compiled into several modules draws the most recently ingested one and
    says on stderr which others matched.

    Example: bufferhouse plot timeline jit_train_step -o timeline.png
    """


def _plotted(result) -> None:
    note = result.choice.note()
    if note:
        click.echo(f"note: {note}", err=True)
    click.echo(f"wrote {result.path}", err=True)


@plot.command("timeline")
@click.argument("module")
@_IMAGE
@click.option("--db", default=None, help=DB_HELP)
@click.option("--space", type=int, default=0, show_default=True, help="Memory space (color).")
@click.option(
    "--top",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="Largest buffers at the peak to list.",
)
@_handle_errors
def plot_timeline(module, output, db, space, top) -> None:
    """Live bytes over program order, stacked by category, with the heap peak marked.

    Parameters, outputs, constants and thread-local allocations hold their bytes
    throughout; temp bytes rise and fall. Beside the chart: the largest buffers
    live at the peak, with their op_name and size.

    Example: bufferhouse plot timeline jit_train_step -o timeline.svg --space 0
    """
    from bufferhouse import visual

    _plotted(visual.plot_timeline(module, output, db=db, space=space, top=top))


@plot.command("arena")
@click.argument("module")
@_IMAGE
@click.option("--db", default=None, help=DB_HELP)
@click.option(
    "--allocation",
    type=int,
    default=None,
    help="Allocation index (default: the module's largest temp allocation).",
)
@_handle_errors
def plot_arena(module, output, db, allocation) -> None:
    """One allocation as blocks of byte offset x live range: how a temp arena is reused.

    Each value is a rectangle over the steps it is live and the bytes it
    occupies; gaps are fragmentation (see `bufferhouse query fragmentation`).

    Example: bufferhouse plot arena jit_train_step --allocation 4 -o arena.svg
    """
    from bufferhouse import visual

    _plotted(visual.plot_arena(module, output, db=db, allocation=allocation))


@main.command("report")
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False),
    help="HTML file to write.",
)
@click.option("--db", default=None, help=DB_HELP)
@click.option("--label", metavar="KEY=VALUE", default=None, help="Only modules with this label.")
@click.option(
    "--baseline",
    metavar="LABEL|FILE|DIR",
    default=None,
    help="Compare with this run (a label, a warehouse file or a dump tree): changes first.",
)
@click.option(
    "--top", type=click.IntRange(min=1), default=10, show_default=True, help="Modules ranked."
)
@click.option(
    "--modules",
    "sections",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="Top modules that get a section with their timeline.",
)
@click.option(
    "--rows", type=click.IntRange(min=1), default=15, show_default=True, help="Rows per table."
)
@_handle_errors
def report_command(output, db, label, baseline, top, sections, rows) -> None:
    """Write one self-contained HTML report: fleet overview, then the top modules.

    The file opens from disk in any browser, needs no server and makes no
    network requests. Tables sort on a header click; hover a size for its
    exact bytes. Needs: pip install 'bufferhouse[plot]'.

    Example: bufferhouse report -o report.html --label run=nightly --baseline run=previous
    """
    from bufferhouse import visual

    written = visual.write_report(
        output, db=db, label=label, baseline=baseline, top=top, sections=sections, rows=rows
    )
    changes = "" if written.data.changes is None else f", {len(written.data.changes)} changes"
    click.echo(
        f"wrote {written.path} ({human_bytes(written.bytes)}): {written.data.module_count} modules, "
        f"{len(written.data.sections)} module sections{changes}",
        err=True,
    )


@main.group(invoke_without_command=True)
@click.pass_context
def queries(ctx) -> None:
    """List the canned queries, or show one with `queries show NAME`.

    Example: bufferhouse queries show peak-buffers
    """
    if ctx.invoked_subcommand is None:
        from bufferhouse import queries as q

        width = max(len(x.name) for x in q.queries())
        for x in q.queries():
            click.echo(f"{x.name:<{width}}  {x.description}")


@queries.command("show")
@click.argument("name")
@_handle_errors
def queries_show(name: str) -> None:
    """Describe a canned query: parameters, columns, notes and its SQL.

    Example: bufferhouse queries show heap-timeline
    """
    from bufferhouse import queries as q

    x = q.get(name)
    click.echo(f"{x.name}: {x.description}\n")
    click.echo("parameters:" if x.params else "parameters: none")
    for p in x.params:
        click.echo(f"  {p.name} {p.type} = {p.default}: {p.doc}")
    click.echo("\ncolumns:")
    for c, doc in x.columns:
        click.echo(f"  {c}: {doc}")
    for note in x.notes:
        click.echo(f"\nnote: {note}")
    args = ", ".join(f"{p.name} := {p.default}" for p in x.params)
    click.echo(f"\nin the duckdb shell: FROM {x.macro_name}({args})\n")
    click.echo(x.sql)


@main.command()
@click.argument("name")
@click.option(
    "-p",
    "--param",
    "params",
    multiple=True,
    metavar="KEY=VALUE",
    help="Query parameter (repeatable).",
)
@click.option("--db", default=None, help=DB_HELP)
@click.option(
    "--dialect",
    type=click.Choice(["spark", "trino", "bigquery", "postgres"]),
    default=None,
    help="Print the query as SQL for this engine (views inlined, parameters as markers).",
)
@_FORMAT
@_OUTPUT
@_LIMIT
@_handle_errors
def query(name, params, db, dialect, fmt, output, limit) -> None:
    """Run a canned query (see `bufferhouse queries`).

    With --dialect, print the query for another engine instead of running it:
    the views it uses become CTEs and parameters stay markers to bind there.

    Example: bufferhouse query peak-buffers --param module=jit_train_step --format csv -o peak.csv
    """
    if dialect is not None:
        if params:
            raise click.UsageError("--dialect prints the SQL; bind parameters in the engine")
        from bufferhouse.export import transpile

        click.echo(transpile(name, dialect).text(), nl=False)
        return
    table = bufferhouse.query(name, db, **_parse_params(params))
    _emit(table, fmt, output, limit)


@main.command("sql")
@click.argument("text")
@click.option("--db", default=None, help=DB_HELP)
@_FORMAT
@_OUTPUT
@_LIMIT
@_handle_errors
def sql_command(text, db, fmt, output, limit) -> None:
    """Run ad-hoc SQL on the warehouse, read-only, with the same renderers.

    Example: bufferhouse sql "SELECT module_name, total_bytes FROM modules ORDER BY 2 DESC"
    """
    _emit(bufferhouse.sql(text, db), fmt, output, limit)


@main.command("export")
@click.argument("out_dir", type=click.Path(file_okay=False))
@click.option("--db", default=None, help=DB_HELP)
@click.option(
    "--label",
    "labels",
    multiple=True,
    metavar="KEY=VALUE",
    help="Only modules with this label (repeatable: all must match).",
)
@click.option(
    "--tables",
    default=None,
    metavar="A,B",
    help="Only these tables (comma-separated); modules is always written.",
)
@click.option("--overwrite", is_flag=True, help="Replace an earlier export in OUT_DIR.")
@_handle_errors
def export_command(out_dir, db, labels, tables, overwrite) -> None:
    """Write the warehouse as a Parquet dataset: one directory per table.

    zstd Parquet, Hive-partitioned by ingest run (TABLE/run_id=N/), with the
    warehouse's column names, types and docs (also in _schema.json and
    README.md beside the data). The warehouse is opened read-only.

    Example: bufferhouse export out/ --db fleet.duckdb --label run=nightly-1121
    """
    from bufferhouse.export import export_warehouse

    names = [t.strip() for t in tables.split(",") if t.strip()] if tables else None
    report = export_warehouse(out_dir, db, labels=labels, tables=names, overwrite=overwrite)
    rows = sum(report.tables.values())
    click.echo(
        f"{report.modules} modules, {rows} rows in {len(report.tables)} tables, "
        f"{report.files} files ({human_bytes(report.bytes_written)}) in {report.seconds:.1f}s "
        f"-> {report.out_dir}",
        err=True,
    )


@main.command("attach")
@click.argument("source")
@click.option(
    "--db",
    default=None,
    help=f"File to write the views into (default: ${ENV_DB} or ./bufferhouse.duckdb). "
    "Replaces an earlier attach; never a warehouse.",
)
@_handle_errors
def attach_command(source, db) -> None:
    """Make a warehouse of views over a Parquet dataset (a directory, glob or URL).

    Every table becomes a view over the dataset's files (modules written by
    several machines counted once), with the bh_* macros, so every canned
    query and `bufferhouse query --db FILE` work on it as on a warehouse.
    The file holds only views; new part files show up without re-attaching.

    Example: bufferhouse attach out/ --db fleet-views.duckdb
    """
    from bufferhouse.export import attach
    from bufferhouse.schema.warehouse import default_db

    report = attach(source, db or default_db())
    click.echo(f"{report.modules} modules in {report.source} -> {report.db} (views)", err=True)
    if report.empty_tables:
        click.echo(f"no files yet for: {', '.join(report.empty_tables)}", err=True)


@main.command("check")
@click.option("--db", default=None, help=DB_HELP)
@_handle_errors
def check_command(db) -> None:
    """Verify the warehouse: schema version, whole modules, the dumps' own
    invariants recomputed from the tables, orphan rows. Opens it read-only;
    exits 1 when anything is off.

    Example: bufferhouse check --db fleet.duckdb
    """
    from bufferhouse.check import check_warehouse

    report = check_warehouse(db)
    for line in report.lines():
        click.echo(line)
    sys.exit(0 if report.ok else 1)


@main.command("diff")
@click.option(
    "--base",
    required=True,
    metavar="SIDE",
    help="The old run: a label KEY=VALUE[,KEY=VALUE] in --db, a warehouse file, or a dump tree.",
)
@click.option("--head", required=True, metavar="SIDE", help="The new run, given like --base.")
@click.option(
    "--db",
    default=None,
    help=f"Warehouse of the label sides (default: ${ENV_DB} or ./bufferhouse.duckdb).",
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
    help="Exit 1 when a matched module's peak grows by more than this (5%, 10MiB, 1048576).",
)
@click.option(
    "--show",
    type=click.Choice(["changes", "modules", "buffers", "sources"]),
    default=None,
    help="Print this result table instead of the report (default for csv/json/parquet: "
    "changes, or buffers with --module).",
)
@click.option(
    "--top",
    type=click.IntRange(min=0),
    default=25,
    show_default=True,
    help="Rows per table in the report (0: all).",
)
@_FORMAT
@_OUTPUT
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help="Parser processes for dump-tree sides (default: all cores).",
)
@_handle_errors
def diff_command(base, head, db, module, peak, fail_above, show, top, fmt, output, jobs) -> None:
    """Compare two runs module by module: what changed in memory, with a CI gate.

    A side is a label in --db (jax=0.7.2), a warehouse file, or a dump tree
    (ingested into a temporary warehouse). Modules pair up by jit name, then by
    parameter shapes and instructions where a name has several. The table and
    markdown formats print a report (markdown fits a pull-request comment);
    csv, json and parquet print one result table (--show). Exit status: 0, 1
    when --fail-above trips, 2 for usage errors.

    Example: bufferhouse diff --base jax=0.6.2 --head jax=0.7.2 --fail-above 5% --format markdown
    """
    if show in ("buffers", "sources") and module is None:
        raise click.UsageError(f"--show {show} needs --module")
    result = bufferhouse.diff(
        base, head, db, module=module, peak=peak, fail_above=fail_above, jobs=jobs
    )
    for role, side in (("base", result.base), ("head", result.head)):
        click.echo(f"{role}: {side.spec} ({side.kind}, {side.modules} modules)", err=True)
    if fmt is None:
        fmt = (
            "parquet"
            if output and output.endswith(".parquet")
            else ("table" if output is None and sys.stdout.isatty() else "csv")
        )
    if show is None and fmt in ("table", "markdown"):
        text = result.report(fmt, top=top or None)
        if output is None:
            click.echo(text, nl=False)
        else:
            with open(output, "w", encoding="utf-8") as f:
                f.write(text)
            click.echo(f"report -> {output}", err=True)
    else:
        _emit(result.table(show or ("buffers" if module else "changes")), fmt, output, None)
    if result.gate is not None:
        click.echo(result.gate.describe(), err=True)
    sys.exit(1 if result.failed else 0)

