"""Verify a warehouse: schema, whole modules, the dump's own invariants, orphans, id order.

A warehouse is trusted with months of dumps, so it must be possible to prove
at any time (after a crash, a killed ingest, a copy between machines) that it
holds only whole modules whose figures still agree with each other. Every
check here is recomputed in SQL from the tables themselves; nothing is taken
from the ingest code that wrote them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

import duckdb

from bufferhouse.schema import (
    DERIVED_TABLES,
    MODULE_TABLES,
    SCHEMA_VERSION,
    TABLES,
    quote_identifier,
)
from bufferhouse.schema.warehouse import database_path, open_connection, schema_version

__all__ = ["CheckReport", "Problem", "check_warehouse"]

#: Problems listed per check before the rest are only counted.
SHOWN_PER_CHECK = 20


@dataclass(frozen=True)
class Problem:
    """One thing that is off: which check found it, about which module, what."""

    check: str
    message: str
    module_id: int | None = None


@dataclass
class CheckReport:
    """Outcome of `check_warehouse`: what was checked and everything found wrong."""

    db: str
    schema_version: int | None = None
    modules: int = 0
    #: check name -> number of problems it found (0 = passed), in run order.
    checks: dict[str, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    #: module_id -> file_stem, to name the modules in the text report.
    names: dict[int, str] = field(default_factory=dict)
    #: The file holds no tables at all yet.
    empty: bool = False

    @property
    def ok(self) -> bool:
        return not self.problems

    def lines(self) -> list[str]:
        """The report as text lines, one per check, problems indented below."""
        if self.empty:
            return [f"warehouse {self.db}: empty (no tables yet; the next ingest creates them)"]
        out = [f"warehouse {self.db}: schema version {self.schema_version}, {self.modules} modules"]
        for name, count in self.checks.items():
            out.append(
                f"{'ok  ' if count == 0 else 'FAIL'} {name}" + (f": {count}" if count else "")
            )
            shown = [p for p in self.problems if p.check == name][:SHOWN_PER_CHECK]
            for p in shown:
                where = ""
                if p.module_id is not None:
                    stem = self.names.get(p.module_id)
                    where = (
                        f"module {stem} ({p.module_id}): " if stem else f"module {p.module_id}: "
                    )
                out.append(f"       {where}{p.message}")
            if count > len(shown):
                out.append(f"       ... and {count - len(shown)} more")
        out.append(
            "warehouse is consistent"
            if self.ok
            else f"{len(self.problems)} problems in {sum(1 for c in self.checks.values() if c)} checks"
        )
        return out


def check_warehouse(db: str | os.PathLike[str] | None = None, *, wait: float = 0.0) -> CheckReport:
    """Check the warehouse `db` (opened read-only) and return what is off.

    Raises WarehouseError only when the file cannot be opened at all; every
    inconsistency inside it is a Problem in the report.
    """
    path = database_path(db)
    if os.path.isfile(path) and os.path.getsize(path) == 0:
        return CheckReport(path, empty=True)  # created, never written: the next ingest starts it
    con = open_connection(path, read_only=True, wait=wait)
    try:
        return _check(con, path)
    finally:
        con.close()


def _check(con: duckdb.DuckDBPyConnection, path: str) -> CheckReport:
    report = CheckReport(path)
    report.schema_version = schema_version(con)
    if report.schema_version is None and not _rows(con, "SELECT 1 FROM duckdb_tables() LIMIT 1"):
        # Created but not yet initialised (an ingest stopped before its first commit):
        # the next ingest creates the tables, nothing is inconsistent.
        report.empty = True
        return report
    version_problems = _schema_problems(con, report.schema_version)
    report.checks["schema"] = len(version_problems)
    report.problems.extend(version_problems)
    if version_problems:
        return report  # the other checks would only repeat that the tables are wrong
    report.names = dict(_rows(con, "SELECT module_id, file_stem FROM modules"))
    report.modules = len(report.names)
    for name, run in _CHECKS:
        found = run(con)
        report.checks[name] = len(found)
        report.problems.extend(found)
    return report


def _schema_problems(con: duckdb.DuckDBPyConnection, version: int | None) -> list[Problem]:
    if version is None:
        return [Problem("schema", "no schema_info table: not a bufferhouse warehouse")]
    if version != SCHEMA_VERSION:
        return [
            Problem(
                "schema",
                f"schema version {version}; this bufferhouse reads version {SCHEMA_VERSION}",
            )
        ]
    have: dict[str, dict[str, str]] = {}
    for table, column, type_ in con.execute(
        "SELECT table_name, column_name, data_type FROM duckdb_columns() "
        "WHERE schema_name = 'main' ORDER BY table_name, column_index"
    ).fetchall():
        have.setdefault(table, {})[column] = type_
    problems = []
    for table in TABLES:
        columns = have.get(table.name)
        if columns is None:
            problems.append(Problem("schema", f"table {table.name} is missing"))
            continue
        if list(columns) != table.column_names:
            problems.append(
                Problem(
                    "schema",
                    f"table {table.name} has columns {list(columns)}, expected {table.column_names}",
                )
            )
            continue
        for c in table.columns:
            if _normal_type(columns[c.name]) != _normal_type(c.type):
                problems.append(
                    Problem(
                        "schema",
                        f"column {table.name}.{c.name} is {columns[c.name]}, expected {c.type}",
                    )
                )
    return problems


def _normal_type(text: str) -> str:
    return text.upper().replace(" ", "")


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> list[tuple]:
    return con.execute(sql, params or []).fetchall()


def _row_counts(con: duckdb.DuckDBPyConnection) -> list[Problem]:
    """Each module's recorded row count per table equals the rows it has (whole modules)."""
    expected = sorted(t.name for t in MODULE_TABLES)
    problems = [
        Problem("modules complete", f"row_counts records tables {keys}, expected {expected}", mid)
        for mid, keys in _rows(
            con,
            "SELECT module_id, list_sort(map_keys(row_counts)) AS k FROM modules "
            "WHERE k IS DISTINCT FROM ?::VARCHAR[]",
            [expected],
        )
    ]
    for table in MODULE_TABLES:
        name = quote_identifier(table.name)
        for mid, recorded, actual in _rows(
            con,
            f"""
            WITH actual AS (SELECT module_id, count(*) AS n FROM {name} GROUP BY module_id),
            recorded AS (
              SELECT module_id, k, v FROM (
                SELECT module_id, unnest(map_keys(row_counts)) AS k,
                       unnest(map_values(row_counts)) AS v
                FROM modules)
              WHERE k = ?)
            SELECT m.module_id, r.v, coalesce(a.n, 0)
            FROM modules m
            LEFT JOIN recorded r USING (module_id)
            LEFT JOIN actual a USING (module_id)
            WHERE r.v IS NOT NULL AND r.v <> coalesce(a.n, 0)
            ORDER BY m.module_id
            """,
            [table.name],
        ):
            problems.append(
                Problem(
                    "modules complete",
                    f"{table.name}: {actual} rows, but {recorded} were written at ingest",
                    mid,
                )
            )
    for mid, what, recorded, actual in _rows(
        con,
        """
        SELECT m.module_id, 'allocation_count', m.allocation_count, count(a.module_id)
        FROM modules m LEFT JOIN allocations a USING (module_id)
        GROUP BY m.module_id, m.allocation_count
        HAVING m.allocation_count IS DISTINCT FROM count(a.module_id)
        UNION ALL
        SELECT m.module_id, 'value_count', m.value_count, count(v.module_id)
        FROM modules m LEFT JOIN hlo_values v USING (module_id)
        GROUP BY m.module_id, m.value_count
        HAVING m.value_count IS DISTINCT FROM count(v.module_id)
        ORDER BY 1, 2
        """,
    ):
        problems.append(
            Problem("modules complete", f"modules.{what} is {recorded} but {actual} rows", mid)
        )
    return problems


