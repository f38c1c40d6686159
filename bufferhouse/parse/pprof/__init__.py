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

#: Names a device memory profile usually has. A file so named that fails the sniff is
#: still read (and fails, located) when it is gzip data, or when given by name: a cut
#: profile is an error that names it, not a file silently skipped. In a directory, one
#: that is not gzip is someone else's (cProfile writes `.prof` files too).
PROFILE_SUFFIXES = (".prof", ".pprof", ".pb.gz")


def looks_like_profile(path: str, explicit: bool = False) -> bool:
    """A gzip file whose first field is a Profile's sample_type (field 1) holding a
    ValueType, as every pprof writer puts it first; or a file named like a profile
    (see PROFILE_SUFFIXES)."""
    named = path.endswith(PROFILE_SUFFIXES)
    try:
        with open(path, "rb") as f:
            if f.read(2) != GZIP_MAGIC:
                return named and explicit
        with gzip.open(path, "rb") as f:
            head = f.read(32)
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile):
        return named
    return _starts_with_value_type(head) or (named and explicit)


def _starts_with_value_type(head: bytes) -> bool:
    """Field 1, length-delimited, of a few bytes, holding only varint fields 1 and 2."""
    if len(head) < 2 or head[0] != (1 << 3 | wire.LEN) or head[1] & 0x80:
        return False
    inner = head[2 : 2 + head[1]]
    if not inner or len(inner) != head[1]:
        return False
    try:
        found = [(n, w) for n, w, _, _ in wire.fields(inner)]
    except wire.WireError:
        return False
    return all(n in (1, 2) and w == wire.VARINT for n, w in found)


def read_file(path: str, max_bytes: int | None = None) -> Snapshot:
    """One profile file read whole (raises DumpError, located)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise DumpError(path, 0, f"cannot read file: {exc}") from None
    return read_snapshot(data, path, max_bytes)
