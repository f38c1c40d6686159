"""The checks, one function each: run their statements (check/sql/*.sql), word the problems.

Each returns the problems it found as `Problem`s; `_CHECKS` at the end is the
order `check_warehouse` runs them in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import duckdb

from bufferhouse.parse.oom import SIGNED_FIGURES
from bufferhouse.queries import installed_names, sql_files
from bufferhouse.schema import DERIVED_TABLES, MODULE_TABLES, TABLES, quote_identifier
from bufferhouse.schema.derive import STATEMENTS, module_ranges
from bufferhouse.schema.invariants import INVARIANTS
from bufferhouse.schema.invariants import run as run_invariant


@dataclass(frozen=True)
class Problem:
    """One thing that is off: which check found it, about which module, what."""

    check: str
    message: str
    module_id: int | None = None


def statements() -> dict:
    """The documented statements of the checks, by name."""
    return sql_files("bufferhouse.check", "sql", "check")


def rows(con: duckdb.DuckDBPyConnection, name: str, **params: object) -> list[tuple]:
    """The rows of the check statement `name`, with its parameters bound."""
    return con.execute(statements()[name].sql, params).fetchall()


_LABELS = next(t for t in TABLES if t.name == "labels")
_MODULES = next(t for t in TABLES if t.name == "modules")


def _row_counts(con: duckdb.DuckDBPyConnection) -> list[Problem]:
    """Each module's recorded row count per table equals the rows it has (whole modules)."""
    expected = sorted(t.name for t in MODULE_TABLES)
    problems = [
        Problem("modules complete", f"row_counts records tables {keys}, expected {expected}", mid)
        for mid, keys in rows(con, "row-count-tables", expected=expected)
    ]
    for table in MODULE_TABLES:
        problems += [
            Problem(
                "modules complete",
                f"{table.name}: {actual} rows, but {recorded} were written at ingest",
                mid,
            )
            for mid, recorded, actual in rows(con, "row-counts", table_name=table.name)
        ]
    problems += [
        Problem("modules complete", f"modules.{what} is {recorded} but {actual} rows", mid)
        for mid, what, recorded, actual in rows(con, "module-counts")
    ]
    return problems


def _totals(con: duckdb.DuckDBPyConnection) -> list[Problem]:
    """`Total bytes used` == the sum of the allocation sizes."""
    return [
        Problem("total bytes", f"total_bytes {total} but the allocations add up to {actual}", mid)
        for mid, total, actual in rows(con, "total-bytes")
    ]


def _invariants(check: str) -> Callable[[duckdb.DuckDBPyConnection], list[Problem]]:
    """The structural invariants reported under `check` (schema/invariants/*.sql): the
    same statements the proto reader runs at ingest."""
    mine = [inv for inv in INVARIANTS if inv.check == check]

    def run_them(con: duckdb.DuckDBPyConnection) -> list[Problem]:
        return [
            Problem(check, v.problem, v.module_id)
            for lo, hi in module_ranges(con)
            for inv in mine
            for v in run_invariant(con, inv, lo, hi)
        ]

    return run_them


def _peak_list(con: duckdb.DuckDBPyConnection) -> list[Problem]:
    """The printed peak list is exactly the values live at the printed peak time,
    its cumulative column is the running sum, and logical_peak_bytes is its sum."""
    problems = [
        Problem("peak list", f"{instruction}{index}: {side}", mid)
        for mid, side, instruction, index in rows(con, "peak-list-members")
    ]
    problems += [
        Problem(
            "peak list",
            f"peak entry {ordinal}: cumulative {cumulative} bytes, running sum {running}",
            mid,
        )
        for mid, ordinal, cumulative, running in rows(con, "peak-list-running")
    ]
    problems += [
        Problem(
            "peak list", f"logical_peak_bytes {peak} but the peak list adds up to {printed}", mid
        )
        for mid, peak, printed in rows(con, "peak-list-sum")
    ]
    return problems


