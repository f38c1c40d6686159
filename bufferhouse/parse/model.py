"""What the text readers hand to `finish`, and what every reader hands to derive.

Two readers execute the one grammar (text/grammar.py): the line reader in
scan.py, which words every error, and the column reader in vector.py, for the
regular bulk of large dumps. Both produce the same `Scanned`: small
structural facts as Python objects, and the bulky per-line facts as Arrow
columns that carry their line numbers, so that every invariant (text/rules.py)
and every derived column (text/finish.py) exists once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from bufferhouse.errors import DumpError

#: Feature -> earliest XLA commit date whose printer produces it (docs/format.md §4.4, §5.3, §9).
ERA_FEATURES: dict[str, str] = {
    "value_lines": "2019-09-09",
    "total_line": "2019-10-14",
    "live_range": "2021-04-07",
    "total_human": "2021-08-09",
    "from_instruction": "2021-09-23",
    "from_instruction_space": "2024-01-16",
    "peak_index": "2025-04-14",
    "peak_cumulative": "2025-05-16",
    "stack_trace": "2025-07-23",
    "split": "2026-04-03",
    "uses_none": "2026-06-02",
    "cross_color": "2026-06-17",
}


@dataclass(frozen=True)
class ReadingFacts:
    """What a reader found printed or carried, besides the tables: never a derived figure
    (parse/derive computes those, once for every form)."""

    layout: str  # combined, split (text eras) or proto
    format_era: str | None = None
    schedule_length: int | None = None
    #: HloLiveRange's peak as printed (text only: the proto carries no live ranges).
    logical_peak_time: int | None = None
    logical_peak_bytes: int | None = None
    #: The reading has live ranges for the sweep (a text HloLiveRange section).
    has_live_ranges: bool = False
    #: The module's name as its HloProto gives it (a profile names programs otherwise).
    module_name: str | None = None


@dataclass
class Reading:
    """One module as any reader gives it: the warehouse tables as the file carried them
    (module_id left out; the derived columns and heap_peaks left to derive), a typed
    record of what it printed, and the forms read (text, proto, xplane, text+proto)."""

    tables: dict[str, pa.Table]
    facts: ReadingFacts
    form: str
    warnings: list[DumpError] = field(default_factory=list)
    sections: list[str] = field(default_factory=list)
    features: set[str] = field(default_factory=set)

    def rows(self) -> dict[str, list[dict]]:
        """The tables as plain rows (for tests and comparisons)."""
        return {name: table.to_pylist() for name, table in self.tables.items()}


@dataclass
class Alloc:
    """One `allocation N: size S, ...:` header."""

    index: int
    size: int
    color: int
    line: int
    flags: dict[str, object]


#: One row per allocation header, in file order.
ALLOCS = pa.schema(
    [
        ("index", pa.int64()),
        ("size", pa.int64()),
        ("color", pa.int64()),
        ("line", pa.int64()),
        ("parameter_number", pa.int64()),
        ("parameter_shape", pa.string()),
        ("parameter_shape_index", pa.string()),
        ("output_shape", pa.string()),
        ("constant", pa.bool_()),
        ("thread_local", pa.bool_()),
        ("maybe_live_out", pa.bool_()),
        ("preallocated_temp", pa.bool_()),
        ("address", pa.string()),
        ("page", pa.int64()),
        ("unknown_attributes", pa.string()),
    ]
)


def alloc_row(a: Alloc) -> tuple:
    """An allocation header's ALLOCS row."""
    f = a.flags
    return (
        a.index,
        a.size,
        a.color,
        a.line,
        f.get("parameter_number"),
        f.get("parameter_shape"),
        f.get("parameter_shape_index"),
        f.get("output_shape"),
        bool(f.get("constant")),
        bool(f.get("thread-local")),
        bool(f.get("maybe-live-out")),
        bool(f.get("preallocated-temp")),
        f.get("address"),
        f.get("page"),
        ", ".join(f["unknown"]) if f.get("unknown") else None,  # type: ignore[arg-type]
    )


