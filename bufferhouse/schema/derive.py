"""Per-module values computed from a module's own rows, stored in the derived tables.

Fleet-wide queries would otherwise join assignments, allocations, live ranges and
hlo_values for every value of every module (tens of millions of rows) on each
run. The statements in derive/*.sql (one documented file per table, beside the
schema that declares the tables) are the one definition of those values (the
heap-peak membership rule among them: the heap_peak_values view reads the
stored rows).
Every statement reads the base tables of the modules with ids in [$lo, $hi]
only, so the same SQL serves a warehouse write (a batch's ids grow past every
id already stored, so zone maps skip the rest), the in-place upgrade (all
modules) and sinks without a warehouse (`derived_tables`: an in-memory DuckDB
over the batch's Arrow tables).
"""

from __future__ import annotations

from importlib import resources

import duckdb
import pyarrow as pa

from bufferhouse.schema import (
    DERIVED_TABLES,
    arrow_schema,
    create_statements,
    macros,
    quote_identifier,
)

#: Tables the statements read, all per module.
BASE_TABLES = (
    "allocations",
    "hlo_values",
    "assignments",
    "instructions",
    "live_ranges",
    "heap_peaks",
    "heap_events",
)


def _statements() -> dict[str, str]:
    """Derived table -> the SELECT that computes its rows (derive/<table>.sql), in the
    order of DERIVED_TABLES, which is the order they must run in."""
    folder = resources.files(__package__).joinpath("derive")
    return {
        t.name: folder.joinpath(f"{t.name}.sql").read_text(encoding="utf-8") for t in DERIVED_TABLES
    }


#: Derived table -> the SELECT that computes its rows, in the order they must run.
STATEMENTS: dict[str, str] = _statements()


def derive(con: duckdb.DuckDBPyConnection, lo: int, hi: int) -> None:
    """Insert the derived rows of the modules with ids in [lo, hi].

    The caller owns the transaction: the rows go in with the module's own rows
    (or not at all). Those modules must have no derived rows yet.
    """
    params = {"lo": lo, "hi": hi}
    macros.install(con, temp=True)  # the rules the statements share (schema/macros.py)
    for name, select in STATEMENTS.items():
        con.execute(f"INSERT INTO {quote_identifier(name)}\n{select}", params)


def module_ranges(
    con: duckdb.DuckDBPyConnection, max_rows: int = 2_000_000
) -> list[tuple[int, int]]:
    """[lo, hi] module-id ranges covering every module, each of about `max_rows`
    assignments, like ingest's batches: one statement over tens of millions of
    values runs for many minutes on one core, the same work in ranges takes a
    few seconds per range."""
    sizes = con.execute(
        "SELECT m.module_id, coalesce(a.n, 0) FROM modules AS m LEFT JOIN "
        "(SELECT module_id, count(*) AS n FROM assignments GROUP BY module_id) AS a "
        "USING (module_id) ORDER BY m.module_id"
    ).fetchall()
    ranges, start, rows = [], None, 0
    for i, (module_id, n) in enumerate(sizes):
        start = module_id if start is None else start
        rows += n
        if rows >= max_rows or i == len(sizes) - 1:
            ranges.append((start, module_id))
            start, rows = None, 0
    return ranges


def derive_all(con: duckdb.DuckDBPyConnection, max_rows: int = 2_000_000) -> None:
    """Recompute the derived rows of every module (the in-place upgrade), range by range."""
    for name in STATEMENTS:
        con.execute(f"DELETE FROM {quote_identifier(name)}")
    for lo, hi in module_ranges(con, max_rows):
        derive(con, lo, hi)


def derived_tables(tables: dict[str, pa.Table]) -> dict[str, pa.Table]:
    """The derived tables of a batch of whole modules given as Arrow tables (module_id set).

    For sinks without a warehouse (Parquet part files, Spark): the same
    statements, run in an in-memory DuckDB over exactly these rows.
    """
    con = duckdb.connect(":memory:")
    try:
        for statement in create_statements():
            con.execute(statement)
        ids: list[int] = []
        for name in BASE_TABLES:
            data = tables.get(name)
            if data is not None and data.num_rows:
                con.register(f"_bh_{name}", data)
                con.execute(
                    f"INSERT INTO {quote_identifier(name)} SELECT * FROM {quote_identifier('_bh_' + name)}"
                )
                con.unregister(f"_bh_{name}")
                ids += con.execute(
                    f"SELECT min(module_id), max(module_id) FROM {quote_identifier(name)}"
                ).fetchall()[0]
        ids = [i for i in ids if i is not None]
        out = {}
        macros.install(con, temp=True)
        for table in DERIVED_TABLES:
            if ids:
                derive_one = STATEMENTS[table.name]
                con.execute(
                    f"INSERT INTO {quote_identifier(table.name)}\n{derive_one}",
                    {"lo": min(ids), "hi": max(ids)},
                )
            rows = con.sql(f"SELECT * FROM {quote_identifier(table.name)}").to_arrow_table()
            out[table.name] = rows.cast(arrow_schema(table))
        return out
    finally:
        con.close()
