"""Hand a parsed module's tables from a parser process to the writer without pickling.

Through the process pool's pipe, Arrow tables are pickled (a copy), written 64 KiB at
a time and read back under a lock all workers share: on the fleet benchmark the
workers spent about a fifth of their time there. Instead a worker writes the tables
as Arrow IPC streams into one file of a per-run directory in shared memory (tmpfs:
page cache, no disk), and the parent maps that file, reads the tables straight from
the mapping and unlinks the file at once, so the memory goes back when the writer
drops the tables. Where the file cannot be written (no /dev/shm, a small one), the
tables go through the pipe as before.

A run killed with kill -9 cannot remove its directory: the next run does
(`remove_leftovers`), with the named semaphores of the killed run's process pool,
which it listed there (`note_semaphores`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

_PREFIX = "bufferhouse-ingest-"
_SHARED = Path("/dev/shm")
_PROC = Path("/proc/self").parent
_count = itertools.count()
_BUFFER = 1 << 20
_SEMAPHORES = "semaphores"
#: The inode of a semaphore file in a line of /proc/self/maps.
_MAPPED_SEMAPHORE = re.compile(r"^\S+ \S+ \S+ \S+ (\d+) +/dev/shm/sem\.", re.MULTILINE)
#: multiprocessing's named semaphores.
_SEMAPHORE_NAME = re.compile(r"sem\.mp-[\w-]+")


@dataclass(frozen=True)
class Shipped:
    """Where a module's tables wait: a file and each table's (name, offset, length)."""

    path: str
    parts: tuple[tuple[str, int, int], ...]


def make_directory() -> str | None:
    """A directory for this run's hand-offs (None: use the pipe)."""
    try:
        return tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=_root())
    except OSError:
        return None


def _root() -> Path:
    return _SHARED if _SHARED.is_dir() else Path(tempfile.gettempdir())


def remove_directory(directory: str | None) -> None:
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)


def note_semaphores(directory: str | None) -> None:
    """Record in the run's directory the named semaphores this process holds (a process
    pool's queues make them). A run killed with its resource tracker leaves them in
    /dev/shm; the next run removes them by this list (`remove_leftovers`).

    glibc maps a semaphore's file under a temporary name before it links the real
    one, so /proc/self/maps names the temporary file: the inodes tell which are ours.
    """
    if directory is None:
        return
    try:
        maps = (_PROC / "self" / "maps").read_text()
    except OSError:  # no /proc: nothing to record
        return
    inodes = {int(m) for m in _MAPPED_SEMAPHORE.findall(maps)}
    names = []
    for path in _SHARED.glob("sem.mp-*"):
        with contextlib.suppress(OSError):
            if path.stat().st_ino in inodes:
                names.append(path.name)
    if names:
        with contextlib.suppress(OSError), open(os.path.join(directory, _SEMAPHORES), "a") as f:
            f.write("".join(f"{n}\n" for n in sorted(names)))


def remove_leftovers() -> list[str]:
    """Remove what runs killed before they could clean up left in shared memory: their
    hand-off directories (named by the pid of a process no longer alive) and the
    semaphores they recorded there. Returns what was removed."""
    removed = []
    root = _root()
    for stale in root.glob(f"{_PREFIX}*"):
        pid = stale.name[len(_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or alive(int(pid)):
            continue
        with contextlib.suppress(OSError):
            for name in (stale / _SEMAPHORES).read_text().split():
                if _SEMAPHORE_NAME.fullmatch(name):
                    with contextlib.suppress(OSError):
                        os.unlink(_SHARED / name)
                        removed.append(str(_SHARED / name))
        shutil.rmtree(stale, ignore_errors=True)
        removed.append(str(stale))
    return removed


def alive(pid: int) -> bool:
    """Whether process `pid` exists (a zombie, dead but not yet reaped, counts as gone)."""
    if _PROC.is_dir():
        try:
            stat = (_PROC / str(pid) / "stat").read_text()
        except OSError:
            return False
        return not stat[stat.rfind(")") + 2 :].startswith("Z")
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
