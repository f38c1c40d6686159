"""The shapes that cross between driver, executors and Spark SQL: Spark types of
the declared tables, the row schemas of module groups and parsed tables, and
the encodings of those rows (a module group as columns, a table as Arrow IPC).
"""

from __future__ import annotations

import json

import pyarrow as pa

from bufferhouse.errors import DumpError, MissingExtraError
from bufferhouse.export.dataset import PARTITION, is_partitioned
from bufferhouse.parse.discover import ModuleFiles
from bufferhouse.schema import Table


def pyspark_modules():
    """pyspark's functions and window modules, imported on first use (deferred:
    pyspark is the optional `spark` extra)."""
    try:
        import pyspark  # noqa: F401
        from pyspark.sql import functions, window
    except ImportError:
        raise MissingExtraError("pyspark", "spark", "bufferhouse.spark") from None
    return functions, window


_SPARK_SCALARS = {
    "BIGINT": "bigint",
    "INTEGER": "int",
    "DOUBLE": "double",
    "BOOLEAN": "boolean",
    "VARCHAR": "string",
    "TIMESTAMP": "timestamp_ntz",  # DuckDB TIMESTAMP has no time zone
}


def spark_type(duckdb_type: str) -> str:
    """Spark SQL type of a declared column type."""
    if duckdb_type.endswith("[]"):
        return f"array<{spark_type(duckdb_type[:-2])}>"
    if duckdb_type.startswith("MAP("):
        key, value = (p.strip() for p in duckdb_type[4:-1].split(","))
        return f"map<{spark_type(key)},{spark_type(value)}>"
    return _SPARK_SCALARS[duckdb_type]


def spark_schema(table: Table, *, partition: bool = False) -> str:
    """DDL schema string of a table; with `partition`, plus run_id if it lacks one."""
    cols = [f"`{c.name}` {spark_type(c.type)}" for c in table.columns]
    if partition and is_partitioned(table) and PARTITION not in table.column_names:
        cols.append(f"`{PARTITION}` bigint")
    return ", ".join(cols)


#: One row per module: the files `discover` grouped for it.
GROUP_SCHEMA = (
    "directory string, stem string, buffer_assignment string, `values` string, "
    "live_range string, usage_report string, hlo string, proto string, xplane string, "
    "program string, plane_offset bigint, xplane_backend string, skip string, problems string"
)
GROUP_FIELDS = (
    "directory",
    "stem",
    "buffer_assignment",
    "values",
    "live_range",
    "usage_report",
    "hlo",
    "proto",
    "xplane",
    "program",
    "plane_offset",
    "xplane_backend",
    "skip",
)


def group_row(files: ModuleFiles) -> dict:
    """A module group as a GROUP_SCHEMA row (its problems as JSON)."""
    row = {name: getattr(files, name) for name in GROUP_FIELDS}
    row["problems"] = json.dumps([[e.path, e.line, e.message, e.text] for e in files.problems])
    return row


def group_of(row: dict) -> ModuleFiles:
    """The module group a GROUP_SCHEMA row holds."""
    problems = [DumpError(*p) for p in json.loads(row.get("problems") or "[]")]
    fields = {name: row.get(name) for name in GROUP_FIELDS}
    fields["plane_offset"] = fields["plane_offset"] or 0
    return ModuleFiles(**fields, problems=problems)


#: One row per (module, table): that table's rows of the module as an Arrow IPC stream.
PARSED_SCHEMA = (
    "content_hash string, module_id bigint, status string, `table` string, "
    "message string, data binary"
)
#: Table name of the rows that carry the module row (modules) and failures.
MODULE_ROW = "modules"
FAILURE = "_failure"


def parsed_arrow_schema() -> pa.Schema:
    """PARSED_SCHEMA as an Arrow schema (what parse_batches yields)."""
    return pa.schema(
        [
            ("content_hash", pa.string()),
            ("module_id", pa.int64()),
            ("status", pa.string()),
            ("table", pa.string()),
            ("message", pa.string()),
            ("data", pa.binary()),
        ]
    )


#: One row per module group an `ingest` task handled.
INGEST_SCHEMA = "run_id bigint, stem string, status string, module_id bigint, message string"


def to_ipc(table: pa.Table) -> bytes:
    """A table as Arrow IPC stream bytes (one PARSED_SCHEMA data cell)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def from_ipc(data: bytes) -> pa.Table:
    """The table of one PARSED_SCHEMA data cell."""
    return pa.ipc.open_stream(data).read_all()