def _totals(con: duckdb.DuckDBPyConnection) -> list[Problem]:
    """`Total bytes used` == the sum of the allocation sizes."""
    return [
        Problem("total bytes", f"total_bytes {total} but the allocations add up to {actual}", mid)
        for mid, total, actual in _rows(
            con,
            """
            SELECT m.module_id, m.total_bytes, coalesce(sum(a.size), 0)
            FROM modules m LEFT JOIN allocations a USING (module_id)
            WHERE m.total_bytes IS NOT NULL
            GROUP BY m.module_id, m.total_bytes
            HAVING m.total_bytes <> coalesce(sum(a.size), 0)
            ORDER BY 1
            """,
        )
    ]


def _assignments(con: duckdb.DuckDBPyConnection) -> list[Problem]:
    """Every value's slice lies inside an allocation of its module."""
    return [
        Problem(
            "assignments in bounds",
            f"value {vid} at bytes {off}..{off + size} of allocation {idx} "
            + ("which does not exist" if asize is None else f"of size {asize}"),
            mid,
        )
        for mid, vid, idx, off, size, asize in _rows(
            con,
            """
            SELECT s.module_id, s.value_id, s.allocation_index, s.byte_offset, s.size, a.size
            FROM assignments s
            LEFT JOIN allocations a
              ON a.module_id = s.module_id AND a.allocation_index = s.allocation_index
            WHERE a.size IS NULL OR s.byte_offset < 0 OR s.size < 0
               OR s.byte_offset + s.size > a.size
            ORDER BY 1, 2
            """,
        )
    ]


