"""Hand a parsed module's tables from a parser process to the writer without pickling.

Through the process pool's pipe, Arrow tables are pickled (a copy), written 64 KiB at
a time and read back under a lock all workers share: on the fleet benchmark the
workers spent about a fifth of their time there. Instead a worker writes the tables
as Arrow IPC streams into one file of a per-run directory in shared memory (tmpfs:
page cache, no disk), and the parent maps that file, reads the tables straight from
the mapping and unlinks the file at once, so the memory goes back when the writer
drops the tables. Where the file cannot be written (no /dev/shm, a small one), the
tables go through the pipe as before.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

_PREFIX = "bufferhouse-ingest-"
_SHARED = Path("/dev/shm")
_count = itertools.count()
_BUFFER = 1 << 20


@dataclass(frozen=True)
class Shipped:
    """Where a module's tables wait: a file and each table's (name, offset, length)."""

    path: str
    parts: tuple[tuple[str, int, int], ...]


def make_directory() -> str | None:
    """A directory for this run's hand-offs (None: use the pipe), after removing those
    that runs killed before they could clean up left behind."""
    root = _SHARED if _SHARED.is_dir() else Path(tempfile.gettempdir())
    for stale in root.glob(f"{_PREFIX}*"):
        pid = stale.name[len(_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)
    try:
        return tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=root)
    except OSError:
        return None


def remove_directory(directory: str | None) -> None:
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        pass
    return True


def ship(tables: dict[str, pa.Table], directory: str | None) -> Shipped | dict[str, pa.Table]:
    """In the worker: the tables written to `directory`, or themselves if that fails."""
    if directory is None:
        return tables
    path = os.path.join(directory, f"{os.getpid()}-{next(_count)}.arrow")
    parts = []
    try:
        # Buffered: a small module's dozen tables are many small writes, and the
        # system calls took longer than the serializing.
        with pa.OSFile(path, "wb") as raw, pa.BufferedOutputStream(raw, _BUFFER) as sink:
            for name, table in tables.items():
                start = sink.tell()
                with pa.ipc.new_stream(sink, table.schema) as writer:
                    writer.write_table(table)
                parts.append((name, start, sink.tell() - start))
    except OSError:  # full or missing shared memory: the pipe still works
        with contextlib.suppress(OSError):
            os.unlink(path)
        return tables
    return Shipped(path, tuple(parts))


def receive(tables: Shipped | dict[str, pa.Table]) -> dict[str, pa.Table]:
    """In the parent: the tables, read from the mapped file, which is unlinked at once."""
    if not isinstance(tables, Shipped):
        return tables
    try:
        with pa.memory_map(tables.path) as source:
            data = source.read_buffer()  # the mapping outlives the file and `source`
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tables.path)
    return {
        name: pa.ipc.open_stream(data.slice(start, length)).read_all()
        for name, start, length in tables.parts
    }
