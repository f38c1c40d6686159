"""Verify a warehouse: schema, whole modules, the dump's own invariants, orphans, id order.

A warehouse is trusted with months of dumps, so it must be possible to prove
at any time (after a crash, a killed ingest, a copy between machines) that it
holds only whole modules whose figures still agree with each other. Every
check here is recomputed in SQL from the tables themselves (the statements in
check/sql/*.sql; the checks that word their results in `rules`); nothing is
taken from the ingest code that wrote them. The derived tables are compared
with a recomputation by the schema's own statements, which define them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import duckdb

from bufferhouse.check.rules import CHECKS, Problem, rows
from bufferhouse.schema import SCHEMA_VERSION, WAREHOUSE_TABLES, macros
from bufferhouse.schema.warehouse import database_path, open_connection, schema_version

__all__ = ["CheckReport", "Problem", "check_warehouse"]

#: Problems listed per check before the rest are only counted.
SHOWN_PER_CHECK = 20


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
    if report.schema_version is None and not rows(con, "any-table"):
        # Created but not yet initialised (an ingest stopped before its first commit):
        # the next ingest creates the tables, nothing is inconsistent.
        report.empty = True
        return report
    version_problems = _schema_problems(con, report.schema_version)
    report.checks["schema"] = len(version_problems)
    report.problems.extend(version_problems)
    if version_problems:
        return report  # the other checks would only repeat that the tables are wrong
    macros.install(con, temp=True)  # the checks' shared rules, whichever release wrote the file
    report.names = dict(rows(con, "module-names"))
    report.modules = len(report.names)
    for name, run in CHECKS:
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
    for table, column, type_ in rows(con, "stored-columns"):
        have.setdefault(table, {})[column] = type_
    problems = []
    for table in WAREHOUSE_TABLES:
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
