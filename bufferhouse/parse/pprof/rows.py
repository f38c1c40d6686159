"""A Snapshot as the warehouse's runtime tables (runtime_snapshots, _samples, _frames).

The parser does not know snapshot ids: `snapshot_id` is 0 in every table, and
the sink that takes the snapshot sets the id it assigns (load.writer), after
checking that it does not hold the snapshot_hash already.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass

import pyarrow as pa

from bufferhouse.parse.pprof.snapshot import Snapshot
from bufferhouse.schema import TABLES_BY_NAME, arrow_schema


@dataclass
class SnapshotTables:
    """One snapshot ready for a sink: its row and its samples and frames, whole."""

    content_hash: str
    snapshot: pa.Table
    samples: pa.Table
    frames: pa.Table

    def tables(self) -> dict[str, pa.Table]:
        return {
            "runtime_snapshots": self.snapshot,
            "runtime_samples": self.samples,
            "runtime_frames": self.frames,
        }


def _taken_at(snapshot: Snapshot, path: str) -> tuple[dt.datetime | None, str | None]:
    if snapshot.time_nanos is not None:
        seconds = snapshot.time_nanos / 1e9
        return dt.datetime.fromtimestamp(seconds, dt.UTC).replace(tzinfo=None), "profile"
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        return None, None
    return dt.datetime.fromtimestamp(mtime, dt.UTC).replace(tzinfo=None), "file"


def snapshot_tables(snapshot: Snapshot, path: str, stored_path: str) -> SnapshotTables:
    """The tables of one snapshot; `stored_path` is the path as the warehouse keeps it."""
    taken_at, source = _taken_at(snapshot, path)
    buffers = [s for s in snapshot.samples if s.kind == "buffer"]
    executables = [s for s in snapshot.samples if s.kind == "executable"]
    row = {
        "snapshot_id": 0,
        "snapshot_hash": snapshot.content_hash,
        "run_id": None,
        "path": stored_path,
        "taken_at": taken_at,
        "time_source": source,
        "bytes_read": snapshot.bytes_read,
        "sample_types": list(snapshot.sample_types),
        "buffer_count": sum(s.count for s in buffers),
        "buffer_bytes": sum(s.bytes for s in buffers),
        "executable_count": sum(s.count for s in executables),
        "executable_bytes": sum(s.bytes for s in executables),
        "device_count": len({s.device for s in buffers if s.device is not None}),
        "stack_count": len(snapshot.stacks),
    }
    samples = []
    for i, s in enumerate(snapshot.samples):
        source_frame = snapshot.source_of(s.stack)
        samples.append(
            {
                "snapshot_id": 0,
                "sample_index": i,
                "kind": s.kind,
                "device": s.device,
                "count": s.count,
                "bytes": s.bytes,
                "stack_id": s.stack,
                "source_file": source_frame.file if source_frame else None,
                "source_line": source_frame.line if source_frame else None,
                "source_function": source_frame.function if source_frame else None,
                "labels": list(s.labels),
            }
        )
    frames = [
        {
            "snapshot_id": 0,
            "stack_id": stack_id,
            "depth": depth,
            "function": f.function,
            "file": f.file,
            "line": f.line,
            "in_jax": f.in_jax,
        }
        for stack_id, stack in enumerate(snapshot.stacks)
        for depth, f in enumerate(stack)
    ]
    return SnapshotTables(
        snapshot.content_hash,
        _table("runtime_snapshots", [row]),
        _table("runtime_samples", samples),
        _table("runtime_frames", frames),
    )


def _table(name: str, rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=arrow_schema(TABLES_BY_NAME[name]))
