"""The layout of a bufferhouse Parquet dataset, derived from the declared schema.

One directory per table, Hive-partitioned by ingest run:

    OUT/
      _schema.json                      every table and column with its doc
      README.md                         the same, for people
      modules/run_id=<run>/part-*.parquet
      allocations/run_id=<run>/part-*.parquet
      ...
      memory_spaces/memory_spaces.parquet   reference tables: not partitioned
      schema_info/schema_info.parquet

`run_id` lives in the directory name, not in the files (the Hive convention
that Spark, Trino, DuckDB and pyarrow all read). Tables whose rows belong to a
module carry the run of that module. A module may appear in several runs (two
machines parsed the same dump); readers keep the copy of the lowest run_id and
only the rows of that (module_id, run_id). A writer never puts one module
twice into one run.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as pads

from bufferhouse.errors import ExportError
from bufferhouse.schema import (
    SCHEMA_VERSION,
    TABLES,
    TABLES_BY_NAME,
    Table,
    arrow_type,
    markdown_reference,
)
from bufferhouse.version import __version__

PARTITION = "run_id"
#: Version of the dataset layout (directories, partitioning, metadata keys).
FORMAT_VERSION = 1
SCHEMA_FILE = "_schema.json"
README_FILE = "README.md"
#: Reference tables: the same rows from every writer, one file, not partitioned.
STATIC_TABLES: tuple[str, ...] = ("memory_spaces", "schema_info")
PARQUET_OPTIONS = {"compression": "zstd", "compression_level": 3}
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def is_partitioned(table: Table) -> bool:
    return table.name not in STATIC_TABLES


def hive_partitioning() -> pads.Partitioning:
    """The datasets' partitioning, typed: pyarrow (and pandas through it) infers a
    partition value past 32 bits as a string, or a category; passed this, int64."""
    return pads.partitioning(pa.schema([(PARTITION, pa.int64())]), flavor="hive")


def file_columns(table: Table) -> list[str]:
    """Columns stored in the Parquet files (the partition column is in the path)."""
    if not is_partitioned(table):
        return table.column_names
    return [c for c in table.column_names if c != PARTITION]


def file_schema(table: Table) -> pa.Schema:
    """Arrow schema of the table's files, with each column's doc as field metadata
    and the table's doc (and every column's, for readers that drop field metadata)
    as Parquet key-value metadata."""
    keep = set(file_columns(table))
    fields = [
        pa.field(c.name, arrow_type(c.type), nullable=c.nullable, metadata={"doc": c.doc})
        for c in table.columns
        if c.name in keep
    ]
    metadata = {
        "bufferhouse.table": table.name,
        "bufferhouse.doc": table.doc,
        "bufferhouse.schema_version": str(SCHEMA_VERSION),
        "bufferhouse.format_version": str(FORMAT_VERSION),
        "bufferhouse.columns": json.dumps({c.name: c.doc for c in table.columns}),
    }
    if is_partitioned(table):
        metadata["bufferhouse.partitioning"] = f"hive: {PARTITION} BIGINT"
    return pa.schema(fields, metadata=metadata)


def table_schema(table: Table) -> pa.Schema:
    """Arrow schema of the whole table as the warehouse has it (run_id included)."""
    return pa.schema(
        [
            pa.field(c.name, arrow_type(c.type), nullable=c.nullable, metadata={"doc": c.doc})
            for c in table.columns
        ],
        metadata={"bufferhouse.table": table.name, "bufferhouse.doc": table.doc},
    )


def resolve_tables(names: list[str] | None) -> list[Table]:
    """Tables to write, in schema order; `modules` always (the others join to it)."""
    if not names:
        return list(TABLES)
    unknown = [n for n in names if n not in TABLES_BY_NAME]
    if unknown:
        hint = ""
        if "values" in unknown:
            hint = " (the values table is hlo_values)"
        valid = ", ".join(t.name for t in TABLES)
        raise ExportError(f"no table {', '.join(map(repr, unknown))}{hint}; valid tables: {valid}")
    wanted = set(names) | {"modules"}
    return [t for t in TABLES if t.name in wanted]


def part_token() -> str:
    """A part-file name stem no other writer can pick: host, process and a random id."""
    import socket
    import uuid

    host = _SAFE.sub("_", socket.gethostname())[:40] or "host"
    return f"part-{host}-{os.getpid()}-{uuid.uuid4().hex[:12]}"


def partition_dir(root: Path, table: Table, run_id: int | None) -> Path:
    """Directory of one table (and run); names come only from the schema and an integer."""
    base = root / table.name
    if not is_partitioned(table):
        return base
    if run_id is None:
        raise ExportError(f"{table.name}: rows without a run_id cannot be partitioned")
    return base / f"{PARTITION}={int(run_id)}"


def schema_document() -> dict:
    """The content of _schema.json: layout plus every table and column with its doc."""
    tables = []
    for t in TABLES:
        in_file = set(file_columns(t))
        tables.append(
            {
                "name": t.name,
                "doc": t.doc,
                "path": f"{t.name}/",
                "partitioning": [PARTITION] if is_partitioned(t) else [],
                "per_module": t.per_module,
                "columns": [
                    {
                        "name": c.name,
                        "type": c.type,
                        "arrow_type": str(arrow_type(c.type)),
                        "nullable": c.nullable,
                        "in_file": c.name in in_file,
                        "doc": c.doc,
                    }
                    for c in t.columns
                ]
                + (
                    []
                    if PARTITION in t.column_names or not is_partitioned(t)
                    else [
                        {
                            "name": PARTITION,
                            "type": "BIGINT",
                            "arrow_type": "int64",
                            "nullable": False,
                            "in_file": False,
                            "doc": "Partition column (directory name): the ingest run of the "
                            "row's module (or OOM event). Not a warehouse column; bufferhouse's "
                            "readers drop it.",
                        }
                    ]
                ),
            }
        )
    return {
        "format": "bufferhouse-parquet",
        "format_version": FORMAT_VERSION,
        "schema_version": SCHEMA_VERSION,
        "written_by": f"bufferhouse {__version__}",
        "partitioning": {"flavor": "hive", "columns": {PARTITION: "BIGINT"}},
        "deduplication": "A module (content_hash) may appear under several run_id partitions, "
        "each copy with its own module_id; keep the copy with the lowest run_id (then "
        "module_id) and the rows of that (module_id, run_id) only.",
        "tables": tables,
    }


def readme_text() -> str:
    """README.md written beside the data: how to read it, then the table reference."""
    head = f"""# bufferhouse Parquet dataset