#: Columns of the bulky per-value facts, in file order.
VALUES = pa.schema(
    [
        ("value_id", pa.int64()),
        ("instruction", pa.string()),
        ("shape_index", pa.string()),  # '{}' when not printed
        ("is_phi", pa.bool_()),
        ("color", pa.int64()),  # None when not printed
        ("allocation", pa.int64()),
        ("byte_offset", pa.int64()),
        ("size", pa.int64()),
        ("shape", pa.string()),
        ("line", pa.int64()),
    ]
)
#: One row per Used values block, in file order (rules.py checks it is id order).
USED = pa.schema(
    [
        ("value_id", pa.int64()),
        ("instruction", pa.string()),  # as the block's header names it
        ("line", pa.int64()),
        ("text", pa.string()),
    ]
)
#: One row per ' reused by buffers of a different color:' entry (2026-06+).
CROSS = pa.schema([("value_id", pa.int64()), ("allocation", pa.int64()), ("line", pa.int64())])
#: One row per InstructionSequence line.
SCHEDULE = pa.schema([("step", pa.int64()), ("instruction", pa.string()), ("line", pa.int64())])
POSITIONS = pa.schema(
    [
        ("value_id", pa.int64()),
        ("ordinal", pa.int64()),
        ("instruction", pa.string()),
        ("shape_index", pa.string()),
    ]
)
USES = pa.schema(
    [
        ("value_id", pa.int64()),
        ("ordinal", pa.int64()),
        ("instruction", pa.string()),
        ("operand_number", pa.int64()),
        ("operand_index", pa.string()),
    ]
)
#: The peak list, one row per `    name{index}: N bytes` line under "Live ranges at".
PEAK = pa.schema(
    [
        ("name", pa.string()),
        ("index", pa.string()),  # None when not printed
        ("bytes", pa.int64()),
        ("cumulative", pa.int64()),  # None when not printed
        ("line", pa.int64()),
    ]
)
LIVE = pa.schema(
    [
        ("instruction", pa.string()),
        ("shape_index", pa.string()),
        ("start_time", pa.int64()),
        ("end_time", pa.int64()),
        ("line", pa.int64()),
    ]
)


@dataclass
class Scanned:
    """One module as read by a scanner, before cross-checks and derived columns."""

    ba_path: str
    sections: list[str]
    features: set[str]
    warnings: list[DumpError]
    ends: dict[str, int]  # path -> its last line, for "truncated?" errors
    total: int | None
    total_line: tuple[str, int] | None
    lr_path: str | None
    used_path: str | None
    allocs: pa.Table  # ALLOCS
    schedule_length: int | None
    lr_line: int  # line of 'HloLiveRange (max N):', 0 when absent
    peak_time: int | None
    peak_line: int  # line of '  Live ranges at T (peak):', 0 when absent
    peak: pa.Table  # PEAK
    trace_total: int | None
    #: (depth, name, pct, total, current, remaining, parent ordinal or -1, line)
    trace: list[tuple[int, str, float, int, int, int, int, int]]
    report: list[tuple[str, int | None, str | None, int]]
    values: pa.Table  # VALUES
    cross: pa.Table  # CROSS
    used: pa.Table  # USED
    positions: pa.Table  # POSITIONS
    uses: pa.Table  # USES
    schedule: pa.Table  # SCHEDULE
    live: pa.Table  # LIVE

    @property
    def sequence(self) -> pa.ChunkedArray:
        """Instruction names by step."""
        return self.schedule["instruction"]


def first_occurrences(codes: np.ndarray) -> np.ndarray:
    """Row of each code's first occurrence, for codes numbered in order of first occurrence
    (as dictionary_encode numbers them): exactly the rows where a code exceeds all before it."""
    if len(codes) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(codes > np.r_[-1, np.maximum.accumulate(codes)[:-1]])
