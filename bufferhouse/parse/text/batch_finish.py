"""finish.py over a batch of small modules: one Reading for the whole batch, its tables
the per-module Readings' tables laid end to end in batch order, each with an int32
`module` column (the module's index in the batch), and `split` to per-module Readings.

A helper module costs ~3.4 ms in finish, nearly all of it the number of Arrow calls a
module (issue 39). Here each step runs once a batch: keys are numbered by (module, ...)
so that a lookup or a "first of each" never crosses modules, positions within a module
come from its offsets (batch_scan.module_bounds), and each distinct shape string and
instruction text is read once a batch. What only a few modules have (an HLO file's
stack frames, unknown attributes) is done module by module, for those modules.

A module batch_rules flags, or that breaks a check made here (the peak list, a shape,
an instruction text's number), is left out (`BatchReading.left`): parse.batch parses it
alone, for its own error. The checks hold the module to rules.py/finish.py exactly:
tests/test_batch_read.py compares the split Readings with the one-module ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bufferhouse.errors import DumpError
from bufferhouse.parse.derive.heap import sum_exact
from bufferhouse.parse.model import ERA_FEATURES, Reading, ReadingFacts
from bufferhouse.parse.text import batch_rules, batch_texts
from bufferhouse.parse.text.batch_scan import BatchScanned, module_bounds, rank
from bufferhouse.parse.text.columns import rows_table, shape_columns, table, values_of
from bufferhouse.parse.text.finish import (
    _allocations_table,
    _assignments_table,
    _found,
    _key_numbers,
    _LastRows,
    unknown_attributes,
)


@dataclass
class BatchReading:
    """The batch's modules read together: `tables` with a `module` column, in module
    order; per module (by batch index) its facts, warnings, sections and features, None
    for a module `left` to be parsed alone."""

    tables: dict[str, pa.Table]
    facts: list[ReadingFacts | None]
    warnings: list[list[DumpError]]
    sections: list[list[str]]
    features: list[set[str]]
    left: np.ndarray  # bool a module

    def split(self) -> list[Reading | None]:
        """Each module's Reading (None where left), its tables slices of the batch's."""
        bounds = {
            name: module_bounds(t["module"], len(self.facts)) for name, t in self.tables.items()
        }
        bare = {name: t.drop_columns(["module"]) for name, t in self.tables.items()}
        out: list[Reading | None] = []
        for i, facts in enumerate(self.facts):
            if facts is None or self.left[i]:
                out.append(None)
                continue
            tables = {
                name: t.slice(bounds[name][i], bounds[name][i + 1] - bounds[name][i])
                for name, t in bare.items()
            }
            out.append(
                Reading(tables, facts, "text", self.warnings[i], self.sections[i], self.features[i])
            )
        return out


def finish_batch(b: BatchScanned, read: Callable[[str], Iterable[tuple[int, str]]]) -> BatchReading:
    """The batch's Reading; the modules flagged or failing a check here are `left`."""
    left = batch_rules.suspects(b)
    keep = pa.array(~left)
    t = {name: table_.filter(pc.take(keep, table_["module"])) for name, table_ in b.tables.items()}
    n = b.modules
    warnings: list[list[DumpError]] = [[] for _ in range(n)]
    sections = [list(r.sections) if r is not None else [] for r in b.readers]
    live_rows, live_last, peak_vid, peak_live = _live_ranges(t, n)
    peak_table = _peak(b, t["peak"], live_last, peak_vid, peak_live, left)
    instructions = batch_texts.instructions(b, t, warnings, sections, read, left)
    by_id = _values_by_id(t["values"])
    per_shape, codes, bad = shape_columns(by_id)
    if bad:
        rows = _np(pc.is_in(codes, value_set=pa.array(sorted(bad), codes.type)))
        left[_np(by_id["module"])[rows]] = True
    _unknown_attributes(b, t["allocs"], warnings)
    tables = {
        "allocations": _allocations_table(t["allocs"]),
        "hlo_values": values_of(by_id, per_shape),
        "assignments": _assignments_table(by_id),
        "positions": _as("positions", t["positions"]),
        "uses": _as("uses", t["uses"]),
        "instructions": instructions,
        "sequence": _sequence(t["schedule"], n),
        "live_ranges": table("live_ranges", live_rows),
        "peak_values": peak_table,
        "stack_trace": _rows_by_module("stack_trace", b, left, _trace_rows),
        "usage_report": _rows_by_module("usage_report", b, left, lambda r: list(r.report)),
    }
    _with_modules(tables, t, by_id)
    facts, warnings = _per_module(b, t["peak"], warnings, left)
    features = [set(r.features) if r is not None else set() for r in b.readers]
    return BatchReading(tables, facts, warnings, sections, features, left)


