"""The structural invariants of a module's rows, one SQL statement each: the one home
that ingest and `bufferhouse check` share.

Each statement in invariants/*.sql reads the module tables of the modules with
ids in [$lo, $hi] and returns one row per break: (module_id, a, b, problem),
`a`/`b` the keys its header names (so a reader can point back at its input)
and `problem` the break in words. `bufferhouse check` runs them over a
warehouse; the proto reader runs them, through `violations`, over the rows it
is about to build from one HloProto, in an in-memory DuckDB, before anything
lands (parse/proto/invariants.py names the proto field of each break).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

import pyarrow as pa

from bufferhouse.schema import quote_identifier

if TYPE_CHECKING:  # duckdb is imported when first needed: a parser process starts without it
    import duckdb

__all__ = ["INVARIANTS", "Invariant", "Violation", "run", "violations"]


@dataclass(frozen=True)
class Invariant:
    """One rule: its statement (invariants/<name>.sql) and the check that reports it."""

    name: str
    check: str
    sql: str


@dataclass(frozen=True)
class Violation:
    """One break of an invariant: which rule, which module, its keys, in words."""

    invariant: str
    module_id: int
    a: int | None
    b: int | None
    problem: str


#: In the order a reader meets the facts: allocations, values, their slices, the trace.
_ORDER = (
    "allocation_indices",
    "allocation_sizes",
    "value_ids",
    "shape_indices",
    "values_placed_once",
    "slices_in_bounds",
    "trace_colors",
    "trace_sizes",
)

#: The tables the statements read.
TABLES = ("allocations", "hlo_values", "assignments", "heap_events")


def _load() -> tuple[Invariant, ...]:
    folder = resources.files(__package__).joinpath("invariants")
    found = []
    for name in _ORDER:
        sql = folder.joinpath(f"{name}.sql").read_text(encoding="utf-8")
        check = next(
            line.split(":", 1)[1].strip()
            for line in sql.splitlines()
            if line.startswith("-- check:")
        )
        found.append(Invariant(name, check, sql))
    return tuple(found)


INVARIANTS: tuple[Invariant, ...] = _load()


def run(con: duckdb.DuckDBPyConnection, invariant: Invariant, lo: int, hi: int) -> list[Violation]:
    """The breaks of one invariant among the modules with ids in [lo, hi]."""
    return [
        Violation(invariant.name, *row)
        for row in con.execute(invariant.sql, {"lo": lo, "hi": hi}).fetchall()
    ]


_LOCK = threading.Lock()
_CON: list[duckdb.DuckDBPyConnection] = []  # one in-memory DuckDB per process, made once


def violations(tables: dict[str, pa.Table]) -> list[Violation]:
    """Every break in one module's rows given as Arrow tables (no module_id column, or
    only some of the columns: the statements read module_id and their own columns),
    in the order of INVARIANTS."""
    with _LOCK:
        if not _CON:
            import duckdb

            _CON.append(duckdb.connect(":memory:"))
        con = _CON[0]
        try:
            for name in TABLES:
                data = tables[name]
                if "module_id" in data.column_names:
                    data = data.drop_columns(["module_id"])
                con.register(f"_bh_{name}", data)
                con.execute(
                    f"CREATE OR REPLACE TEMP VIEW {quote_identifier(name)} AS "
                    f"SELECT 0::BIGINT AS module_id, * FROM {quote_identifier('_bh_' + name)}"
                )
            return [v for invariant in INVARIANTS for v in run(con, invariant, 0, 0)]
        finally:
            for name in TABLES:
                con.unregister(f"_bh_{name}")
