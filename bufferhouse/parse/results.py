"""What parsing one group gives back: one type per kind of record and outcome.

A worker (or a Spark task) returns one of these for each group it was handed; the
writer and load/ tell them apart by type (`match`), never by a string. Every result
says how many bytes were read for it (`bytes_read`); a module's identity is its
`content_hash`, known once its files were hashed (not for a group that failed before).

- ParsedModule, ParsedEvents, ParsedSnapshot: a record of its kind, read, to be written
  (ParsedEvents: a log's OOM events; some of them may be held already).
- Present: a module the sink holds by its content hash: nothing parsed, only labelled.
- Skipped: a file that holds no record (an HloProto without buffer assignment, a pprof
  profile of another kind), with why; not an error.
- Quiet: a log without OOM messages: quietly nothing.
- Failed: bad input (or a bug of ours), with its located error; the batch goes on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bufferhouse.errors import DumpError

if TYPE_CHECKING:
    import pyarrow as pa

    from bufferhouse.parse.discover import ModuleFiles
    from bufferhouse.parse.oom import LogEvents
    from bufferhouse.parse.pprof import SnapshotTables

__all__ = [
    "Failed",
    "ParseResult",
    "ParsedEvents",
    "ParsedModule",
    "ParsedSnapshot",
    "Present",
    "Quiet",
    "Skipped",
    "outcome_name",
]


@dataclass(kw_only=True)
class ParsedModule:
    """A module read: its row and tables (without module_id), and what it warns of."""

    content_hash: str
    bytes_read: int
    row: dict
    tables: dict[str, pa.Table]
    warnings: list[DumpError] = field(default_factory=list)
    #: A second module from the same group: the proto beside a text dump of another
    #: compile (their assignments differ), with the files it was read from.
    companion: tuple[ModuleFiles, ParsedModule] | None = None


@dataclass(kw_only=True)
class ParsedEvents:
    """A log's OOM events (at least one)."""

    events: LogEvents
    bytes_read: int


@dataclass(kw_only=True)
class ParsedSnapshot:
    """A device memory profile's snapshot, whole."""

    snapshot: SnapshotTables
    content_hash: str
    bytes_read: int


@dataclass(kw_only=True)
class Present:
    """A module the sink holds already (by its content hash): only labelled."""

    content_hash: str
    bytes_read: int = 0
    warnings: list[DumpError] = field(default_factory=list)


@dataclass(kw_only=True)
class Skipped:
    """A file that holds no record; `error` says why (not an error of the run)."""

    error: DumpError
    content_hash: str | None = None
    bytes_read: int = 0


@dataclass(kw_only=True)
class Quiet:
    """A log without OOM messages."""

    bytes_read: int = 0


@dataclass(kw_only=True)
class Failed:
    """A group that could not be read: its located error."""

    error: DumpError
    content_hash: str | None = None
    bytes_read: int = 0


ParseResult = ParsedModule | ParsedEvents | ParsedSnapshot | Present | Skipped | Quiet | Failed

_NAMES: dict[type, str] = {
    ParsedModule: "parsed",
    ParsedEvents: "events",
    ParsedSnapshot: "snapshot",
    Present: "present",
    Skipped: "skipped",
    Quiet: "quiet",
    Failed: "failed",
}


def outcome_name(result: ParseResult) -> str:
    """The result's word where one is printed or stored (Spark's `status` column)."""
    return _NAMES[type(result)]
