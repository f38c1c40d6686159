"""OOM messages (RESOURCE_EXHAUSTED) in job logs: find them, parse them, make rows.

`scan_file(path)` finds every message in a log of any size (scan.py: marker
bytes first, then only the lines around a hit are decoded and parsed by
messages.py). `event_tables(...)` turns the events into the oom_events and
oom_buffers tables. Not modules: an event is identified by `event_hash`
(log name, byte offset, raw bytes), so a log read again adds nothing, and a
stored event whose bytes begin a longer read at the same place in a grown log is
replaced by it (load.writer; docs/oom.md).
"""

from bufferhouse.parse.discover import text_path
from bufferhouse.parse.oom.grammar import SIGNED_FIGURES
from bufferhouse.parse.oom.messages import Event, Problem, parse_event
from bufferhouse.parse.oom.rows import LogEvents, log_events
from bufferhouse.parse.oom.scan import (
    MARKERS,
    LogScan,
    event_hash,
    find_markers,
    log_key,
    raw_hash,
    scan_file,
)


def read_log(path: str) -> LogEvents:
    """The OOM events of one log file as tables (see rows.py); never raises for content."""
    return log_events(scan_file(path), text_path(path))


__all__ = [
    "MARKERS",
    "SIGNED_FIGURES",
    "Event",
    "LogEvents",
    "LogScan",
    "Problem",
    "event_hash",
    "find_markers",
    "log_events",
    "log_key",
    "parse_event",
    "raw_hash",
    "read_log",
    "scan_file",
]
