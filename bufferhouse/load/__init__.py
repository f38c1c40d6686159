"""Load stage: the ingest pipeline, from paths to modules in the warehouse.

Discovery groups files into modules; parsing (the parse stage) runs in worker
processes, one module per task; the parent process is the single DuckDB
writer. It commits modules in batches, each module whole or not at all (a
batch holds only whole modules, one transaction per batch). A module whose content
hash is already in the warehouse is not parsed again. Workers do not know
module ids: the writer assigns them (growing in ingest order) as it takes
each module.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import (
    FIRST_COMPLETED,
    Future,
    ProcessPoolExecutor,
    ThreadPoolExecutor,
    wait,
)
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from datetime import datetime, timezone

import duckdb

from bufferhouse.errors import BufferhouseError, DumpError, WarehouseError
from bufferhouse.load import handoff
from bufferhouse.load.writer import ModuleBuffer, ModuleWriter
from bufferhouse.parse import ParseResult, parse_files
from bufferhouse.parse.discover import ModuleFiles, discover
from bufferhouse.parse.reader import stored_size
from bufferhouse.schema.warehouse import database_path, ensure_schema, open_connection
from bufferhouse.version import __version__

__all__ = [
    "IngestReport",
    "ModuleOutcome",
    "discover",
    "ingest_paths",
    "parse_files",
    "parse_in_workers",
    "run_batches",
    "run_record",
]


@dataclass
class ModuleOutcome:
    """What happened to one module of the batch."""

    files: ModuleFiles
    status: str  # loaded | present | failed
    module_id: int | None = None
    error: DumpError | None = None
    warnings: list[DumpError] = field(default_factory=list)
    bytes_read: int = 0


@dataclass
class IngestReport:
    db: str
    run_id: int
    outcomes: list[ModuleOutcome] = field(default_factory=list)
    seconds: float = 0.0
    stopped_early: bool = False

    def _with(self, status: str) -> list[ModuleOutcome]:
        return [o for o in self.outcomes if o.status == status]

    @property
    def loaded(self) -> list[ModuleOutcome]:
        return self._with("loaded")

    @property
    def present(self) -> list[ModuleOutcome]:
        return self._with("present")

    @property
    def failed(self) -> list[ModuleOutcome]:
        return self._with("failed")

    @property
    def bytes_read(self) -> int:
        return sum(o.bytes_read for o in self.outcomes)

    @property
    def ok(self) -> bool:
        return not self.failed and not self.stopped_early


_known: frozenset[str] = frozenset()
_max_bytes: int | None = None
_handoff: str | None = None


def _init_worker(known: frozenset[str], max_bytes: int | None, directory: str | None) -> None:
    global _known, _max_bytes, _handoff
    _known, _max_bytes, _handoff = known, max_bytes, directory


def _work(files: ModuleFiles) -> ParseResult:
    result = parse_files(files, _known, _max_bytes)
    if result.tables is not None:
        result.tables = handoff.ship(result.tables, _handoff)
    return result


def parse_in_workers(
    groups: list[ModuleFiles], jobs: int, known: frozenset[str], max_bytes: int | None
) -> Iterator[tuple[ModuleFiles, ParseResult]]:
    """Parse in worker processes, yielding each result as soon as it is ready.

    Results come in the order the modules finish, not the input order: with
    input order a large module at the head of the queue kept the other
    workers idle once the small modules behind it were done. The largest
    modules are handed out first, so the run does not end with one worker
    parsing a large module while the others wait (and its last batch, written
    after all parsing, holds small modules). At most
    2 x jobs modules are in flight, so memory stays bounded however large the
    tree. A worker that dies (out of memory, a crash in a native library)
    fails only the module it was parsing: the pool is rebuilt and each module
    the death took down is retried alone once, to tell the culprit from its
    neighbours.
    """
    ctx = multiprocessing.get_context("forkserver" if os.name != "nt" else "spawn")
    directory = handoff.make_directory()

    def new_pool(workers: int) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            workers,
            mp_context=ctx,
            initializer=_init_worker,
            initargs=(known, max_bytes, directory),
        )

    def received(result: ParseResult) -> ParseResult:
        if result.tables is not None:
            result.tables = handoff.receive(result.tables)
        return result

    pool = new_pool(jobs)
    pending: dict[Future[ParseResult], ModuleFiles] = {}  # in submission order
    todo = iter(largest_first(groups))
    try:
        while True:
            while len(pending) < 2 * jobs:
                nxt = next(todo, None)
                if nxt is None:
                    break
                pending[pool.submit(_work, nxt)] = nxt
            if not pending:
                return
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            broken = None
            for future in [f for f in pending if f in done]:
                if isinstance(future.exception(), BrokenProcessPool):
                    broken = broken or future
                else:
                    yield pending.pop(future), received(future.result())
            if broken is None:
                continue
            # The pool is gone, and every module it held with it: the first is parsed
            # alone (if it killed the worker, it fails alone), the rest in a new pool.
            pool.shutdown(wait=False, cancel_futures=True)
            files = pending.pop(broken)
            yield files, received(_parse_alone(new_pool, files))
            pool = new_pool(jobs)
            pending = {pool.submit(_work, f): f for f in pending.values()}
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        handoff.remove_directory(directory)  # with the files of results never read


def _parse_alone(new_pool: Callable[[int], ProcessPoolExecutor], files: ModuleFiles) -> ParseResult:
    """Parse one module in a pool of its own; a second death fails only this module."""
    alone = new_pool(1)
    try:
        return alone.submit(_work, files).result()
    except BrokenProcessPool:
        return ParseResult(
            "failed",
            error=DumpError(
                files.display, 0, "the parser process died (out of memory?); module skipped"
            ),
        )
    finally:
        alone.shutdown(wait=False, cancel_futures=True)


def parse_labels(labels: Iterable[str]) -> list[tuple[str, str]]:
    out = []
    for label in labels:
        key, sep, value = label.partition("=")
        if not sep or not key.strip():
            raise BufferhouseError(f"label {label!r} is not of the form key=value")
        out.append((key.strip(), value.strip()))
    return out


def ingest_paths(
    paths: Iterable[str | os.PathLike[str]],
    db: str | os.PathLike[str] | None = None,
    *,
    labels: Iterable[str] | dict[str, str] = (),
    strict: bool = False,
    jobs: int | None = None,
    wait: float = 30.0,
    max_bytes: int | None = None,
    progress: Callable[[ModuleOutcome, int, int], None] | None = None,
    after_open: Callable[[object], None] | None = None,
) -> IngestReport:
    """Load every module under `paths` into the warehouse `db`.

    Failing modules are reported (and recorded in `diagnostics`) while the rest
    of the batch loads; with `strict` the ingest stops at the first failure.
    """
    started = time.monotonic()
    paths = [os.fspath(p) for p in paths]
    label_pairs = list(labels.items()) if isinstance(labels, dict) else parse_labels(labels)
    path = database_path(db)
    groups = discover(paths)
    con = open_connection(path, read_only=False, wait=wait)
    try:
        ensure_schema(con, path)
        if after_open is not None:
            after_open(con)
        run_id = int(datetime.now(timezone.utc).timestamp() * 1_000_000)
        report = IngestReport(path, run_id)
        run_row = run_record(run_id, paths, label_pairs)
        writer = ModuleWriter(con, run_id, label_pairs, run_row=run_row)
        jobs = parser_processes(groups, jobs)
        # Parsing keeps `jobs` cores busy while DuckDB inserts and commits: its threads get
        # the rest. Measured on 2 cores (a 200 MB fleet): one DuckDB thread writes with
        # 30% less CPU than two, and no slower.
        con.execute(f"SET threads = {max(1, (os.cpu_count() or 1) - jobs)}")
        run_batches(
            groups,
            writer,
            report,
            jobs=jobs,
            max_bytes=max_bytes,
            strict=strict,
            progress=progress,
        )
        report.seconds = time.monotonic() - started
        return report
    except duckdb.Error as exc:  # a write outside a module batch failed (disk full, I/O)
        raise WarehouseError(
            f"cannot write to warehouse {path}: {exc}. Modules committed before are intact."
        ) from None
    finally:
        con.close()


#: Below this many bytes of dump files and PARALLEL_MIN_MODULES modules, the
#: default is one process (see run_batches).
PARALLEL_MIN_BYTES = 32 * 1024 * 1024
#: A small module costs a parser ~10 ms of fixed work, so many small ones repay
#: the second the worker processes take to start (1,134 corpus modules, 22 MB:
#: 14.8-17.6 s in one process, 11.3-12.6 s in two).
PARALLEL_MIN_MODULES = 256


def parser_processes(groups: list[ModuleFiles], jobs: int | None) -> int:
    """How many processes parse `groups`: `jobs`, or by default all cores (one for small
    inputs: worker processes take about a second to start), never more than modules."""
    if jobs is None:
        small = len(groups) < PARALLEL_MIN_MODULES and _input_bytes(groups) < PARALLEL_MIN_BYTES
        jobs = 1 if small else os.cpu_count() or 1
    return max(1, min(jobs, len(groups) or 1))


def largest_first(groups: list[ModuleFiles]) -> list[ModuleFiles]:
    """The order modules are parsed and written in, by one process or many.

    With many, it keeps the run from ending on one large module. With one or
    many, the batches that follow the large modules are small, and the last
    transaction, whose rewritten row groups no later write reuses, frees
    little: on the 200 MB bench fleet, 46 MB of warehouse instead of 71 MB
    in input order (374 free blocks of 1,078). Stable: ties keep input order.
    """
    return sorted(groups, key=_input_bytes_of, reverse=True)


def _input_bytes(groups: list[ModuleFiles]) -> int:
    return sum(_input_bytes_of(g) for g in groups)


def _input_bytes_of(group: ModuleFiles) -> int:
    """About how many bytes of text a module's dump files hold (0 for any it cannot stat)."""
    total = 0
    for _, path in group.dump_files():
        with contextlib.suppress(OSError):
            size = stored_size(path)
            total += size * 8 if path.endswith(".gz") else size  # gz: about 8x text
    return total


