"""The input forms bufferhouse reads, each one source behind one contract, in claim order.

A source claims, from the one walk of the paths (parse/walk.py), the files of its form
and hands them on as groups, the unit of work of a parser: a module's dump files
(text, HloProto, a program of an XProf profile), a log to scan for OOM messages, a
device memory profile. Each group is then identified and read by parse_files. Adding
a form is a source here and a line in SOURCES.

A file that only adds to a module's figures is no source of its own: the dumps source
finds it in the same walk and hands it on in the module's group, as libtpu's log of a
compile (`ModuleFiles.libtpu`, parse/libtpu.py: a companion of the modules it names).
The oom logs source still scans that log as any other.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from bufferhouse.errors import DumpError
from bufferhouse.parse.discover import (
    LogFile,
    ModuleFiles,
    ProfileFile,
    dump_groups,
    is_companion,
    log_groups,
    profile_groups,
    walk_of,
)
from bufferhouse.parse.walk import Walk, file_identity

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
    """Every group under `paths`: one walk, offered to each source in claim order. A file
    given by name that no source claims is a failed group of its own, saying so."""
    walk = walk_of(paths)
    groups = [group for source in SOURCES for group in source.claim(walk)]
    named = [path for path, explicit in walk.files if explicit]
    if named:  # a stat per file found: only where some were given by name
        claimed = {file_identity(p) for g in groups for p in _files_of(g)}
        groups += [_unclaimed(p) for p in named if file_identity(p) not in claimed]
    return groups


def _files_of(group: Group) -> list[str]:
    """The files on disk a group stands for (a log's, for the dumps inside it)."""
    if isinstance(group, ModuleFiles):
        # directory: a log holding dumps; directory/stem: a file already failed by name
        found = [p for _, p in group.content_files()]
        found += [group.directory, os.path.join(group.directory, group.stem)]
        return found + [p for p in (group.hlo, group.xplane) if p]
    return [group.path]


def _unclaimed(path: str) -> ModuleFiles:
    """A file given by name that is none of the forms bufferhouse reads."""
    name = os.path.basename(path)
    why = (
        "a file XLA writes beside a module, without its buffer assignment"
        if is_companion(name)
        else "not a form bufferhouse reads"
    )
    forms = "buffer-assignment text, HloProto, XProf profile, log, device memory profile"
    group = ModuleFiles(os.path.dirname(path), name)
    group.problems.append(DumpError(path, 0, f"{why} (expected {forms}); not read"))
    return group
