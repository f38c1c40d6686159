"""Device memory profiles (pprof, as jax writes them): find them, read them, make rows.

`looks_like_profile(path)` sniffs a file (gzip, then a Profile by content: sniff.py);
`read_profile(path)` reads one whole into a Snapshot (decode.py, the typed
reading in snapshot.py) and its tables (rows.py). Not modules: a snapshot is
identified by its snapshot_hash, so a profile read again adds nothing.
"""

from __future__ import annotations

from bufferhouse.errors import DumpError
from bufferhouse.parse.pprof.decode import (
    NotMemoryProfile,
    content_hash,
    gunzip,
    read_snapshot,
)
from bufferhouse.parse.pprof.rows import SnapshotTables, snapshot_tables
from bufferhouse.parse.pprof.snapshot import Frame, LiveSample, Snapshot, is_jax_file
from bufferhouse.parse.pprof.sniff import PROFILE_SUFFIXES, is_profile, looks_like_profile

__all__ = [
    "PROFILE_SUFFIXES",
    "Frame",
    "LiveSample",
    "NotMemoryProfile",
    "Snapshot",
    "SnapshotTables",
    "content_hash",
    "gunzip",
    "is_jax_file",
    "is_profile",
    "looks_like_profile",
    "read_file",
    "read_snapshot",
    "snapshot_tables",
]


def read_file(path: str, max_bytes: int | None = None) -> Snapshot:
    """One profile file read whole (raises DumpError, located)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise DumpError(path, 0, f"cannot read file: {exc}") from None
    return read_snapshot(data, path, max_bytes)
