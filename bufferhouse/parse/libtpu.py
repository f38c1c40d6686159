"""libtpu's log as a companion of the modules of its directory (docs/discovery.md).

libtpu's stderr at TPU_STDERR_LOG_LEVEL=0 holds its memory summary of each compile
(parse/tpulog.py), with figures no dump file holds (memory_analysis()'s TPU temp
when the rule needs it, the generated code size). A log in a directory of dumps is
read once, at discovery, and each module it names unambiguously is given its summary
(tpulog.companions says when a log names several modules or none). The log is still
scanned for OOM messages as any other (it holds none: parse/oom passes libtpu's
summary over).
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Protocol

from bufferhouse.parse.oom.sizes import SizeError
from bufferhouse.parse.reader import READ_ERRORS, open_dump
from bufferhouse.parse.tpulog import (
    MARKERS,
    LibtpuCompanion,
    LibtpuLog,
    companions,
    is_libtpu_log,
    read_libtpu_log,
)

__all__ = ["attach_libtpu_logs", "read_log"]


class _Group(Protocol):
    directory: str
    stem: str
    xplane: str | None
    skip: str | None
    libtpu: LibtpuCompanion | None


def attach_libtpu_logs(
    groups: Sequence[_Group], dir_logs: dict[str, list[str]], module_name: Callable[[str], str]
) -> None:
    """Give each module group the libtpu log of its directory that names it, if any."""
    by_dir: dict[str, list[_Group]] = {}
    for group in groups:
        if group.xplane is None and group.skip is None and group.directory in dir_logs:
            by_dir.setdefault(group.directory, []).append(group)
    for directory, members in by_dir.items():
        logs = [(p, log) for p in dir_logs[directory] if (log := read_log(p)) is not None]
        if not logs:
            continue
        found = companions(logs, dict(Counter(module_name(g.stem) for g in members)))
        for group in members:
            group.libtpu = found.get(module_name(group.stem))


def read_log(path: str) -> LibtpuLog | str | None:
    """A log's libtpu summaries, why they cannot be read (a size that does not parse),
    or None when the file is not libtpu's log (holds no summary) or cannot be read
    (the OOM scan of the same file reports that). Read in chunks, then (only a log
    that holds a summary) line by line: a training log of gigabytes is never held."""
    try:
        if not _holds_summary(path):
            return None
        with open_dump(path) as f:
            lines = io.TextIOWrapper(f, encoding="utf-8", errors="replace")
            return read_libtpu_log(lines)
    except READ_ERRORS:
        return None
    except SizeError as exc:
        return f"{path}: {exc}"


def _holds_summary(path: str) -> bool:
    keep = max(len(m) for m in MARKERS)
    tail = b""
    with open_dump(path) as f:
        while chunk := f.read(1 << 20):
            if is_libtpu_log(tail + chunk):
                return True
            tail = chunk[-keep:]
    return False
