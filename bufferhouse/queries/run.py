"""Running a canned query or one ad-hoc statement on a connection, as an Arrow table."""

from __future__ import annotations

import duckdb
import pyarrow as pa

from bufferhouse.errors import QueryError
from bufferhouse.queries.header import Query, get
from bufferhouse.schema.warehouse import require_query


def run(
    con: duckdb.DuckDBPyConnection, query: str | Query, params: dict[str, object] | None = None
) -> pa.Table:
    """Run a canned query (by name, or one already looked up) with its parameters
    bound; returns an Arrow table.

    A `module` no module matches gives an empty table here (compare asks each side
    whether it holds a module); the public API checks with require_module first.
    """
    q = get(query) if isinstance(query, str) else query
    return execute(con, q, q.bind(params or {}))


def execute(con: duckdb.DuckDBPyConnection, q: Query, values: dict[str, object]) -> pa.Table:
    """Run a canned query with values already bound (Query.bind): the one place its SQL
    meets a connection."""
    try:
        return arrow_result(con.sql(q.sql, params={k: values[k] for k in q.used_params()}))
    except duckdb.Error as exc:
        raise QueryError(f"query {q.name}: {exc}") from None


def run_sql(
    con: duckdb.DuckDBPyConnection, sql: str, params: list | dict | None = None
) -> pa.Table:
    """Run one SQL statement; several (`SELECT 1; SELECT 2`) or none is a QueryError,
    rather than the last one's result alone."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(str(exc)) from None
    if not statements:
        raise QueryError("no SQL statement given (the text is empty or only comments)")
    if len(statements) > 1:
        raise QueryError(
            f"the SQL holds {len(statements)} statements; give one at a time (a result "
            "is one table, and only the last would be shown)"
        )
    require_query(con, statements[0])
    try:
        relation = con.sql(sql, params=params) if params else con.sql(sql)
        if relation is None:  # a statement without a result
            return pa.table({})
        return arrow_result(relation)
    except duckdb.PermissionException as exc:
        raise QueryError(
            f"{exc}\nThe warehouse is opened with external access off: SQL reads only the "
            "warehouse (no other files, no network, no extensions). To read or write your "
            "own files, allow it: `bufferhouse sql --allow-files`, or "
            "bufferhouse.sql(..., allow_files=True)."
        ) from None
    except duckdb.Error as exc:
        raise QueryError(str(exc)) from None


def arrow_result(relation: duckdb.DuckDBPyRelation) -> pa.Table:
    """The relation as an Arrow table (the method name differs across DuckDB releases)."""
    fetch = getattr(relation, "to_arrow_table", None)
    if fetch is None:
        return relation.arrow()
    return fetch()