def _unknown_attributes(b: BatchScanned, allocs: pa.Table, warnings: list[list[DumpError]]) -> None:
    """finish.unknown_attributes of each module whose headers have some (few do)."""
    module = _np(allocs["module"])
    for i in np.unique(module[_np(pc.is_valid(allocs["unknown_attributes"]))]).tolist():
        rows = allocs.filter(pc.equal(allocs["module"], i))
        warnings[i] += unknown_attributes(b.ba_paths[i], rows)


def _with_modules(tables: dict[str, pa.Table], t: dict[str, pa.Table], by_id: pa.Table) -> None:
    """Each table with the module of its rows (the tables made of row tuples have it)."""
    module_of = {
        "allocations": t["allocs"],
        "hlo_values": by_id,
        "assignments": by_id,
        "positions": t["positions"],
        "uses": t["uses"],
        "sequence": t["schedule"],
        "live_ranges": t["live"],
        "peak_values": t["peak"],
    }
    for name, source in module_of.items():
        tables[name] = tables[name].append_column("module", source["module"])


def _per_module(
    b: BatchScanned, peak: pa.Table, warnings: list[list[DumpError]], left: np.ndarray
) -> tuple[list, list[list[DumpError]]]:
    """Each kept module's facts, and its warnings with its reader's after finish's (as
    finish orders them)."""
    at = module_bounds(peak["module"], b.modules)
    facts = [
        None if left[i] or r is None else _facts(r, peak, at, i) for i, r in enumerate(b.readers)
    ]
    for i, r in enumerate(b.readers):
        if r is not None:
            warnings[i] += r.warnings
    return facts, warnings


