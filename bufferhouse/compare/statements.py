"""The comparison's SQL: documented `.sql` files in compare/sql/, read by the
project's one loader (`queries.sql_files`) and run with bound values."""

from __future__ import annotations

import duckdb
import pyarrow as pa

from bufferhouse import queries
from bufferhouse.errors import DiffError


def diff_queries() -> list[queries.Query]:
    """The documented comparison queries in bufferhouse/compare/sql/."""
    return list(queries.sql_files("bufferhouse.compare", "sql", "diff").values())


def statement(name: str) -> queries.Query:
    """One comparison statement by its short name (`labelled` for diff-labelled.sql's)."""
    return queries.sql_files("bufferhouse.compare", "sql", "diff")[f"diff-{name}"]


def run(con: duckdb.DuckDBPyConnection, name: str, **params: object) -> pa.Table:
    """Run statement `name` on `con` with `params` bound; a DuckDB error names the file."""
    q = statement(name)
    try:
        return queries.arrow_result(con.sql(q.sql, params=q.bind(params) if q.params else None))
    except duckdb.Error as exc:
        raise DiffError(f"{q.source}: {exc}") from None
