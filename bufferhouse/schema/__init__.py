"""What the warehouse tables are: declared once in `tables`, derived here.

DuckDB DDL, COMMENT ON statements, Arrow schemas, the sqlglot schema and the
markdown reference all come from the same declarations.
"""

from __future__ import annotations

import functools

import pyarrow as pa

from bufferhouse.schema.tables import (
    DERIVED_TABLES,
    MODULE_TABLES,
    SCHEMA_VERSION,
    TABLES,
    TABLES_BY_NAME,
    WAREHOUSE_TABLES,
    Column,
    Table,
)

__all__ = [
    "DERIVED_TABLES",
    "MODULE_TABLES",
    "SCHEMA_VERSION",
    "TABLES",
    "TABLES_BY_NAME",
    "WAREHOUSE_TABLES",
    "Column",
    "Table",
    "arrow_schema",
    "arrow_type",
    "comment_statements",
    "create_statements",
    "markdown_reference",
    "quote_identifier",
    "sql_string",
    "sqlglot_schema",
]

_SCALARS: dict[str, pa.DataType] = {
    "BIGINT": pa.int64(),
    "INTEGER": pa.int32(),
    "DOUBLE": pa.float64(),
    "BOOLEAN": pa.bool_(),
    "VARCHAR": pa.string(),
    "TIMESTAMP": pa.timestamp("us"),
}


def arrow_type(duckdb_type: str) -> pa.DataType:
    """Arrow type of a declared DuckDB type (scalars, `X[]` lists, MAP(K, V))."""
    if duckdb_type.endswith("[]"):
        return pa.list_(arrow_type(duckdb_type[:-2]))
    if duckdb_type.startswith("MAP("):
        key, value = (part.strip() for part in duckdb_type[4:-1].split(","))
        return pa.map_(arrow_type(key), arrow_type(value))
    return _SCALARS[duckdb_type]


@functools.cache
def arrow_schema(table: Table) -> pa.Schema:
    """Built once per table: the parse asks for a dozen per module, and building one
    took longer than parsing a small module's allocations."""
    return pa.schema(
        [pa.field(c.name, arrow_type(c.type), nullable=c.nullable) for c in table.columns]
    )


def quote_identifier(name: str) -> str:
    """The one place identifiers are quoted for SQL text."""
    return '"' + name.replace('"', '""') + '"'


def sql_string(text: str) -> str:
    """A SQL string literal, for statements that bind no parameters: DDL comments, and
    ATTACH of the warehouse's path (duckdb 1.4 binds none there). Never for query values."""
    return "'" + text.replace("'", "''") + "'"


def create_statements() -> list[str]:
    statements = []
    for table in WAREHOUSE_TABLES:
        cols = ",\n  ".join(
            f"{quote_identifier(c.name)} {c.type}{'' if c.nullable else ' NOT NULL'}"
            + (f" USING COMPRESSION {c.compression}" if c.compression else "")
            for c in table.columns
        )
        statements.append(
            f"CREATE TABLE IF NOT EXISTS {quote_identifier(table.name)} (\n  {cols}\n)"
        )
    return statements


def comment_statements() -> list[str]:
    statements = []
    for table in WAREHOUSE_TABLES:
        name = quote_identifier(table.name)
        statements.append(f"COMMENT ON TABLE {name} IS {sql_string(table.doc)}")
        for c in table.columns:
            statements.append(
                f"COMMENT ON COLUMN {name}.{quote_identifier(c.name)} IS {sql_string(c.doc)}"
            )
    return statements


def sqlglot_schema() -> dict[str, dict[str, str]]:
    """{table: {column: type}} for sqlglot's optimizer to resolve columns against."""
    return {t.name: {c.name: c.type for c in t.columns} for t in WAREHOUSE_TABLES}


def markdown_reference() -> str:
    """docs/schema.md: the table reference, generated from the declarations."""
    lines = [
        "# Warehouse schema",
        "",
        f"Schema version {SCHEMA_VERSION}. Generated from `bufferhouse/schema/tables.py`;"
        " the same text is in the warehouse as `COMMENT ON` (see `duckdb_columns()`).",
        "",
    ]
    for table in WAREHOUSE_TABLES:
        lines += [f"## `{table.name}`", "", table.doc, "", "| column | type | description |"]
        lines.append("| --- | --- | --- |")
        for c in table.columns:
            null = "" if c.nullable else " NOT NULL"
            doc = c.doc.replace("|", "\\|")
            lines.append(f"| `{c.name}` | {c.type}{null} | {doc} |")
        lines.append("")
    return "\n".join(lines)
