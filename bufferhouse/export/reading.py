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
from bufferhouse.export import runtime
from bufferhouse.export.dataset import hive_partitioning, is_partitioned, table_schema
from bufferhouse.schema import TABLES_BY_NAME


def read_table(root: str | os.PathLike[str], name: str, *, dedup: bool = False) -> pa.Table:
    """One table of a dataset as the warehouse has it: declared columns, order and types.

    Without `dedup`, every copy of every row (all parts, all runs); with it,
    only the rows of each module's representative copy: per content_hash the
    lowest run_id (then module_id), each copy having its own module_id.
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
    if name in ("oom_events", "oom_buffers", "oom_labels"):
        return _dedup_events(root, name, data)
    if name in runtime.TABLES:
        heads = read_table(root, runtime.HEAD) if name != runtime.HEAD else data
        return runtime.dedup(name, data, heads)
    modules = read_table(root, "modules") if name != "modules" else data
    con = duckdb.connect()
    try:
        con.register("raw_modules", modules)
        con.register("raw", data)
        keep = (
            "SELECT module_id, run_id, content_hash FROM raw_modules "
            "QUALIFY row_number() OVER (PARTITION BY content_hash ORDER BY run_id, module_id) = 1"
        )
        if name == "modules":
            sql = f"SELECT r.* FROM raw AS r SEMI JOIN ({keep}) AS k USING (module_id, run_id)"
        elif name == "labels":
            # every copy's labels count (on the kept copy), like a re-ingest that adds labels
            sql = (
                "SELECT k.module_id, r.key, r.value, min(r.run_id) AS run_id FROM raw AS r "
                "JOIN raw_modules AS c USING (module_id) "
                f"JOIN ({keep}) AS k ON k.content_hash = c.content_hash GROUP BY ALL"
            )
        elif name == "diagnostics":
            events = read_table(root, "oom_events", dedup=True)
            con.register("kept_events", events.select(["event_id", "run_id"]))
            sql = (
                f"SELECT r.* FROM raw AS r WHERE (r.module_id IS NULL AND (r.event_id IS NULL "
                "OR EXISTS (SELECT 1 FROM kept_events AS e WHERE e.event_id = r.event_id "
                "AND e.run_id = r.run_id))) OR EXISTS "
                f"(SELECT 1 FROM ({keep}) AS k WHERE k.module_id = r.module_id "
                "AND k.run_id = r.run_id)"
            )
        else:
            sql = f"SELECT r.* FROM raw AS r SEMI JOIN ({keep}) AS k USING (module_id, run_id)"
        return con.sql(sql).to_arrow_table()
    finally:
        con.close()


def _dedup_events(root: Path, name: str, data: pa.Table) -> pa.Table:
    """OOM events as modules: per event_hash the copy of the lowest run_id (then
    event_id), its buffers, and every copy's labels on it."""
    events = read_table(root, "oom_events") if name != "oom_events" else data
    con = duckdb.connect()
    try:
        con.register("raw_events", events)
        con.register("raw", data)
        keep = (
            "SELECT event_id, run_id, event_hash FROM raw_events QUALIFY row_number() "
            "OVER (PARTITION BY event_hash ORDER BY run_id, event_id) = 1"
        )
        if name == "oom_events":
            sql = f"SELECT r.* FROM raw AS r SEMI JOIN ({keep}) AS k USING (event_id, run_id)"
        elif name == "oom_labels":
            sql = (
                "SELECT k.event_id, r.key, r.value, min(r.run_id) AS run_id FROM raw AS r "
                "JOIN raw_events AS c USING (event_id) "
                f"JOIN ({keep}) AS k ON k.event_hash = c.event_hash GROUP BY ALL"
            )
        else:
            sql = f"SELECT r.* FROM raw AS r SEMI JOIN ({keep}) AS k USING (event_id, run_id)"
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