def _schedule(con: duckdb.DuckDBPyConnection) -> list[Problem]:
    """The InstructionSequence has schedule_length steps; live ranges stay inside it."""
    problems = [
        Problem("schedule", f"schedule_length {length} but {steps} sequence rows", mid)
        for mid, length, steps in rows(con, "schedule-length")
    ]
    problems += [
        Problem("schedule", f"live range {name}{index} {start}-{end} is outside 0..{length}", mid)
        for mid, name, index, start, end, length in rows(con, "live-ranges-in-schedule")
    ]
    return problems


def _heap_peaks(con: duckdb.DuckDBPyConnection) -> list[Problem]:
    """heap_peaks agrees with the allocations it was computed from, and with modules."""
    problems = [
        Problem("heap peaks", f"color {color}: {what}", mid)
        for mid, color, what in rows(con, "heap-peaks-colors")
    ]
    problems += [
        Problem("heap peaks", f"modules.heap_peak_bytes {got} but heap_peaks says {want}", mid)
        for mid, got, want in rows(con, "heap-peak-module")
    ]
    return problems


def _derived(con: duckdb.DuckDBPyConnection) -> list[Problem]:
    """The derived tables hold what the schema's statements compute from the base rows now.

    The recomputation goes into a temporary table (allowed on a read-only
    connection), which the comparison reads twice.
    """
    problems = []
    try:
        for lo, hi in module_ranges(con):
            for name, select in STATEMENTS.items():
                con.execute(
                    f"CREATE OR REPLACE TEMP TABLE bh_check_want AS\n{select}", {"lo": lo, "hi": hi}
                )
                problems += [
                    Problem(
                        "derived values",
                        f"{name}: {n} rows differ from a recomputation from the module's rows",
                        mid,
                    )
                    for mid, n in rows(con, "derived-differences", table_name=name, lo=lo, hi=hi)
                ]
    finally:
        con.execute("DROP TABLE IF EXISTS bh_check_want")
    return problems


def _orphans(con: duckdb.DuckDBPyConnection) -> list[Problem]:
    """No row points at a module (or a run) that is not there."""
    problems = []
    for table in (*MODULE_TABLES, *DERIVED_TABLES, _LABELS):
        problems += [
            Problem("orphans", f"{n} {table.name} rows of a missing module", mid)
            for mid, n in rows(con, "orphan-rows", table_name=table.name)
        ]
    problems += [
        Problem("orphans", f"{n} diagnostics of a missing module", mid)
        for mid, n in rows(con, "orphan-diagnostics")
    ]
    problems += [
        Problem("orphans", f"loaded by run {run_id}, which is not in runs", mid)
        for mid, run_id in rows(con, "orphan-runs")
    ]
    problems += [
        Problem("orphans", f"content hash {content_hash} loaded {n} times")
        for content_hash, n in rows(con, "duplicate-content")
    ]
    return problems


def _module_ids(con: duckdb.DuckDBPyConnection) -> list[Problem]:
    """Module ids are unique, and every table stores its modules' rows in id order.

    Ids grow with ingest order and rows are appended module by module, so each
    module's rows follow those of every smaller id; that is what lets DuckDB's
    min/max statistics skip all row groups but one module's. (Views, as in a file
    made by `bufferhouse attach`, have no storage order to check.)
    """
    problems = [
        Problem("module ids", f"module_id is shared by {n} modules", mid)
        for mid, n in rows(con, "duplicate-ids")
    ]
    stored = {r[0] for r in rows(con, "stored-tables")}
    for table in (_MODULES, *MODULE_TABLES):
        if table.name not in stored:
            continue
        problems += [
            Problem(
                "module ids",
                f"{table.name} rows lie before rows of module {before}, a smaller id: "
                "a one-module query reads more row groups than it needs",
                mid,
            )
            for mid, before in rows(con, "storage-order", quoted_table=quote_identifier(table.name))
        ]
    return problems