def _peak_list(con: duckdb.DuckDBPyConnection) -> list[Problem]:
    """The printed peak list is exactly the values live at the printed peak time,
    its cumulative column is the running sum, and logical_peak_bytes is its sum."""
    problems = []
    for mid, side, instruction, index in _rows(
        con,
        """
        WITH checked AS (
          -- Eras that print the ShapeIndex in the peak list (2025-04+) identify each value.
          SELECT module_id, logical_peak_time FROM modules m
          WHERE logical_peak_time IS NOT NULL
            AND EXISTS (SELECT 1 FROM peak_values p WHERE p.module_id = m.module_id)
            AND NOT EXISTS (
              SELECT 1 FROM peak_values p
              WHERE p.module_id = m.module_id AND p.shape_index IS NULL)),
        live AS (
          SELECT lr.module_id, lr.instruction, lr.shape_index
          FROM live_ranges lr JOIN checked c USING (module_id)
          WHERE c.logical_peak_time BETWEEN lr.start_time AND lr.end_time),
        printed AS (
          SELECT p.module_id, p.instruction, p.shape_index
          FROM peak_values p JOIN checked c USING (module_id))
        SELECT module_id, 'live at the peak time but not printed', instruction, shape_index
        FROM (SELECT * FROM live EXCEPT ALL SELECT * FROM printed)
        UNION ALL
        SELECT module_id, 'printed but not live at the peak time', instruction, shape_index
        FROM (SELECT * FROM printed EXCEPT ALL SELECT * FROM live)
        ORDER BY 1, 3, 4
        """,
    ):
        problems.append(Problem("peak list", f"{instruction}{index}: {side}", mid))
    for mid, ordinal, cumulative, running in _rows(
        con,
        """
        SELECT module_id, ordinal, cumulative_bytes, running FROM (
          SELECT module_id, ordinal, cumulative_bytes,
                 sum(bytes) OVER (PARTITION BY module_id ORDER BY ordinal) AS running
          FROM peak_values)
        WHERE cumulative_bytes IS NOT NULL AND cumulative_bytes <> running
        ORDER BY 1, 2
        """,
    ):
        problems.append(
            Problem(
                "peak list",
                f"peak entry {ordinal}: cumulative {cumulative} bytes, running sum {running}",
                mid,
            )
        )
    for mid, peak, printed in _rows(
        con,
        """
        SELECT m.module_id, m.logical_peak_bytes, coalesce(sum(p.bytes), 0)
        FROM modules m LEFT JOIN peak_values p USING (module_id)
        WHERE m.logical_peak_time IS NOT NULL
        GROUP BY m.module_id, m.logical_peak_bytes
        HAVING m.logical_peak_bytes IS DISTINCT FROM coalesce(sum(p.bytes), 0)
        ORDER BY 1
        """,
    ):
        problems.append(
            Problem(
                "peak list",
                f"logical_peak_bytes {peak} but the peak list adds up to {printed}",
                mid,
            )
        )
    return problems