Written by bufferhouse {__version__} (warehouse schema version {SCHEMA_VERSION},
dataset format {FORMAT_VERSION}). One directory per table, zstd-compressed
Parquet, Hive-partitioned by ingest run: `TABLE/run_id=<run>/part-*.parquet`.
`memory_spaces` and `schema_info` are reference tables in one file each.
Column names, types and docs are those of the warehouse; the docs are also in
each file's key-value metadata (`bufferhouse.doc`, `bufferhouse.columns`, and
per field `doc`) and in `_schema.json`.

`run_id` is in the directory name, not in the files. Every table's rows carry
the run of their module (the OOM tables: of their event; the runtime tables: of
their snapshot), so tables without a
`run_id` column gain one when read as a Hive dataset; drop it to get the
warehouse's columns.

A module may be present under more than one run (several machines parsed the
same dump), each copy under its own `module_id` (ids grow in the order a writer
wrote its modules; `content_hash` is the module's identity). Keep, per
`content_hash`, the copy of `modules` with the lowest `run_id`, and of the
other tables the rows with that copy's `(module_id, run_id)`; `labels` is the
union over the copies. OOM events likewise: per `event_hash` the copy of
`oom_events` with the lowest `run_id`, the `oom_buffers` of that
`(event_id, run_id)`, `oom_labels` the union; snapshots of device memory
profiles the same way by `snapshot_hash` (`runtime_samples` and
`runtime_frames` of the kept `(snapshot_id, run_id)`, `runtime_labels` the
union). `bufferhouse attach` and
`bufferhouse.spark.register` do this.

```sh
bufferhouse attach THIS_DIR --db fleet-views.duckdb   # DuckDB views + bh_* macros
bufferhouse query top-modules --db fleet-views.duckdb
```

Every table has at least one file, with its columns and types even when it
has no rows. `run_id` is a BIGINT: polars, Spark and DuckDB infer it; pyarrow
and pandas infer a partition value past 32 bits as a string (a category in
pandas), so give them the partitioning schema:

```python
import pyarrow as pa, pyarrow.dataset as ds
run_id = ds.partitioning(pa.schema([("run_id", pa.int64())]), flavor="hive")
modules = ds.dataset("THIS_DIR/modules", partitioning=run_id).to_table()

import pandas as pd   # dtype_backend="pyarrow" keeps every declared type
modules = pd.read_parquet("THIS_DIR/modules", partitioning=run_id)

import polars as pl
modules = pl.read_parquet("THIS_DIR/modules/")

modules = spark.read.parquet("THIS_DIR/modules")
```

"""
    return head + markdown_reference().split("\n", 1)[1].lstrip("\n")


def write_metadata_files(root: Path) -> None:
    """_schema.json and README.md, replaced atomically (every writer writes the same)."""
    write_atomic(root / SCHEMA_FILE, (json.dumps(schema_document(), indent=2) + "\n").encode())
    write_atomic(root / README_FILE, readme_text().encode())


def write_atomic(path: Path, data: bytes) -> None:
    import uuid

    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def read_schema_document(root: Path) -> dict | None:
    path = root / SCHEMA_FILE
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ExportError(f"{path} is not a bufferhouse schema file: {exc}") from None


def check_schema_version(root: Path) -> None:
    doc = read_schema_document(root)
    if doc is None:
        return
    version = doc.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ExportError(
            f"{root} holds warehouse schema version {version}; this bufferhouse reads "
            f"version {SCHEMA_VERSION}. Export again with this release, or use the one "
            "that wrote it (see CHANGELOG.md)."
        )
