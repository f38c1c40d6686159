"""The runtime tables (device memory profiles) in a Parquet dataset: what is
exported, which copy a reader keeps, and the attach views, in one place.

Snapshots go like OOM events: `runtime_snapshots` in the partition of the run
that loaded it, its samples, frames and labels in the same partition (they
have no run_id of their own: it is the snapshot's). A dataset written by
several exports may hold one snapshot twice; readers keep per `snapshot_hash`
the copy with the lowest run_id (then snapshot_id), its samples and frames,
and the labels of every copy on it.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

from bufferhouse.export.dataset import PARTITION
from bufferhouse.schema import quote_identifier as q

HEAD = "runtime_snapshots"
#: Tables whose rows belong to one snapshot (by snapshot_id).
MEMBERS = ("runtime_samples", "runtime_frames")
LABELS = "runtime_labels"
TABLES = (HEAD, *MEMBERS, LABELS)


def chosen_snapshots_sql(labels: int) -> str:
    """(snapshot_id, run_id) of the snapshots to export: those carrying every label,
    `labels` (key, value) pairs bound like the modules' (parquet._chosen_modules_sql)."""
    sql = f"SELECT snapshot_id, run_id FROM {HEAD}"
    condition = f"snapshot_id IN (SELECT snapshot_id FROM {LABELS} WHERE key = ? AND value = ?)"
    if labels:
        sql += " WHERE " + " AND ".join([condition] * labels)
    return sql


def export_sql(name: str, cols: str, labels: int) -> str:
    """Rows of a runtime table to export, each with its partition's run_id last."""
    chosen = chosen_snapshots_sql(labels)
    if name == HEAD:
        return (
            f"SELECT {cols}, t.run_id AS {PARTITION} FROM {HEAD} AS t "
            f"WHERE t.snapshot_id IN (SELECT snapshot_id FROM ({chosen}))"
        )
    return (
        f"SELECT {cols}, c.run_id AS {PARTITION} FROM {name} AS t "
        f"JOIN ({chosen}) AS c ON c.snapshot_id = t.snapshot_id"
    )


def _keep(heads: str) -> str:
    return (
        f"SELECT snapshot_id, run_id, snapshot_hash FROM {heads} QUALIFY row_number() "
        "OVER (PARTITION BY snapshot_hash ORDER BY run_id, snapshot_id) = 1"
    )


def dedup_sql(name: str) -> str:
    """The rows a reader keeps of `raw` (a runtime table read whole, with run_id), given
    `raw_heads` (runtime_snapshots read whole)."""
    keep = _keep("raw_heads")
    if name == LABELS:
        return (
            "SELECT k.snapshot_id, r.key, r.value, min(r.run_id) AS run_id FROM raw AS r "
            "JOIN raw_heads AS c USING (snapshot_id) "
            f"JOIN ({keep}) AS k ON k.snapshot_hash = c.snapshot_hash GROUP BY ALL"
        )
    return f"SELECT r.* FROM raw AS r SEMI JOIN ({keep}) AS k USING (snapshot_id, run_id)"


def dedup(name: str, data: pa.Table, heads: pa.Table) -> pa.Table:
    """The rows of `data` (runtime table `name`, every copy) a reader keeps."""
    con = duckdb.connect()
    try:
        con.register("raw_heads", heads)
        con.register("raw", data)
        return con.sql(dedup_sql(name)).to_arrow_table()
    finally:
        con.close()


def view_body(name: str, columns: list[str], raw_schema: str) -> str:
    """The attach view of a runtime table over `raw_schema`'s views of the files."""
    raw = f"{raw_schema}.{name}"
    if name == HEAD:
        cols = ", ".join(f"r.{q(c)}" for c in columns)
        return f"SELECT {cols} FROM ({_keep(raw)}) AS k JOIN {raw} AS r USING (snapshot_id, run_id)"
    if name == LABELS:
        cols = ", ".join(f"{'s' if c == 'snapshot_id' else 'r'}.{q(c)}" for c in columns)
        return (
            f"SELECT DISTINCT {cols} FROM {raw} AS r "
            f"JOIN {raw_schema}.{HEAD} AS c ON c.snapshot_id = r.snapshot_id "
            f"JOIN {HEAD} AS s ON s.snapshot_hash = c.snapshot_hash"
        )
    cols = ", ".join(f"r.{q(c)}" for c in columns)
    return (
        f"SELECT {cols} FROM {raw} AS r SEMI JOIN {HEAD} AS s "
        f"ON s.snapshot_id = r.snapshot_id AND s.run_id = r.{PARTITION}"
    )