def _schedule(con: duckdb.DuckDBPyConnection) -> list[Problem]:
    """The InstructionSequence has schedule_length steps; live ranges stay inside it."""
    problems = [
        Problem("schedule", f"schedule_length {length} but {steps} sequence rows", mid)
        for mid, length, steps in _rows(
            con,
            """
            SELECT m.module_id, m.schedule_length, count(s.module_id)
            FROM modules m LEFT JOIN sequence s USING (module_id)
            WHERE m.schedule_length IS NOT NULL
            GROUP BY m.module_id, m.schedule_length
            HAVING m.schedule_length <> count(s.module_id)
            ORDER BY 1
            """,
        )
    ]
    problems += [
        Problem("schedule", f"live range {name}{index} {start}-{end} is outside 0..{length}", mid)
        for mid, name, index, start, end, length in _rows(
            con,
            """
            SELECT lr.module_id, lr.instruction, lr.shape_index, lr.start_time, lr.end_time,
                   m.schedule_length
            FROM live_ranges lr JOIN modules m USING (module_id)
            WHERE lr.end_time < lr.start_time OR lr.start_time < 0
               OR lr.end_time > m.schedule_length
            ORDER BY 1, 2, 3
            """,
        )
    ]
    return problems


def _heap_peaks(con: duckdb.DuckDBPyConnection) -> list[Problem]:
    """heap_peaks agrees with the allocations it was computed from, and with modules."""
    problems = [
        Problem("heap peaks", f"color {color}: {what}", mid)
        for mid, color, what in _rows(
            con,
            """
            WITH a AS (
              SELECT module_id, color, sum(size) AS total,
                     sum(size) FILTER (WHERE category <> 'temp') AS indefinite,
                     sum(size) FILTER (WHERE category = 'temp') AS temp
              FROM allocations GROUP BY ALL),
            h AS (
              SELECT h.*, coalesce(a.total, 0) AS a_total,
                     coalesce(a.indefinite, 0) AS a_indefinite, coalesce(a.temp, 0) AS a_temp
              FROM heap_peaks h LEFT JOIN a USING (module_id, color))
            SELECT module_id, color, 'total_bytes ' || total_bytes
                   || ' but the allocations of this color add up to ' || a_total
            FROM h WHERE total_bytes <> a_total
            UNION ALL
            SELECT module_id, color, 'indefinite_bytes ' || indefinite_bytes
                   || ' but the non-temp allocations add up to ' || a_indefinite
            FROM h WHERE indefinite_bytes <> a_indefinite
            UNION ALL
            SELECT module_id, color, 'temp_allocation_bytes ' || temp_allocation_bytes
                   || ' but the temp allocations add up to ' || a_temp
            FROM h WHERE temp_allocation_bytes <> a_temp
            UNION ALL
            SELECT module_id, color, 'temp_peak_bytes ' || temp_peak_bytes
                   || ' exceeds the temp allocations ' || temp_allocation_bytes
            FROM h WHERE temp_peak_bytes > temp_allocation_bytes OR temp_peak_bytes < 0
            UNION ALL
            SELECT module_id, color, 'heap_peak_bytes ' || heap_peak_bytes
                   || ' is not indefinite + temp peak'
            FROM h WHERE heap_peak_bytes IS DISTINCT FROM indefinite_bytes + temp_peak_bytes
            UNION ALL
            SELECT a.module_id, a.color, 'allocations of this color but no heap_peaks row'
            FROM a ANTI JOIN heap_peaks h USING (module_id, color)
            ORDER BY 1, 2, 3
            """,
        )
    ]
    problems += [
        Problem("heap peaks", f"modules.heap_peak_bytes {got} but heap_peaks says {want}", mid)
        for mid, got, want in _rows(
            con,
            """
            SELECT m.module_id, m.heap_peak_bytes, h.heap_peak_bytes
            FROM modules m LEFT JOIN heap_peaks h ON h.module_id = m.module_id AND h.color = 0
            WHERE m.heap_peak_bytes IS DISTINCT FROM h.heap_peak_bytes
            ORDER BY 1
            """,
        )
    ]
    return problems


