"""The input forms bufferhouse reads, each one source behind one contract, in claim order.

A source claims, from the one walk of the paths (parse/walk.py), the files of its form
and hands them on as groups, the unit of work of a parser: a module's dump files
(text, HloProto, a program of an XProf profile), a log to scan for OOM messages, a
device memory profile. Each group is then identified and read by parse_files. Adding
a form is a source here and a line in SOURCES.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from bufferhouse.parse.discover import (
    LogFile,
    ModuleFiles,
    ProfileFile,
    dump_groups,
    log_groups,
    profile_groups,
    walk_of,
)
from bufferhouse.parse.walk import Walk

Group = ModuleFiles | LogFile | ProfileFile


class Source(Protocol):
    """One input form: what it claims of a walk, as groups in a stable order."""

    name: str

    def claim(self, walk: Walk) -> Sequence[Group]: ...


@dataclass(frozen=True)
class _Source:
    name: str
    claims: object  # Callable[[Walk], Sequence[Group]]

    def claim(self, walk: Walk) -> Sequence[Group]:
        return self.claims(walk)  # type: ignore[operator]


#: Claim order: XLA's dump files (text, HloProto, XProf profiles; also the dumps inside
#: `--xla_dump_to=-` logs) first, then the logs scanned for OOM messages, then device
#: memory profiles (pprof), sniffed by content whatever their name.
SOURCES: tuple[Source, ...] = (
    _Source("dumps", dump_groups),
    _Source("oom logs", log_groups),
    _Source("device memory profiles", profile_groups),
)


def discover_all(paths: Iterable[str | os.PathLike[str]]) -> list[Group]:
    """Every group under `paths`: one walk, offered to each source in claim order."""
    walk = walk_of(paths)
    return [group for source in SOURCES for group in source.claim(walk)]
