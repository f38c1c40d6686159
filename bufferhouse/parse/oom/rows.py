"""A log's OOM events as the warehouse's tables (oom_events, oom_buffers) in Arrow.

The parser does not know event ids: `event_id` holds the event's ordinal in
its log (0, 1, ...), in both tables, and the sink that takes the events
replaces it with the ids it assigns (load.writer), after dropping the events
whose event_hash it already holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from bufferhouse.errors import DumpError
from bufferhouse.parse.oom.messages import Event
from bufferhouse.parse.oom.scan import LogScan, event_hash
from bufferhouse.schema import TABLES_BY_NAME, arrow_schema

#: Figure name -> oom_events column. Run-time blocks are matched by their last part.
FIGURE_COLUMNS: dict[str, str] = {
    "requested": "requested_bytes",
    "capacity": "capacity_bytes",
    "used": "used_bytes",
    "exceeded": "exceeded_bytes",
    "free": "free_bytes",
    "parameter_allocation": "parameter_bytes",
    "constant_allocation": "constant_bytes",
    "maybe_live_out_allocation": "maybe_live_out_bytes",
    "preallocated_temp_allocation": "temp_bytes",
    "preallocated_temp_fragmentation": "temp_fragmentation_bytes",
    "total_allocation": "total_allocation_bytes",
    "total_fragmentation": "total_fragmentation_bytes",
    "total_usage": "total_usage_bytes",
    "total_usage/reserved": "reserved_bytes",
    "total_usage/program": "program_bytes",
    "total_usage/arguments": "arguments_bytes",
    "output": "output_bytes",
    "output_shared": "output_shared_bytes",
    "program_requirement": "program_requirement_bytes",
    "program_requirement/global": "global_bytes",
    "program_requirement/scoped": "scoped_bytes",
    "program_requirement/hlo_temp": "hlo_temp_bytes",
    "program_requirement/hlo_temp/unpadded": "unpadded_bytes",
    "program_requirement/hlo_temp/padded": "padded_bytes",
    "program_requirement/hlo_temp/fragmentation": "hlo_temp_fragmentation_bytes",
    "hbm_capacity/currently_allocated": "allocated_bytes",
    "hbm_capacity/program_requirement": "program_requirement_bytes",
    "persistent_allocations/arguments": "arguments_bytes",
    "persistent_allocations/output": "output_bytes",
}
#: Event fields (messages.Event.fields) -> oom_events column.
FIELD_COLUMNS: dict[str, str] = {
    "error_type": "error_type",
    "error_code": "error_code",
    "error_name": "error_name",
    "program_name": "program_name",
    "memory_space": "memory_space",
    "total_fragmentation_percent": "total_fragmentation_percent",
    "hlo_temp_utilization": "hlo_temp_utilization",
}

EVENTS = TABLES_BY_NAME["oom_events"]
BUFFERS = TABLES_BY_NAME["oom_buffers"]


@dataclass
class LogEvents:
    """One log's events ready for a sink: rows, and the problems of each event."""

    path: str
    events: pa.Table
    buffers: pa.Table
    #: Per event (by ordinal): its problems as DumpErrors naming the log and line.
    problems: list[list[DumpError]] = field(default_factory=list)
    #: Problems of the file itself (a cut .gz), not of one event.
    file_problems: list[DumpError] = field(default_factory=list)
    bytes_read: int = 0
    #: Per event: its raw bytes, to tell a stored event that is this one cut short.
    raws: list[bytes] = field(default_factory=list)

    @property
    def hashes(self) -> list[str]:
        return self.events.column("event_hash").to_pylist()


def event_row(path: str, ordinal: int, event: Event) -> dict[str, object]:
    row: dict[str, object] = {
        "event_id": ordinal,
        "event_hash": event_hash(path, event),
        "run_id": None,
        "path": path,
        "line": event.line,
        "end_line": event.end_line,
        "byte_offset": event.byte_offset,
        "family": event.family,
        "form": event.form,
        "figures": sorted(event.figures.items()),
        "exact_figures": sorted(set(event.exact)),
        "buffer_count": len(event.buffers),
        "truncated": event.truncated,
        "problem_count": len(event.problems),
        "text": event.text,
        "is_fragment": event.fragment,
        "byte_length": len(event.raw),
    }
    for name, value in event.figures.items():
        column = FIGURE_COLUMNS.get(name)
        if column is not None:
            row.setdefault(column, value)
    for name, column in FIELD_COLUMNS.items():
        if name in event.fields:
            row[column] = event.fields[name]
    return row


def log_events(scan: LogScan, path: str) -> LogEvents:
    """The scan of one log as tables; `path` is the name stored (text, absolute).

    An event whose values do not fit their columns (a case the grammar let through)
    is left out with an error at its line, so the log's other events still load."""
    file_problems = [DumpError(path, p.line, p.message, p.text) for p in scan.problems]
    parts = [_event_rows(path, event) for event in scan.events]
    try:
        events, buffers = _tables(parts)
    except (pa.ArrowException, OverflowError, ValueError, TypeError):
        kept = []
        for event, part in zip(scan.events, parts):
            try:
                _tables([part])
            except (pa.ArrowException, OverflowError, ValueError, TypeError) as exc:
                file_problems.append(
                    DumpError(
                        path,
                        event.line,
                        f"message not stored: a value does not fit its column ({exc})",
                    )
                )
                continue
            kept.append((event, part))
        scan_events, parts = [e for e, _ in kept], [p for _, p in kept]
        events, buffers = _tables(parts)
    else:
        scan_events = scan.events
    return LogEvents(
        path,
        events,
        buffers,
        [[DumpError(path, p.line, p.message, p.text) for p in e.problems] for e in scan_events],
        file_problems,
        scan.bytes_read,
        [e.raw for e in scan_events],
    )


def _event_rows(path: str, event: Event) -> tuple[dict[str, object], list[dict[str, object]]]:
    row = event_row(path, 0, event)
    return row, [{"is_entry_parameter": False, **buf} for buf in event.buffers]


def _tables(parts: list[tuple[dict, list[dict]]]) -> tuple[pa.Table, pa.Table]:
    """oom_events and oom_buffers of the events in `parts`, numbered 0, 1, ... in order."""
    rows, buffers = [], []
    for ordinal, (row, bufs) in enumerate(parts):
        rows.append({**row, "event_id": ordinal})
        buffers += [{**b, "event_id": ordinal} for b in bufs]
    return (
        pa.Table.from_pylist(rows, schema=arrow_schema(EVENTS)),
        pa.Table.from_pylist(buffers, schema=arrow_schema(BUFFERS)),
    )