def run_record(run_id: int, roots: list[str], labels: list[tuple[str, str]]) -> dict:
    """The `runs` row of an ingest: when, from where, with which labels, by what."""
    return {
        "run_id": run_id,
        "started_at": datetime.now(timezone.utc).replace(tzinfo=None),
        "roots": roots,
        "labels": [f"{k}={v}" for k, v in labels],
        "host": socket.gethostname(),
        "tool_version": __version__,
    }


def run_batches(
    groups: list[ModuleFiles],
    writer: ModuleBuffer,
    report: IngestReport,
    *,
    jobs: int | None = None,
    max_bytes: int | None = None,
    strict: bool = False,
    progress: Callable[[ModuleOutcome, int, int], None] | None = None,
) -> None:
    """Parse `groups` (in worker processes when jobs > 1) into `writer`, batch by batch.

    The one ingest loop, whatever the sink: modules whose content hash the
    sink holds (`writer.module_ids`, this run's included) are not parsed again
    (only labelled), every outcome lands in `report`, and a loaded module is
    reported once its batch is written. A full batch is written on a thread of
    its own while the next one fills (DuckDB and Parquet writes release the
    GIL), so parsing and writing overlap; batches are written one at a time,
    in order, and at most two are held.
    """
    known = writer.module_ids
    jobs = parser_processes(groups, jobs)
    if jobs == 1:
        results: Iterable[tuple[ModuleFiles, ParseResult]] = (
            (g, parse_files(g, known, max_bytes)) for g in largest_first(groups)
        )
    else:
        results = parse_in_workers(groups, jobs, frozenset(known), max_bytes)
    waiting: list[ModuleOutcome] = []
    writing: tuple[Future[int], list[ModuleOutcome]] | None = None

    def report_outcome(outcome: ModuleOutcome) -> None:
        report.outcomes.append(outcome)
        if progress is not None:
            progress(outcome, len(report.outcomes), len(groups))

    def settle() -> None:
        """Wait for the batch being written (its error is raised here); report its modules."""
        nonlocal writing
        if writing is None:
            return
        future, outcomes = writing
        writing = None
        future.result()
        for outcome in outcomes:
            report_outcome(outcome)

    def flush(thread: ThreadPoolExecutor) -> None:
        nonlocal writing
        batch, outcomes = writer.take(), waiting[:]
        waiting.clear()
        settle()
        writing = (thread.submit(writer.write, batch), outcomes)

    with ThreadPoolExecutor(1, thread_name_prefix="bufferhouse-writer") as thread:
        try:
            for files, result in results:
                outcome = _stage(writer, files, result)
                if outcome.status == "loaded":
                    waiting.append(outcome)
                else:
                    report_outcome(outcome)
                if writer.full:
                    flush(thread)
                if strict and outcome.status == "failed":
                    written = len(writing[1]) if writing is not None else 0
                    seen = len(report.outcomes) + written + len(waiting)
                    report.stopped_early = seen < len(groups)
                    break
            flush(thread)
            settle()
        finally:
            close = getattr(results, "close", None)
            if close is not None:
                close()
            if writing is not None:  # leaving on an error: let the write finish, quietly
                with contextlib.suppress(Exception):
                    writing[0].result()


def _stage(writer: ModuleBuffer, files: ModuleFiles, result: ParseResult) -> ModuleOutcome:
    """Queue a parsed module for the next batch (or record why it is not loaded)."""
    if result.status == "failed":
        assert result.error is not None
        writer.add_failure(result.error)
        return ModuleOutcome(files, "failed", error=result.error, bytes_read=result.bytes_read)
    assert result.content_hash is not None
    if result.status == "present" or result.content_hash in writer.module_ids:
        # The same content seen again (this run or an earlier one): only new labels land.
        module_id = writer.add_labels(result.content_hash)
        return ModuleOutcome(files, "present", module_id, bytes_read=result.bytes_read)
    assert result.module_row is not None and result.tables is not None
    module_id = writer.add(result.module_row, result.tables, result.warnings)
    return ModuleOutcome(
        files, "loaded", module_id, warnings=result.warnings, bytes_read=result.bytes_read
    )
