"""A scanned text module, checked (rules.py) and turned into its Reading.

What links the sections is resolved here: live ranges and the peak list name
values by (instruction, index), and the peak list must name live values and
be complete; a break means a cut or edited file and raises ParseError with file
and line. Work is done on whole Arrow columns; Python loops run only over what
is small (allocations, distinct shapes, distinct instructions, the peak list).
The figures that follow from the reading are parse/derive's.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bufferhouse.errors import DumpError, ParseError, UnknownInput
from bufferhouse.parse.derive.heap import sum_exact
from bufferhouse.parse.model import ERA_FEATURES, Reading, ReadingFacts, Scanned
from bufferhouse.parse.text import rules
from bufferhouse.parse.text.columns import (
    instructions,
    release,
    rows_table,
    table,
    value_table,
)


def _key_numbers(tables: list[pa.Table]) -> list[np.ndarray]:
    """One number per row of each table for its (instruction, shape_index) pair: equal pairs,
    equal numbers, across all the tables. Each column's strings are hashed once, all tables
    together (joined key strings took a copy of the names per table and per lookup)."""
    numbers = np.zeros(sum(t.num_rows for t in tables), dtype=np.int64)
    for column in ("instruction", "shape_index"):
        encoded = pc.dictionary_encode(
            pa.chunked_array([c for t in tables for c in t[column].chunks], pa.string())
        )
        if encoded.num_chunks:  # one dictionary for all chunks
            codes = np.concatenate([c.indices.to_numpy() for c in encoded.chunks])
            numbers = numbers * len(encoded.chunk(0).dictionary) + codes
    return np.split(numbers, np.cumsum([t.num_rows for t in tables])[:-1])


class _LastRows:
    """The last row of each distinct key number of a table (a later entry of a key wins)."""

    def __init__(self, codes: np.ndarray) -> None:
        order = np.argsort(codes, kind="stable")
        ordered = codes[order]
        ends = np.flatnonzero(np.r_[ordered[1:] != ordered[:-1], len(ordered) > 0])
        self.keys, self.rows = ordered[ends], order[ends]

    def find(self, codes: np.ndarray) -> np.ndarray:
        """The row of each key number, -1 where the table has none."""
        if not len(self.keys):
            return np.full(len(codes), -1, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.keys, codes), len(self.keys) - 1)
        return np.where(self.keys[at] == codes, self.rows[at], -1)

    def in_order(self) -> np.ndarray:
        """The rows, in table order."""
        return np.sort(self.rows)


def _found(column: np.ndarray, rows: np.ndarray) -> pa.Array:
    """column[rows], null where a row is -1 (not found)."""
    if not len(column):
        return pa.nulls(len(rows), pa.from_numpy_dtype(column.dtype))
    return pa.array(column[np.maximum(rows, 0)], mask=rows < 0)


def finish(
    s: Scanned,
    files: list[tuple[str, str]],
    hlo_path: str | None,
    read: Callable[[str], Iterable[tuple[int, str]]],
    threads: int = 0,
) -> Reading:
    """The module's reading (tables, what it printed, warnings), after the cross-checks.

    `s` is used up: each scanned column is let go as soon as what is built from
    it exists, and the steps run in the order that holds the least at once (the
    values sorted by id only after the instruction texts are parsed), so a large
    module's text is never held twice. The checks are rules.check's; the figures
    (categories, peaks) are parse/derive's.
    """
    lr_path = s.lr_path or s.ba_path
    warnings: list[DumpError] = []
    # Invariants that XLA's printer guarantees; a break means a cut or edited file.
    rules.check(s)
    live_rows, peak_table = _live_and_peak(s, lr_path)
    facts = _facts(s, lr_path)
    instr_table = instructions(s, warnings, s.used_path or s.ba_path, hlo_path, read, threads)
    allocs = s.allocs
    if not np.array_equal(allocs["index"].to_numpy(), np.arange(allocs.num_rows)):
        warnings.append(DumpError(s.ba_path, 0, "allocation indices are not 0..n-1 in file order"))
    warnings += unknown_attributes(s.ba_path, allocs)
    by_id = _values_by_id(s)
    tables = {
        "allocations": _allocations_table(allocs),
        "hlo_values": value_table(by_id, s.ba_path),
        "assignments": _assignments_table(by_id),
        "positions": table("positions", {c: s.positions[c] for c in s.positions.column_names}),
        "uses": table("uses", {c: s.uses[c] for c in s.uses.column_names}),
        "instructions": instr_table,
        "sequence": table(
            "sequence",
            {
                "time": pa.array(np.arange(len(s.sequence), dtype=np.int64)),
                "instruction": s.sequence,
            },
        ),
        "live_ranges": table("live_ranges", live_rows),
        "peak_values": peak_table,
        "stack_trace": _stack_trace_table(s),
        "usage_report": rows_table("usage_report", list(s.report)),
    }
    return Reading(
        tables, facts, "text", [*warnings, *s.warnings], list(s.sections), set(s.features)
    )


def _live_and_peak(s: Scanned, lr_path: str) -> tuple[dict[str, object], pa.Table]:
    """The live_ranges columns, each entry with the value it names, and the checked
    peak list. Live ranges name values by (instruction, index); a later entry of the
    same key wins."""
    live, values = s.live, s.values
    named = pa.table(
        {"instruction": s.peak["name"], "shape_index": pc.fill_null(s.peak["index"], "{}")}
    )
    value_codes, live_codes, peak_codes = _key_numbers([values, live, named])
    by_value, by_live = _LastRows(value_codes), _LastRows(live_codes)
    value_ids = values["value_id"].to_numpy()
    live_vid = _found(value_ids, by_value.find(live_codes))  # the value each entry names
    peak_vid = _found(value_ids, by_value.find(peak_codes))
    peak_live = by_live.find(peak_codes) >= 0
    last = pa.array(by_live.in_order(), pa.int64())
    live_last = live.select(["instruction", "shape_index", "start_time", "end_time"]).take(last)
    del named, value_codes, live_codes, peak_codes, by_value, by_live, value_ids, last
    release(s)
    live_rows = {
        "value_id": live_vid,
        "instruction": live["instruction"],
        "shape_index": live["shape_index"],
        "start_time": live["start_time"],
        "end_time": live["end_time"],
    }
    return live_rows, _peak_rows(s, lr_path, live_last, peak_live, peak_vid)


def _facts(s: Scanned, lr_path: str) -> ReadingFacts:
    """What the dump printed besides its tables; the stack-trace breakdown must end at 0."""
    logical_peak = None
    if s.peak.num_rows:
        last_cum = s.peak["cumulative"][-1].as_py()
        logical_peak = last_cum if last_cum is not None else sum_exact(s.peak["bytes"].to_numpy())
    elif s.peak_time is not None:
        logical_peak = 0
    release(s)
    if s.trace and s.trace[-1][5] != 0:
        raise ParseError(
            lr_path,
            s.ends.get(lr_path, 0),
            "stack-trace breakdown does not end with 'remaining: 0 bytes' (truncated?)",
        )
    return ReadingFacts(
        layout="split" if "split" in s.features else "combined",
        format_era=max((ERA_FEATURES[f] for f in s.features if f in ERA_FEATURES), default=None),
        schedule_length=s.schedule_length,
        logical_peak_time=s.peak_time,
        logical_peak_bytes=logical_peak,
        has_live_ranges=s.live.num_rows > 0 or s.schedule_length is not None,
    )


def _values_by_id(s: Scanned) -> pa.Table:
    """The values with their cross-color flags, sorted by id a column at a time: each
    column in file order goes once its copy exists (s.values holds the result)."""
    values = s.values.append_column("cross_color", rules.cross_color_flags(s))
    order = pc.sort_indices(values["value_id"])
    schema = values.schema
    columns = []
    for name in schema.names:
        columns.append(values[name].take(order))
        s.values = values = values.drop_columns([name])
        release(s)
    s.values = pa.Table.from_arrays(columns, schema=schema)
    return s.values


def _assignments_table(by_id: pa.Table) -> pa.Table:
    return table(
        "assignments",
        {
            "value_id": by_id["value_id"],
            "allocation_index": by_id["allocation"],
            "byte_offset": by_id["byte_offset"],
            "size": by_id["size"],
            "reused_cross_color": by_id["cross_color"],
        },
    )


def _allocations_table(allocs: pa.Table) -> pa.Table:
    """Allocation rows as the headers print them; category and max_live_bytes are
    derive's (left null here)."""
    return table(
        "allocations",
        {
            "allocation_index": allocs["index"],
            "size": allocs["size"],
            "color": allocs["color"],
            "parameter_number": allocs["parameter_number"],
            "parameter_shape": allocs["parameter_shape"],
            "parameter_shape_index": allocs["parameter_shape_index"],
            "output_shape": allocs["output_shape"],
            "is_parameter": pc.is_valid(allocs["parameter_number"]),
            "is_constant": allocs["constant"],
            "is_thread_local": allocs["thread_local"],
            "is_maybe_live_out": allocs["maybe_live_out"],
            "is_preallocated_temp": allocs["preallocated_temp"],
            "category": pa.nulls(allocs.num_rows, pa.string()),
            "address": allocs["address"],
            "line": allocs["line"],
            "max_live_bytes": pa.nulls(allocs.num_rows, pa.int64()),
            "page": allocs["page"],
            "unknown_attributes": allocs["unknown_attributes"],
        },
    )