def _derived(con: duckdb.DuckDBPyConnection) -> list[Problem]:
    """The derived tables hold what ingest's statements compute from the base rows now."""
    from bufferhouse.schema.derive import STATEMENTS, module_ranges

    problems = []
    checks = [
        (lo, hi, name, select)
        for lo, hi in module_ranges(con)
        for name, select in STATEMENTS.items()
    ]
    for lo, hi, name, select in checks:
        for mid, n in _rows(
            con,
            f"""
            WITH want AS ({select}),
            got AS (
              SELECT * FROM {quote_identifier(name)} WHERE module_id BETWEEN $lo AND $hi)
            SELECT module_id, count(*) FROM (
              (SELECT * FROM want EXCEPT ALL SELECT * FROM got)
              UNION ALL
              (SELECT * FROM got EXCEPT ALL SELECT * FROM want))
            GROUP BY module_id ORDER BY module_id
            """,
            {"lo": lo, "hi": hi},
        ):
            problems.append(
                Problem(
                    "derived values",
                    f"{name}: {n} rows differ from a recomputation from the module's rows",
                    mid,
                )
            )
    return problems


def _orphans(con: duckdb.DuckDBPyConnection) -> list[Problem]:
    """No row points at a module (or a run) that is not there."""
    problems = []
    for table in (*MODULE_TABLES, *DERIVED_TABLES, next(t for t in TABLES if t.name == "labels")):
        name = quote_identifier(table.name)
        for mid, n in _rows(
            con,
            f"""
            SELECT module_id, count(*) FROM {name}
            WHERE module_id NOT IN (SELECT module_id FROM modules)
            GROUP BY module_id ORDER BY module_id
            """,
        ):
            problems.append(Problem("orphans", f"{n} {table.name} rows of a missing module", mid))
    for mid, n in _rows(
        con,
        """
        SELECT module_id, count(*) FROM diagnostics
        WHERE module_id IS NOT NULL AND module_id NOT IN (SELECT module_id FROM modules)
        GROUP BY module_id ORDER BY module_id
        """,
    ):
        problems.append(Problem("orphans", f"{n} diagnostics of a missing module", mid))
    for mid, run_id in _rows(
        con,
        """
        SELECT module_id, run_id FROM modules
        WHERE run_id IS NULL OR run_id NOT IN (SELECT run_id FROM runs) ORDER BY 1
        """,
    ):
        problems.append(Problem("orphans", f"loaded by run {run_id}, which is not in runs", mid))
    for content_hash, n in _rows(
        con,
        "SELECT content_hash, count(*) FROM modules GROUP BY 1 HAVING count(*) > 1 ORDER BY 1",
    ):
        problems.append(Problem("orphans", f"content hash {content_hash} loaded {n} times"))
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
        for mid, n in _rows(
            con,
            "SELECT module_id, count(*) FROM modules GROUP BY 1 HAVING count(*) > 1 ORDER BY 1",
        )
    ]
    stored = {r[0] for r in _rows(con, "SELECT table_name FROM duckdb_tables()")}
    for table in (next(t for t in TABLES if t.name == "modules"), *MODULE_TABLES):
        if table.name not in stored:
            continue
        name = quote_identifier(table.name)
        for mid, before in _rows(
            con,
            f"""
            WITH spans AS (
              SELECT module_id, min(rowid) AS first_row, max(rowid) AS last_row
              FROM {name} GROUP BY module_id),
            ordered AS (
              SELECT module_id, first_row,
                     max(last_row) OVER (ORDER BY module_id
                       ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_last,
                     arg_max(module_id, last_row) OVER (ORDER BY module_id
                       ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_id
              FROM spans)
            SELECT module_id, before_id FROM ordered WHERE first_row < before_last
            ORDER BY module_id
            """,
        ):
            problems.append(
                Problem(
                    "module ids",
                    f"{table.name} rows lie before rows of module {before}, a smaller id: "
                    "a one-module query reads more row groups than it needs",
                    mid,
                )
            )
    return problems


_CHECKS: tuple[tuple[str, Callable[[duckdb.DuckDBPyConnection], list[Problem]]], ...] = (
    ("modules complete", _row_counts),
    ("total bytes", _totals),
    ("assignments in bounds", _assignments),
    ("peak list", _peak_list),
    ("schedule", _schedule),
    ("heap peaks", _heap_peaks),
    ("derived values", _derived),
    ("orphans", _orphans),
    ("module ids", _module_ids),
)
