"""Reading a Parquet dataset back: one table as the warehouse has it, each module (OOM
event, snapshot) once, and the ids a dataset already holds (for writers that add to it).
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.dataset as pads

from bufferhouse.errors import ExportError
from bufferhouse.export.dataset import hive_partitioning, is_partitioned, table_schema
from bufferhouse.schema import TABLES_BY_NAME
from bufferhouse.schema.kinds import MODULE, OOM_EVENT, OWNED_BY_ANY, kept_rows_sql, kind_of


def read_table(root: str | os.PathLike[str], name: str, *, dedup: bool = False) -> pa.Table:
    """One table of a dataset as the warehouse has it: declared columns, order and types.

    Without `dedup`, every copy of every row (all parts, all runs); with it,
    only the rows of each record's representative copy (schema/kinds.py's rule):
    per hash the lowest run_id (then id), each copy having its own id.
    """
    root = Path(os.fspath(root))
    if name not in TABLES_BY_NAME:
        raise ExportError(f"no table {name!r}; valid tables: {', '.join(TABLES_BY_NAME)}")
    table = TABLES_BY_NAME[name]
    schema = table_schema(table)
    base = root / name
    files = sorted(str(p) for p in base.rglob("*.parquet")) if base.is_dir() else []
    if not files:
        return schema.empty_table()
    partitioning = hive_partitioning() if is_partitioned(table) else None
    data = pads.dataset(
        files, format="parquet", partitioning=partitioning, partition_base_dir=str(base)
    )
    got = data.to_table()
    if dedup and is_partitioned(table) and name != "runs":
        got = _dedup(root, name, got)
    return got.select(schema.names).cast(schema)


def _dedup(root: Path, name: str, data: pa.Table) -> pa.Table:
    """The rows of `data` (table `name`, every copy) a reader keeps: the dedup rule of
    schema/kinds.py, run in an in-memory DuckDB over the raw tables it reads."""
    table = TABLES_BY_NAME[name]
    kinds = [kind_of(name)] if name != OWNED_BY_ANY else [MODULE, OOM_EVENT]
    con = duckdb.connect()
    try:
        con.register(f"raw_{name}", data)
        kept: dict[str, str] = {}
        for kind in kinds:
            head = kind.table.name
            if head != name:
                con.register(f"raw_{head}", read_table(root, head))
            kept[head] = f"({kept_rows_sql(kind.table, 'raw_{}'.format, kept.get)})"
        sql = kept_rows_sql(table, "raw_{}".format, kept.get)
        return con.sql(sql).to_arrow_table()
    finally:
        con.close()


def _known_ids(root: str | os.PathLike[str], table: str, key: str, id_: str) -> dict[str, int]:
    """key -> id of the rows already in a dataset's `table` (of one held twice, its lowest
    id): to skip them on a re-run and label them."""
    base = Path(os.fspath(root)) / table
    files = [str(p) for p in base.rglob("*.parquet")] if base.is_dir() else []
    if not files:
        return {}
    held = pads.dataset(files, format="parquet").to_table(columns=[key, id_])
    ids: dict[str, int] = {}
    for hash_, row_id in zip(*held.to_pydict().values()):
        ids[hash_] = min(row_id, ids.get(hash_, row_id))
    return ids


def known_event_ids(root: str | os.PathLike[str]) -> dict[str, int]:
    """event_hash -> event_id of the OOM events already in a dataset."""
    return _known_ids(root, "oom_events", "event_hash", "event_id")


def known_module_ids(root: str | os.PathLike[str]) -> dict[str, int]:
    """content_hash -> module_id of the modules already in a dataset."""
    return _known_ids(root, "modules", "content_hash", "module_id")


def known_snapshot_ids(root: str | os.PathLike[str]) -> dict[str, int]:
    """snapshot_hash -> snapshot_id of the device memory profiles already in a dataset."""
    return _known_ids(root, "runtime_snapshots", "snapshot_hash", "snapshot_id")
