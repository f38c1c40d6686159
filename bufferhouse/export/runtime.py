"""The runtime tables (device memory profiles) in a Parquet dataset: what is exported.

Snapshots go like OOM events: `runtime_snapshots` in the partition of the run
that loaded it, its samples, frames and labels in the same partition (they
have no run_id of their own: it is the snapshot's). A dataset written by
several exports may hold one snapshot twice; which copy a reader keeps is the
dedup rule of schema/kinds.py, as for modules and OOM events.
"""

from __future__ import annotations

from bufferhouse.export.dataset import PARTITION

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
