"""Re-ingest at stat speed: a module whose files look as they did is known unread.

The warehouse's `file_stats` table keeps, per module loaded or found present, the
(path, size, mtime_ns, inode) of every file its content hash covers. An ingest stats
each module's files before it reads any: when every file shows what the row recorded,
the module is the content hash recorded, already held, and is not read at all. Any
difference (a file touched, grown, replaced, added beside it, gone) sends the module
down the ordinary road: read, hashed, and loaded only if that hash is new, so content
identity stays the rule and a stale row costs one read, never a wrong module.
`--rehash` (`rehash=True`) trusts no row.

A file changed within the resolution of its mtime after it was read could show the
stat it had when read (git's "racy" file): a row is recorded only for files last
modified at least RACY_NS before the ingest took their stats.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import duckdb

from bufferhouse.parse.discover import ModuleFiles
from bufferhouse.parse.results import ParseResult, Present

#: A file modified less than this long before its stat was taken is not recorded.
RACY_NS = 2_000_000_000

Stats = tuple[tuple[int, int, int], ...]  # (size, mtime_ns, inode) per file


@dataclass(frozen=True)
class Seen:
    """A module's files as recorded (a file_stats row)."""

    paths: tuple[str, ...]
    stats: Stats
    content_hash: str
    bytes_read: int


@dataclass(frozen=True)
class Looked:
    """A module's files as this ingest found them before reading them."""

    paths: tuple[str, ...]
    stats: Stats
    taken_ns: int

    @property
    def key(self) -> str:
        return self.paths[0]

    @property
    def settled(self) -> bool:
        """Every file last modified RACY_NS or more before its stat: safe to record."""
        return all(mtime <= self.taken_ns - RACY_NS for _, mtime, _ in self.stats)


def module_paths(files: object) -> tuple[str, ...] | None:
    """The absolute paths of every file a module's content hash covers (None: a group
    not known by its files, e.g. a profile's program, a log, a skipped group)."""
    if not isinstance(files, ModuleFiles) or files.xplane is not None or files.skip:
        return None
    paths = [p for _, p in files.content_files()]
    if files.hlo:
        paths.append(files.hlo)
    if not paths:
        return None
    return tuple(os.path.abspath(p) for p in paths)


def look(files: object, taken_ns: int | None = None) -> Looked | None:
    """Stat a module's files (None if a file cannot be statted or the group has none)."""
    paths = module_paths(files)
    if paths is None:
        return None
    stats = []
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            return None
        stats.append((st.st_size, st.st_mtime_ns, st.st_ino))
    return Looked(paths, tuple(stats), time.time_ns() if taken_ns is None else taken_ns)


def held_file_stats(con: duckdb.DuckDBPyConnection) -> dict[str, Seen]:
    """path -> the warehouse's file_stats row of the module whose first file it is."""
    table = con.sql(
        "SELECT path, paths, sizes, mtimes_ns, inodes, content_hash, bytes_read FROM file_stats"
    ).to_arrow_table()
    out = {}
    cols = [table.column(i).to_pylist() for i in range(table.num_columns)]
    for path, paths, sizes, mtimes, inodes, digest, nbytes in zip(*cols):
        out[path] = Seen(tuple(paths), tuple(zip(sizes, mtimes, inodes)), digest, nbytes)
    return out


def recognise(
    groups: Iterable[object],
    seen: Mapping[str, Seen],
    held: Mapping[str, int],
    max_bytes: int | None = None,
) -> tuple[list[tuple[object, ParseResult]], list[object], dict[int, Looked]]:
    """Split `groups` into those known by their files' stats alone (each with the
    Present result it would have had after reading) and those to read; and the stats
    taken of the latter, by id(group), to record once they are read."""
    known: list[tuple[object, ParseResult]] = []
    rest: list[object] = []
    looked: dict[int, Looked] = {}
    taken = time.time_ns()
    for g in groups:
        now = look(g, taken)
        if now is None:
            rest.append(g)
            continue
        row = seen.get(now.key)
        if (
            row is not None
            and row.paths == now.paths
            and row.stats == now.stats
            and row.content_hash in held
            and (max_bytes is None or row.bytes_read <= max_bytes)
        ):
            known.append((g, Present(content_hash=row.content_hash)))  # nothing read
        else:
            rest.append(g)
            looked[id(g)] = now
    return known, rest, looked


def record_row(looked: Looked, content_hash: str, bytes_read: int, run_id: int) -> dict:
    """The file_stats row of a module read this run."""
    sizes, mtimes, inodes = (list(x) for x in zip(*looked.stats))
    return {
        "path": looked.key,
        "paths": list(looked.paths),
        "sizes": sizes,
        "mtimes_ns": mtimes,
        "inodes": inodes,
        "content_hash": content_hash,
        "bytes_read": bytes_read,
        "run_id": run_id,
    }
