"""Device memory profiles (pprof, as jax writes them): find them, read them, make rows.

`looks_like_profile(path)` sniffs a file (gzip, then a Profile's first field);
`read_profile(path)` reads one whole into a Snapshot (decode.py, the typed
reading in snapshot.py) and its tables (rows.py). Not modules: a snapshot is
identified by its snapshot_hash, so a profile read again adds nothing.
"""

from __future__ import annotations

import gzip
import zlib

from bufferhouse.errors import DumpError
from bufferhouse.parse.pprof.decode import (
    GZIP_MAGIC,
    NotMemoryProfile,
    content_hash,
    gunzip,
    read_snapshot,
)
from bufferhouse.parse.pprof.rows import SnapshotTables, snapshot_tables
from bufferhouse.parse.pprof.snapshot import Frame, LiveSample, Snapshot, is_jax_file
from bufferhouse.parse.proto import wire

__all__ = [
    "Frame",
    "LiveSample",
    "NotMemoryProfile",
    "Snapshot",
    "SnapshotTables",
    "content_hash",
    "gunzip",
    "is_jax_file",
    "looks_like_profile",
    "read_file",
    "read_snapshot",
    "snapshot_tables",
]

#: Names a device memory profile usually has: sniffed even when their head is damaged,
#: so a cut profile is an error that names it rather than a file silently skipped.
PROFILE_SUFFIXES = (".prof", ".pprof", ".pb.gz")


def looks_like_profile(path: str) -> bool:
    """A gzip file whose first field is a Profile's sample_type (field 1) holding a
    ValueType, as every pprof writer puts it first; or a file named like a profile."""
    try:
        with open(path, "rb") as f:
            if f.read(2) != GZIP_MAGIC:
                return path.endswith(PROFILE_SUFFIXES) and not path.endswith(".hlo.pb.gz")
        with gzip.open(path, "rb") as f:
            head = f.read(32)
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile):
        return path.endswith(PROFILE_SUFFIXES)
    try:
        number, kind, start, end = next(wire.fields(head[: 2 + head[1]] if len(head) > 1 else b""))
        inner = list(wire.fields(head[start:end]))
    except (StopIteration, wire.WireError, IndexError):
        return False
    return (
        (number, kind) == (1, wire.LEN)
        and bool(inner)
        and all(n in (1, 2) and w == wire.VARINT for n, w, _, _ in inner)
    )


def read_file(path: str, max_bytes: int | None = None) -> Snapshot:
    """One profile file read whole (raises DumpError, located)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise DumpError(path, 0, f"cannot read file: {exc}") from None
    return read_snapshot(data, path, max_bytes)
