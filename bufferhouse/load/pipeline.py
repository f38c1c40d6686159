"""The ingest loop: discovered modules, parsed (in workers or here), into a sink.

A sink is a `ModuleBuffer`: the warehouse's `ModuleWriter`, or the Parquet
`PartWriter` of `bufferhouse.export`. Both take whole modules and write them a
batch at a time, so every module lands whole or not at all, with one commit per
batch.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import socket
import time
from collections.abc import Callable, Container, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timezone

import duckdb

from bufferhouse.errors import BufferhouseError, UnknownInput, WarehouseError
from bufferhouse.load import file_stats, handoff
from bufferhouse.load.report import IngestReport, ModuleOutcome
from bufferhouse.load.schedule import Plan, plan
from bufferhouse.load.targets import record_targets
from bufferhouse.load.workers import parse_in_workers
from bufferhouse.load.writer import ModuleBuffer, ModuleWriter
from bufferhouse.parse import parse_files, with_programs
from bufferhouse.parse import results as parsed
from bufferhouse.parse.batch import parse_batch
from bufferhouse.parse.discover import LogFile, ModuleFiles, ProfileFile
from bufferhouse.parse.results import ParseResult
from bufferhouse.parse.sources import discover_all
from bufferhouse.parse.text import native
from bufferhouse.schema.warehouse import (
    database_path,
    discard_new_warehouse,
    ensure_schema,
    open_connection,
)
from bufferhouse.version import __version__

Progress = Callable[[ModuleOutcome, int, int], None]

log = logging.getLogger("bufferhouse.ingest")

#: How large the warehouse's write-ahead log may grow during an ingest before
#: DuckDB folds it into the file (a checkpoint); DuckDB's default is 16 MiB.
CHECKPOINT_LOG = "256MiB"


def parse_labels(labels: Iterable[str] | dict[str, str]) -> list[tuple[str, str]]:
    """`key=value` strings (or a dict) as (key, value) pairs; a malformed one is an error."""
    if isinstance(labels, dict):
        return list(labels.items())
    out = []
    for label in labels:
        key, sep, value = label.partition("=")
        if not sep or not key.strip():
            raise BufferhouseError(f"label {label!r} is not of the form key=value")
        out.append((key.strip(), value.strip()))
    return out


def new_run_id() -> int:
    """Microseconds since the epoch: run ids grow with time."""
    return int(datetime.now(timezone.utc).timestamp() * 1_000_000)


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


def ingest_into(
    sink: ModuleBuffer,
    groups: list[ModuleFiles],
    target: str,
    started: float,
    *,
    jobs: int | None = None,
    max_bytes: int | None = None,
    strict: bool = False,
    progress: Progress | None = None,
    rehash: bool = False,
    on_plan: Callable[[Plan], None] | None = None,
) -> IngestReport:
    """The end every ingest shares, whatever the sink: run the batches, time the run."""
    report = IngestReport(
        target, sink.run_id, compiled_reader_missing=without_compiled_reader(groups)
    )
    run_batches(
        groups,
        sink,
        report,
        jobs=jobs,
        max_bytes=max_bytes,
        strict=strict,
        progress=progress,
        rehash=rehash,
        on_plan=on_plan,
    )
    report.seconds = time.monotonic() - started
    return report


def ingest_paths(
    paths: Iterable[str | os.PathLike[str]],
    db: str | os.PathLike[str] | None = None,
    *,
    labels: Iterable[str] | dict[str, str] = (),
    strict: bool = False,
    jobs: int | None = None,
    wait: float = 30.0,
    max_bytes: int | None = None,
    progress: Progress | None = None,
    after_open: Callable[[object], None] | None = None,
    rehash: bool = False,
) -> IngestReport:
    """Load every module under `paths` into the warehouse `db`.

    Failing modules are reported (and recorded in `diagnostics`) while the rest
    of the batch loads; with `strict` the ingest stops at the first failure.
    A module whose files show the size, mtime and inode they had when last read is
    known unread (load/file_stats.py); `rehash` reads and hashes every one.
    """
    started = time.monotonic()
    paths = [os.fspath(p) for p in paths]
    label_pairs = parse_labels(labels)
    path = database_path(db)
    groups: list[ModuleFiles | LogFile | ProfileFile] = discover_all(paths)
    if not groups and not os.path.exists(path):
        # Nothing to read: no empty warehouse is left behind (the CLI says nothing was found).
        return IngestReport(path, new_run_id(), seconds=time.monotonic() - started)
    created = not os.path.exists(path)
    con = open_connection(path, read_only=False, wait=wait)
    try:
        ensure_schema(con, path)
        if after_open is not None:
            after_open(con)
        run_id = new_run_id()
        writer = ModuleWriter(
            con, run_id, label_pairs, run_row=run_record(run_id, paths, label_pairs)
        )
        # DuckDB checkpoints at every commit whose log passes 16 MiB: with batches of
        # ~2M rows that was every batch, each rewriting the tables' unfinished row groups
        # (ten 21 MB modules written one per transaction: 6.3 CPU-s, 3.9 with this; one
        # batch: 2.9). The log may grow to CHECKPOINT_LOG before it is folded in, and the
        # last of it is folded in when the ingest closes the warehouse.
        con.execute(f"SET checkpoint_threshold = '{CHECKPOINT_LOG}'")
        report = ingest_into(
            writer,
            groups,
            path,
            started,
            jobs=jobs,
            max_bytes=max_bytes,
            strict=strict,
            progress=progress,
            rehash=rehash,
            on_plan=functools.partial(_duckdb_threads, con),
        )
        record_targets(con)  # the files beside each new module name its target
    except duckdb.Error as exc:  # a write outside a module batch failed (disk full, I/O)
        raise WarehouseError(
            f"cannot write to warehouse {path}: {exc}. Modules committed before are intact."
        ) from None
    finally:
        con.close()
    if created and report.found_nothing:
        # Only logs without OOM messages (a wrong directory, a venv): nothing found,
        # and no warehouse left behind for it, as when nothing is found at all.
        discard_new_warehouse(path)
    return report


def _duckdb_threads(con: duckdb.DuckDBPyConnection, run_plan: Plan) -> None:
    """Parsing keeps the plan's parser cores busy while DuckDB inserts and commits: its
    threads get the rest. Measured on 2 cores (a 200 MB fleet): one DuckDB thread writes
    with 30% less CPU than two, and no slower."""
    con.execute(f"SET threads = {max(1, (os.cpu_count() or 1) - run_plan.parsers)}")


def without_compiled_reader(groups: Iterable[object]) -> str | None:
    """native.MISSING if the run has text dumps to read, after saying once what that
    costs: a warning, so that it reaches stderr from the CLI and, unless logging is set
    up otherwise, from the API too."""
    missing = native.MISSING
    if missing is None or not any(
        isinstance(g, ModuleFiles) and g.buffer_assignment for g in groups
    ):
        return None
    log.warning(
        "%s, so text dumps are read by the line reader: several times slower on large "
        "dumps. To build it, install bufferhouse again where a C compiler is present "
        "(docs/native.md).",
        missing,
    )
    return missing


def run_batches(
    groups: list[ModuleFiles],
    writer: ModuleBuffer,
    report: IngestReport,
    *,
    jobs: int | None = None,
    max_bytes: int | None = None,
    strict: bool = False,
    progress: Progress | None = None,
    rehash: bool = False,
    on_plan: Callable[[Plan], None] | None = None,
) -> None:
    """Parse `groups` (in worker processes when jobs > 1) into `writer`, batch by batch.

    The one ingest loop, whatever the sink: modules whose content hash the
    sink holds (`writer.module_ids`, this run's included) are not parsed again
    (only labelled), every outcome lands in `report`, and a loaded module is
    reported once its batch is written. A full batch is written on a thread of
    its own while the next one fills (DuckDB and Parquet writes release the
    GIL), so parsing and writing overlap; with parser processes, an idle
    writer takes a batch as soon as the sink finds it worth a transaction
    (`worth_writing`: a Parquet sink at an eighth full, the warehouse only
    full). Batches are written one at a time, in order, and at most two are
    held. The run is planned once, from the groups left to read after the stat check;
    `on_plan` sees the plan before the first module is parsed.
    """
    handoff.remove_leftovers()
    known = writer.module_ids
    unread, groups_read, looked = _by_file_stats(groups, writer, rehash, max_bytes)
    run_plan = plan(groups_read, jobs)
    if on_plan is not None:
        on_plan(run_plan)
    jobs = run_plan.parsers
    if jobs == 1:
        results: Iterable[tuple[ModuleFiles, ParseResult]] = _parse_planned(
            run_plan, known, max_bytes
        )
    elif groups_read:
        results = parse_in_workers(list(run_plan.order), jobs, frozenset(known), max_bytes)
    else:
        results = iter(())
    results = itertools.chain(unread, results)
    waiting: list[ModuleOutcome] = []
    writing: tuple[Future[int], list[ModuleOutcome]] | None = None

    def report_outcome(outcome: ModuleOutcome) -> None:
        if outcome.status == "quiet":  # a log with nothing new: quietly, but counted
            report.logs_skipped += 1
            report.skipped_bytes += outcome.bytes_read
            report.events_skipped += outcome.events_present
        else:
            report.outcomes.append(outcome)
        if progress is not None:
            progress(outcome, len(report.outcomes) + report.logs_skipped, len(groups))

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

    def writer_idle() -> bool:
        return writing is None or writing[0].done()

    with ThreadPoolExecutor(1, thread_name_prefix="bufferhouse-writer") as thread:
        try:
            for files, result in _with_companions(results):
                if strict:
                    result = refuse_unknown(result)
                outcome = _stage(writer, files, result)
                _record_files(writer, looked.pop(id(files), None), result, outcome)
                if outcome.status in ("loaded", "events", "snapshot"):
                    waiting.append(outcome)
                else:
                    report_outcome(outcome)
                if writer.full or (jobs > 1 and writer.worth_writing and writer_idle()):
                    flush(thread)
                if strict and outcome.status == "failed":
                    written = len(writing[1]) if writing is not None else 0
                    seen = len(report.outcomes) + report.logs_skipped + written + len(waiting)
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


def _parse_planned(
    run_plan: Plan, known: Container[str], max_bytes: int | None
) -> Iterator[tuple[ModuleFiles, ParseResult]]:
    """Each group of the plan with its result, in the plan's order, parsed here: a unit of
    one alone (with the plan's threads), a unit of many small modules as one batch."""
    groups = with_programs(run_plan.order)
    for count in run_plan.units:
        unit = list(itertools.islice(groups, count))
        if count == 1:
            (files, program), threads = unit[0], run_plan.threads
            yield files, parse_files(files, known, max_bytes, threads=threads, program=program)
        else:  # batchable: text dumps alone, no program
            batch = [files for files, _ in unit]
            yield from zip(batch, parse_batch(batch, known, max_bytes))


def refuse_unknown(result: ParseResult) -> ParseResult:
    """Under --strict, a module that loaded with input this release does not know (an
    UnknownInput warning) fails with that warning as its error."""
    if not isinstance(result, parsed.ParsedModule):
        return result
    unknown = next((w for w in result.warnings if isinstance(w, UnknownInput)), None)
    if unknown is None:
        return result
    error = UnknownInput(
        unknown.path, unknown.line, unknown.message + " (refused: --strict)", unknown.text
    )
    return parsed.Failed(
        content_hash=result.content_hash, bytes_read=result.bytes_read, error=error
    )


def _by_file_stats(
    groups: list, writer: ModuleBuffer, rehash: bool, max_bytes: int | None
) -> tuple[list[tuple[object, ParseResult]], list, dict[int, file_stats.Looked]]:
    """(the groups known by their files' stats, each with its result; the groups to
    read; the stats taken of those, by id). `rehash`, or a sink that keeps no stats:
    every group is read (with `rehash`, its stats are taken to be recorded anew)."""
    if not writer.keeps_file_stats:
        return [], groups, {}
    if rehash:
        looks = ((g, file_stats.look(g)) for g in groups)
        return [], groups, {id(g): s for g, s in looks if s is not None}
    return file_stats.recognise(groups, writer.held_files, writer.module_ids, max_bytes)


def _record_files(
    writer: ModuleBuffer,
    looked: file_stats.Looked | None,
    result: ParseResult,
    outcome: ModuleOutcome,
) -> None:
    """Record how a module's files looked when read, for the next ingest to know them
    unread: a module loaded, or present by its content hash (not one held under its
    dump files alone, whose warning is said again at every ingest)."""
    if looked is None or not looked.settled:
        return
    if not isinstance(result, (parsed.ParsedModule, parsed.Present)):
        return
    if outcome.status == "loaded" or (outcome.status == "present" and not outcome.warnings):
        writer.record_files(
            file_stats.record_row(looked, result.content_hash, result.bytes_read, writer.run_id)
        )


def _with_companions(
    results: Iterable[tuple[ModuleFiles, ParseResult]],
) -> Iterator[tuple[ModuleFiles, ParseResult]]:
    """Each result, then the second module its group held (a proto of another compile
    beside a text dump: parse._split), as a result of its own."""
    for files, result in results:
        yield files, result
        if isinstance(result, parsed.ParsedModule) and result.companion is not None:
            other, result.companion = result.companion, None
            yield other


def _stage(
    writer: ModuleBuffer, files: ModuleFiles | LogFile | ProfileFile, result: ParseResult
) -> ModuleOutcome:
    """Queue a parsed module (or a log's OOM events, a snapshot) for the next batch, or
    record why it is not loaded."""
    match result:
        case parsed.Skipped(error=error, bytes_read=nbytes):
            return ModuleOutcome(files, "skipped", error=error, bytes_read=nbytes)
        case parsed.Quiet(bytes_read=nbytes):  # a log without OOM messages: quietly nothing
            return ModuleOutcome(files, "quiet", bytes_read=nbytes)
        case parsed.Failed(error=error, bytes_read=nbytes):
            writer.add_failure(error)
            return ModuleOutcome(files, "failed", error=error, bytes_read=nbytes)
        case parsed.ParsedEvents(events=events, bytes_read=nbytes):
            added, present = writer.add_events(events)
            warnings = [w for ordinal in added for w in events.problems[ordinal]]
            return ModuleOutcome(
                files,
                "events" if added else "quiet",
                warnings=[*events.file_problems, *warnings] if added else [],
                bytes_read=nbytes,
                events_loaded=len(added),
                events_present=present,
            )
        case parsed.ParsedSnapshot(snapshot=snapshot, bytes_read=nbytes):
            added = writer.add_snapshot(snapshot)
            status = "snapshot" if added is not None else "present"
            return ModuleOutcome(files, status, bytes_read=nbytes)
        case parsed.Present():
            return _labelled(writer, files, result)
        case parsed.ParsedModule() if result.content_hash in writer.module_ids:
            return _labelled(writer, files, result)  # loaded from another file this run
        case parsed.ParsedModule(row=row, tables=tables, warnings=warnings, bytes_read=nbytes):
            module_id = writer.add(row, tables, warnings)
            return ModuleOutcome(files, "loaded", module_id, warnings=warnings, bytes_read=nbytes)
    raise TypeError(f"not a parse result: {result!r}")


def _labelled(
    writer: ModuleBuffer, files: ModuleFiles, result: parsed.Present | parsed.ParsedModule
) -> ModuleOutcome:
    """The same content seen again (this run or an earlier one): only new labels land."""
    return ModuleOutcome(
        files,
        "present",
        writer.add_labels(result.content_hash),
        warnings=result.warnings,
        bytes_read=result.bytes_read,
        repeat=result.content_hash not in writer.held_before,
    )
