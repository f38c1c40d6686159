"""`bufferhouse ingest`: dumps into a warehouse (or a Parquet dataset)."""

from __future__ import annotations

import shutil
import sys
import threading
import time

import click

import bufferhouse
from bufferhouse.api import require_paths
from bufferhouse.cli.options import DATA, check_labels, db_option, handle_errors, wait_option
from bufferhouse.load import PARALLEL_MIN_BYTES, PARALLEL_MIN_MODULES, IngestReport
from bufferhouse.load.workers import without_pandas
from bufferhouse.render import human_bytes


@click.command("ingest")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@db_option()
@click.option(
    "--label",
    "labels",
    multiple=True,
    metavar="KEY=VALUE",
    callback=check_labels,
    help="Label the modules (repeatable).",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Stop at the first module that fails; input this release does not know"
    " (a newer XLA's attribute or line) fails its module too.",
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help=(
        "Parser processes (default: one per core but the writer's; one on two cores; "
        "one for fewer than "
        f"{PARALLEL_MIN_MODULES} modules holding less than "
        f"{PARALLEL_MIN_BYTES >> 20} MiB of dumps)."
    ),
)
@wait_option
@click.option(
    "--max-bytes",
    type=click.IntRange(min=1),
    default=None,
    help="Skip (as failed) any module with more text than this, after decompression.",
)
@click.option(
    "--rehash",
    is_flag=True,
    help="Read and hash every module, even those whose files show the size, mtime and "
    "inode they had when last read (which are otherwise known without being read).",
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
@handle_errors
def ingest_command(
    paths, db, labels, strict, jobs, wait, max_bytes, rehash, quiet, to_parquet
) -> None:
    """Load XLA dump files or directories into the warehouse.

    PATHS may be directories (searched recursively) or single files, plain or
    .gz: buffer-assignment text dumps (--xla_dump_to), HloProto dumps
    (*.hlo.pb, --xla_dump_hlo_as_proto), XProf profiles (*.xplane.pb) and job
    logs. Modules already in the warehouse are skipped, so re-running on the
    same tree adds nothing; a module whose files show the size, mtime and inode
    they had when last read is known without reading them (--rehash reads all).

    Logs (.log, .txt, .out, .err, plain or .gz) are scanned for out-of-memory
    messages (RESOURCE_EXHAUSTED): each loads as an OOM event with its listed
    buffers (tables oom_events, oom_buffers; queries oom-*). An event already
    in the warehouse is not added twice.

    With --to-parquet OUT_DIR the same tables go to a Parquet dataset instead
    (see `bufferhouse attach`); each process writes its own uniquely named
    part files, so shards of a fleet can be parsed on many machines at once.

    Example: bufferhouse ingest dumps/ --db fleet.duckdb --label jax=0.7.2
    """
    if to_parquet is not None and db is not None:
        raise click.UsageError("--db and --to-parquet are exclusive: give one destination")
    options = {"labels": labels, "strict": strict, "jobs": jobs, "max_bytes": max_bytes}
    without_pandas()  # this process ends with the command: pyarrow need not import it
    with Progress(quiet=quiet, interactive=sys.stderr.isatty() and not quiet) as progress:
        if to_parquet is not None:
            paths = require_paths(paths)
            from bufferhouse.export import ingest_to_parquet  # pyarrow.dataset: only when asked

            report = ingest_to_parquet(paths, to_parquet, progress=progress, **options)
        else:
            report = bufferhouse.ingest(
                paths, db, wait=wait, progress=progress, rehash=rehash, **options
            )
    if report.found_nothing:
        # A wrong directory, most likely: say so (no summary of nothing), let a script notice.
        click.echo(
            "bufferhouse: error: no XLA dump files or OOM messages found under "
            f"{', '.join(map(str, paths))} "
            "(directories are searched recursively)",
            err=True,
        )
        sys.exit(DATA)
    summarize(report, labels)
    sys.exit(0 if report.ok else 1)


class Progress:
    """The progress callback, and on a terminal a status line redrawn twice a second:
    modules done, bytes read and the rate, the time spent, the last module. The
    clock keeps moving while one large module parses (its bytes count once it is
    read: the parser reports whole modules)."""

    TICK = 0.5

    def __init__(self, quiet: bool, interactive: bool):
        self.quiet, self.interactive = quiet, interactive
        self.done = self.total = self.bytes = 0
        self.stem = ""
        self.started = time.monotonic()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.ticker = threading.Thread(target=self._tick, daemon=True)

    def __enter__(self) -> Progress:
        if self.interactive:
            self.ticker.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        if self.interactive:
            self.ticker.join()
            click.echo("\r" + " " * self.width() + "\r", err=True, nl=False)

    @staticmethod
    def width() -> int:
        return max(40, shutil.get_terminal_size().columns - 1)

    def line(self) -> str:
        seconds = time.monotonic() - self.started
        rate = self.bytes / 1e6 / seconds if seconds > 0 else 0.0
        head = (
            f"[{self.done}/{self.total or '?'}] {human_bytes(self.bytes)} read, "
            f"{rate:.1f} MB/s, {seconds:.0f}s"
        )
        return f"{head}  {self.stem}"[: self.width()]

    def _draw(self) -> None:
        click.echo(f"\r{self.line():<{self.width()}}", err=True, nl=False)

    def _tick(self) -> None:
        while not self.stop.wait(self.TICK):
            with self.lock:
                self._draw()

    def __call__(self, outcome, done: int, total: int) -> None:
        with self.lock:
            self.done, self.total = done, total
            self.bytes += outcome.bytes_read
            self.stem = outcome.files.stem
            # Failures are listed once, in the summary (summarize).
            notes = [] if self.quiet else [f"warning: {w.describe()}" for w in outcome.warnings]
            if notes and self.interactive:
                click.echo("\r" + " " * self.width() + "\r", err=True, nl=False)
            for note in notes:
                click.echo(note, err=True)
            if self.interactive:
                self._draw()
            elif not self.quiet and done % 500 == 0:
                click.echo(self.line(), err=True)


def summarize(report: IngestReport, labels: tuple[str, ...] = ()) -> None:
    """The closing lines on stderr: counts, bytes and rate, each failure."""
    click.echo(report.summary(labels), err=True)
    if report.failed:
        click.echo("failures (first error of each module):", err=True)
        for o in report.failed:
            click.echo(f"  {o.error.describe() if o.error else o.files.display}", err=True)
    others = [
        o
        for r, found in sorted(report.skipped_by_reason().items())
        if "HloProto" not in r
        for o in found
    ]
    if others:  # a profile passed over says so, by name (HloProtos before optimizations
        # are one per module jax compiles: counted, not listed)
        click.echo("skipped (not read as memory data):", err=True)
        for o in others:
            click.echo(f"  {o.error.describe() if o.error else o.files.display}", err=True)
    if report.stopped_early:
        click.echo("stopped at the first failure (--strict)", err=True)