def _oom_events(con: duckdb.DuckDBPyConnection) -> list[Problem]:
    """OOM events are whole (their buffers and diagnostics all there), unique by
    event_hash and id, nothing points at an event or run that is not there, and no
    size is negative but the differences ingest allows (the same SIGNED_FIGURES)."""
    problems = [
        Problem(
            "oom events", f"event {eid} ({path}:{line}) lists {listed} buffers, {stored} are stored"
        )
        for eid, path, line, listed, stored in rows(con, "oom-buffer-counts")
    ]
    problems += [
        Problem(
            "oom events",
            f"event {eid} ({path}:{line}) had {recorded} problems, {stored} diagnostics name it",
        )
        for eid, path, line, recorded, stored in rows(con, "oom-problem-counts")
    ]
    for table in ("oom_buffers", "oom_labels", "diagnostics"):
        problems += [
            Problem("oom events", f"{n} {table} rows of missing event {eid}")
            for eid, n in rows(con, "oom-orphan-rows", table_name=table)
        ]
    problems += [
        Problem("oom events", f"{what} is held by {n} events")
        for what, n in rows(con, "oom-duplicates")
    ]
    problems += [
        Problem("oom events", f"event {eid} loaded by run {run_id}, which is not in runs")
        for eid, run_id in rows(con, "oom-orphan-runs")
    ]
    problems += [
        Problem("oom events", f"event {eid}: {what} is {n} bytes, a negative amount of memory")
        for eid, what, n in rows(con, "oom-negative-sizes", signed=sorted(SIGNED_FIGURES))
    ]
    return problems


def _snapshots(con: duckdb.DuckDBPyConnection) -> list[Problem]:
    """Snapshots are whole (their samples add up to the totals recorded with them),
    unique by snapshot_hash and id, and no row points at a snapshot that is not there."""
    problems = [
        Problem("snapshots", f"snapshot {sid} ({path}) records {what} {recorded}, its rows add {n}")
        for sid, path, what, recorded, n in rows(con, "snapshot-totals")
    ]
    for table in ("runtime_samples", "runtime_frames", "runtime_labels"):
        problems += [
            Problem("snapshots", f"{n} {table} rows of missing snapshot {sid}")
            for sid, n in rows(con, "snapshot-orphans", table_name=table)
        ]
    problems += [
        Problem("snapshots", f"{what} is held by {n} snapshots")
        for what, n in rows(con, "snapshot-duplicates")
    ]
    return problems


def _foreign_objects(con: duckdb.DuckDBPyConnection) -> list[Problem]:
    """Every view and macro in the file is one bufferhouse installs (or a view over an
    attached dataset, named as a table): a crafted warehouse's own would run, with the
    file access of whoever opens it unsealed, as soon as a query names it."""
    ours = installed_names()
    tables = {t.name for t in TABLES}
    return [
        Problem(
            "foreign objects",
            f"{kind} {name} is not one of bufferhouse's (a crafted or edited warehouse?):"
            " drop it, or open the file only with the sealed `sql` and `connect()`",
        )
        for kind, name in rows(con, "stored-objects")
        if name not in ours[kind] and not (kind == "view" and name in tables)
    ]


CHECKS: tuple[tuple[str, Callable[[duckdb.DuckDBPyConnection], list[Problem]]], ...] = (
    ("modules complete", _row_counts),
    ("total bytes", _totals),
    *((check, _invariants(check)) for check in dict.fromkeys(inv.check for inv in INVARIANTS)),
    ("peak list", _peak_list),
    ("schedule", _schedule),
    ("heap peaks", _heap_peaks),
    ("derived values", _derived),
    ("orphans", _orphans),
    ("module ids", _module_ids),
    ("oom events", _oom_events),
    ("snapshots", _snapshots),
    ("foreign objects", _foreign_objects),
)