def _np(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return column.to_numpy(zero_copy_only=False)


def _as(name: str, scanned: pa.Table) -> pa.Table:
    return table(name, {c: scanned[c] for c in scanned.column_names if c != "module"})


def _sequence(schedule: pa.Table, n: int) -> pa.Table:
    time = rank(_np(schedule["module"]), n)
    return table(
        "sequence", {"time": pa.array(time, pa.int64()), "instruction": schedule["instruction"]}
    )


def _module_keys(tables: list[pa.Table], n: int) -> list[np.ndarray]:
    """finish._key_numbers with the module in the key: equal pairs of one module, equal
    numbers; pairs of two modules never."""
    keys = _key_numbers(tables)
    return [k * n + _np(t["module"]).astype(np.int64) for k, t in zip(keys, tables)]


def _live_ranges(
    t: dict[str, pa.Table], n: int
) -> tuple[dict[str, object], pa.Table, pa.Array, np.ndarray]:
    """finish._live_and_peak's live_ranges columns, the last entry of each key (with its
    module), and for each peak row the value it names and whether it names a live entry;
    every key within its module."""
    live, values = t["live"], t["values"]
    named = pa.table(
        {
            "instruction": t["peak"]["name"],
            "shape_index": pc.fill_null(t["peak"]["index"], "{}"),
            "module": t["peak"]["module"],
        }
    )
    value_codes, live_codes, peak_codes = _module_keys([values, live, named], max(n, 1))
    by_value, by_live = _LastRows(value_codes), _LastRows(live_codes)
    value_ids = _np(values["value_id"]).astype(np.int64)
    live_vid = _found(value_ids, by_value.find(live_codes))
    peak_vid = _found(value_ids, by_value.find(peak_codes))
    peak_live = by_live.find(peak_codes) >= 0
    last = pa.array(by_live.in_order(), pa.int64())
    live_last = live.select(["instruction", "shape_index", "start_time", "end_time", "module"])
    live_rows = {
        "value_id": live_vid,
        "instruction": live["instruction"],
        "shape_index": live["shape_index"],
        "start_time": live["start_time"],
        "end_time": live["end_time"],
    }
    return live_rows, live_last.take(last), peak_vid, peak_live


def _peak(
    b: BatchScanned,
    peak: pa.Table,
    live_last: pa.Table,
    value_id: pa.Array,
    live: np.ndarray,
    left: np.ndarray,
) -> pa.Table:
    """finish._peak_rows over the batch: a module whose list names a value not live, or
    whose cumulative bytes are not the running sum, or that lists fewer or more values
    than are live at its peak, is left. `value_id`: the value each row names; `live`:
    whether it names an entry of `live_last`."""
    module = _np(peak["module"])
    n = b.modules
    if len(module):
        not_live = ~live
        index = peak["index"]
        if index.null_count:  # a name without an index must name some live entry of its module
            by_name = _within(peak["name"], module, live_last["instruction"], live_last["module"])
            not_live = np.where(_np(pc.is_null(index)), ~by_name, not_live)
        numbers = _np(peak["bytes"])
        if numbers.max() >= np.iinfo(np.int64).max // len(numbers) or numbers.min() < 0:
            left[module] = True  # running sums past int64: read alone, exactly
            running = np.zeros(len(numbers), np.int64)
        else:
            starts = module_bounds(module, n)
            total = np.r_[0, np.cumsum(numbers)]
            running = total[1:] - total[starts[module]]
        cumulative = peak["cumulative"]
        given = _np(pc.is_valid(cumulative))
        wrong = np.zeros(len(numbers), dtype=bool)
        wrong[given] = _np(cumulative.filter(pc.is_valid(cumulative))) != running[given]
        left[module[not_live | wrong]] = True
    _peak_count(b, peak, live_last, left)
    return table(
        "peak_values",
        {
            "ordinal": pa.array(rank(module, n), pa.int64()),
            "instruction": peak["name"],
            "shape_index": peak["index"],
            "value_id": value_id,
            "bytes": peak["bytes"],
            "cumulative_bytes": peak["cumulative"],
        },
    )


def _peak_count(b: BatchScanned, peak: pa.Table, live_last: pa.Table, left: np.ndarray) -> None:
    """finish._check_peak_count: where the list prints indices, one entry a live value."""
    n = b.modules
    times = np.array(
        [
            r.peak_time if r is not None and not left[i] and r.peak_time is not None else -1
            for i, r in enumerate(b.readers)
        ],
        dtype=np.int64,
    )
    checked = np.array(
        [
            r is not None and r.peak_time is not None and "peak_index" in r.features
            for r in b.readers
        ],
        dtype=bool,
    )
    module = _np(live_last["module"])
    at = times[module]
    live_then = (_np(live_last["start_time"]) <= at) & (_np(live_last["end_time"]) >= at)
    live_count = np.bincount(module[live_then], minlength=n)
    entries = np.diff(module_bounds(peak["module"], n))
    left[checked & (live_count != entries)] = True


def _within(
    names: pa.ChunkedArray,
    module: np.ndarray,
    wanted: pa.ChunkedArray,
    wanted_module: pa.ChunkedArray,
) -> np.ndarray:
    """Which of `names` are among the `wanted` names of their own module."""
    encoded = pc.dictionary_encode(pa.chunked_array([*names.chunks, *wanted.chunks], pa.string()))
    codes = np.concatenate([_np(c.indices) for c in encoded.chunks]).astype(np.int64)
    stride = int(max(module.max(initial=0), _np(wanted_module).max(initial=0))) + 1
    keys = codes * stride + np.r_[module, _np(wanted_module)].astype(np.int64)
    return np.isin(keys[: len(names)], keys[len(names) :])


def _facts(r, peak: pa.Table, bounds: np.ndarray, i: int) -> ReadingFacts:
    """finish._facts of module `i` (its reader `r`, the batch's peak list and its module
    offsets)."""
    logical_peak = None
    lo, hi = bounds[i], bounds[i + 1]
    if hi > lo:
        last = peak["cumulative"][hi - 1].as_py()
        logical_peak = last if last is not None else sum_exact(_np(peak["bytes"])[lo:hi])
    elif r.peak_time is not None:
        logical_peak = 0
    return ReadingFacts(
        layout="split" if "split" in r.features else "combined",
        format_era=max((ERA_FEATURES[f] for f in r.features if f in ERA_FEATURES), default=None),
        schedule_length=r.schedule_length,
        logical_peak_time=r.peak_time,
        logical_peak_bytes=logical_peak,
        has_live_ranges=bool(r.live) or r.schedule_length is not None,
    )


def _trace_rows(r) -> list[tuple]:
    """finish._stack_trace_table's rows of one module."""
    return [
        (i, depth, None if parent < 0 else parent, name, pct, total, current, remaining)
        for i, (depth, name, pct, total, current, remaining, parent, _) in enumerate(r.trace)
    ]


def _rows_by_module(name: str, b: BatchScanned, left: np.ndarray, rows_of) -> pa.Table:
    """A table made of each kept module's row tuples, with their module."""
    rows: list[tuple] = []
    module: list[int] = []
    for i, r in enumerate(b.readers):
        if r is not None and not left[i]:
            got = rows_of(r)
            rows += got
            module += [i] * len(got)
    return rows_table(name, rows).append_column("module", pa.array(module, pa.int32()))


def _values_by_id(values: pa.Table) -> pa.Table:
    """finish._values_by_id: by id within each module (no cross-color entry: batch_rules
    leaves those modules to be read alone)."""
    order = np.lexsort((_np(values["value_id"]), _np(values["module"])))
    by_id = values.take(pa.array(order, pa.int64()))
    flags = pa.array(np.zeros(len(by_id), dtype=bool))
    return by_id.add_column(by_id.schema.get_field_index("module"), "cross_color", flags)