def unknown_attributes(path: str, allocs: pa.Table) -> list[DumpError]:
    """One warning per distinct attribute list this grammar did not know (both readers
    keep it in the rows; grammar.alloc_attributes), at its first line, with a count."""
    unknown = allocs["unknown_attributes"]
    if unknown.null_count == len(unknown):
        return []
    texts = unknown.to_pylist()
    lines = allocs["line"].to_pylist()
    first: dict[str, tuple[int, int]] = {}
    for text, line in zip(texts, lines):
        if text is not None:
            at, count = first.get(text, (line, 0))
            first[text] = (at, count + 1)
    return [
        UnknownInput(
            path,
            at,
            f"unknown allocation attribute '{text[:120]}' kept in allocations.unknown_attributes"
            f" ({count} allocation{'s' if count > 1 else ''}; a newer XLA?)",
            text,
        )
        for text, (at, count) in first.items()
    ]


def _stack_trace_table(s: Scanned) -> pa.Table:
    return rows_table(
        "stack_trace",
        [
            (i, depth, None if parent < 0 else parent, name, pct, total, current, remaining)
            for i, (depth, name, pct, total, current, remaining, parent, _) in enumerate(s.trace)
        ],
    )


def _peak_rows(
    s: Scanned, lr_path: str, live_last: pa.Table, live: np.ndarray, value_id: pa.Array
) -> pa.Table:
    """The printed peak list: names must be live values, and the list must be complete.

    `live` tells which rows name an entry of `live_last` by name and index,
    `value_id` the value each row names. Checked row by row as printed: the
    first row naming no live entry, or whose cumulative bytes are not the
    running sum, is the one reported.
    """
    peak = s.peak
    if peak.num_rows:
        index = peak["index"]
        not_live = ~live
        if index.null_count:  # a name printed without an index must name some live entry
            by_name = pc.is_in(peak["name"], value_set=live_last["instruction"])
            not_live = np.where(
                pc.is_null(index).to_numpy(zero_copy_only=False),
                ~by_name.to_numpy(zero_copy_only=False),
                not_live,
            )
        running = _running_sum(peak["bytes"].to_numpy())
        cumulative = peak["cumulative"]
        wrong = np.zeros(len(running), dtype=bool)
        given = pc.is_valid(cumulative).to_numpy(zero_copy_only=False)
        wrong[given] = cumulative.filter(pc.is_valid(cumulative)).to_numpy() != running[given]
        bad = np.flatnonzero(not_live | wrong)
        if len(bad):
            i = int(bad[0])
            line = peak["line"][i].as_py()
            name, printed = peak["name"][i].as_py(), index[i].as_py()
            if not_live[i]:
                raise ParseError(
                    lr_path,
                    line,
                    f"peak list names {name}{printed if printed is not None else ''}, "
                    "which has no BufferLiveRange entry",
                )
            raise ParseError(
                lr_path,
                line,
                f"cumulative {cumulative[i].as_py()} bytes, but the running sum is {int(running[i])}",
            )
    if s.peak_time is not None and "peak_index" in s.features:
        _check_peak_count(s, lr_path, live_last)
    return table(
        "peak_values",
        {
            "ordinal": pa.array(np.arange(peak.num_rows), pa.int64()),
            "instruction": peak["name"],
            "shape_index": peak["index"],
            "value_id": value_id,
            "bytes": peak["bytes"],
            "cumulative_bytes": peak["cumulative"],
        },
    )


def _running_sum(numbers: np.ndarray) -> np.ndarray:
    """Running sums, exact as Python's (an object array past int64)."""
    if len(numbers) and int(numbers.max()) >= np.iinfo(np.int64).max // len(numbers):
        return np.array(list(itertools.accumulate(numbers.tolist())), dtype=object)
    return np.cumsum(numbers)


def _check_peak_count(s: Scanned, lr_path: str, live_last: pa.Table) -> None:
    t = s.peak_time
    live_at_peak = (
        pc.sum(
            pc.and_(
                pc.less_equal(live_last["start_time"], t),
                pc.greater_equal(live_last["end_time"], t),
            )
        ).as_py()
        or 0
    )
    entries = s.peak.num_rows
    if live_at_peak != entries:
        raise ParseError(
            lr_path,
            s.peak["line"][-1].as_py() if entries else s.ends.get(lr_path, 0),
            f"peak list at {t} has {entries} entries but {live_at_peak} values are live "
            "then per BufferLiveRange (file truncated?)",
        )
