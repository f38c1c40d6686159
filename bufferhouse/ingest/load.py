"""Write one parsed module into the warehouse in a single transaction.

A module lands whole or not at all: every table's rows, its labels, its
diagnostics and its row counts commit together.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

from bufferhouse.errors import DumpError
from bufferhouse.ingest.parse import ParsedModule
from bufferhouse.schema import MODULE_TABLES, TABLES_BY_NAME, arrow_schema, quote_identifier


def to_arrow(table_name: str, module_id: int, rows: list[tuple]) -> pa.Table:
    """Rows of one module (without module_id) as an Arrow table of the declared schema."""
    schema = arrow_schema(TABLES_BY_NAME[table_name])
    columns = list(zip(*rows)) if rows else [() for _ in range(len(schema) - 1)]
    arrays = [pa.array([module_id] * len(rows), pa.int64())]
    for field, column in zip(list(schema)[1:], columns):
        arrays.append(pa.array(column, field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def module_tables(module_id: int, parsed: ParsedModule) -> dict[str, pa.Table]:
    return {t.name: to_arrow(t.name, module_id, parsed.rows.get(t.name, [])) for t in MODULE_TABLES}


def insert_arrow(con: duckdb.DuckDBPyConnection, table_name: str, data: pa.Table) -> None:
    if data.num_rows == 0:
        return
    view = f"_bh_load_{table_name}"
    con.register(view, data)
    try:
        con.execute(
            f"INSERT INTO {quote_identifier(table_name)} SELECT * FROM {quote_identifier(view)}"
        )
    finally:
        con.unregister(view)


def load_module(
    con: duckdb.DuckDBPyConnection,
    module_row: dict[str, object],
    tables: dict[str, pa.Table],
    labels: list[tuple[str, str]],
    warnings: list[DumpError],
    run_id: int,
) -> None:
    module_id = module_row["module_id"]
    counts = {name: data.num_rows for name, data in tables.items()}
    row = dict(module_row, row_counts=counts)
    modules = pa.Table.from_pylist([row], schema=arrow_schema(TABLES_BY_NAME["modules"]))
    con.execute("BEGIN TRANSACTION")
    try:
        insert_arrow(con, "modules", modules)
        for name, data in tables.items():
            insert_arrow(con, name, data)
        add_labels(con, module_id, labels)
        record_diagnostics(con, run_id, module_id, warnings, "warning")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def add_labels(
    con: duckdb.DuckDBPyConnection, module_id: int, labels: list[tuple[str, str]]
) -> int:
    """Attach labels a module does not have yet; returns how many were new."""
    added = 0
    for key, value in labels:
        exists = con.execute(
            "SELECT 1 FROM labels WHERE module_id = ? AND key = ? AND value = ?",
            [module_id, key, value],
        ).fetchone()
        if not exists:
            con.execute("INSERT INTO labels VALUES (?, ?, ?)", [module_id, key, value])
            added += 1
    return added


def record_diagnostics(
    con: duckdb.DuckDBPyConnection,
    run_id: int,
    module_id: int | None,
    problems: list[DumpError],
    severity: str,
) -> None:
    if problems:
        con.executemany(
            "INSERT INTO diagnostics VALUES (?, ?, ?, ?, ?, ?)",
            [(run_id, module_id, e.path, e.line, severity, e.message) for e in problems],
        )
