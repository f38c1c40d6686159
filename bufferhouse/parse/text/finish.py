"""Cross-check a scanned module and derive the warehouse tables from it.

Checks here are the invariants that XLA's printer guarantees across sections
(every placed value has a Used values block, the schedule is complete, the
peak list matches the live ranges...): a break means a cut or edited file and
raises ParseError with file and line. Work is done on whole Arrow columns;
Python loops run only over what is small (allocations, distinct shapes,
distinct instructions, the peak list) or inherently sequential (the heap sweep).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bufferhouse.errors import DumpError, ParseError
from bufferhouse.parse import hlo, memory, shapes
from bufferhouse.parse.model import ERA_FEATURES, ParsedModule, Scanned, first_occurrences
from bufferhouse.parse.text.heap import heap_peaks, sum_exact, temp_allocations
from bufferhouse.schema import TABLES_BY_NAME, arrow_schema


def _schema(table: str) -> pa.Schema:
    """The warehouse table's Arrow schema without its module_id column (the loader adds it)."""
    schema = arrow_schema(TABLES_BY_NAME[table])
    return schema.remove(schema.get_field_index("module_id"))


SCHEMAS = {
    name: _schema(name)
    for name in (
        "allocations",
        "hlo_values",
        "assignments",
        "positions",
        "uses",
        "instructions",
        "sequence",
        "live_ranges",
        "peak_values",
        "stack_trace",
        "usage_report",
        "heap_peaks",
    )
}


def _table(name: str, columns: dict[str, object]) -> pa.Table:
    """Build a table of the declared schema from arrays or Python lists, column by column."""
    return _table_of(SCHEMAS[name], columns)


def _table_of(schema: pa.Schema, columns: dict[str, object]) -> pa.Table:
    arrays = []
    for f in schema:
        col = columns[f.name]
        if isinstance(col, (pa.Array, pa.ChunkedArray)):
            arrays.append(col if col.type == f.type else _cast(col, f.type))
        else:
            arrays.append(pa.array(col, f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _cast(col: pa.Array | pa.ChunkedArray, type_: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """Cast to the column's type; a number that does not fit raises OverflowError naming it,
    as building the array from Python ints would (the ingest names the line that prints it)."""
    try:
        return col.cast(type_)
    except pa.ArrowInvalid:
        info = np.iinfo(type_.to_pandas_dtype())
        numbers = col.to_numpy() if isinstance(col, pa.Array) else col.combine_chunks().to_numpy()
        bad = numbers[(numbers < info.min) | (numbers > info.max)]
        if not len(bad):
            raise
        raise OverflowError(f"Value {int(bad[0])} too large to fit in C integer type") from None


def _rows_table(name: str, rows: list[tuple]) -> pa.Table:
    return _rows_of(SCHEMAS[name], rows)


def _rows_of(schema: pa.Schema, rows: list[tuple]) -> pa.Table:
    """A table of `schema` from row tuples, transposed once."""
    columns = list(zip(*rows)) if rows else [() for _ in schema]
    return pa.Table.from_arrays(
        [pa.array(c, f.type) for f, c in zip(schema, columns)], schema=schema
    )


def _first(mask: pa.Array) -> int | None:
    """Index of the first true element, None when there is none."""
    found = np.flatnonzero(mask.to_numpy(zero_copy_only=False))
    return int(found[0]) if len(found) else None


def _key(table: pa.Table, keys: list[str]) -> pa.Array:
    """One value per row standing for the row's `keys` (joined strings for a compound key).

    The separator cannot occur in the last key, a ShapeIndex, so the join is one-to-one.
    """
    columns = [table[k].combine_chunks() for k in keys]
    if len(columns) == 1:
        return columns[0]
    return pc.binary_join_element_wise(*columns, "\x1f")


#: Modules with fewer Used values blocks (one per value) than this do not hand memory
#: back between steps: the calls would cost more than the little they return, and a
#: fleet has thousands of small modules.
_RELEASE_MIN_VALUES = 1 << 16


def _release(s: Scanned) -> None:
    """Hand what the last steps freed back to the OS (memory.release), for a large module."""
    if s.used.num_rows >= _RELEASE_MIN_VALUES:
        memory.release()


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


def _lookup(
    table: pa.Table, keys: list[str], targets: pa.Table, column: str
) -> pa.Array | pa.ChunkedArray:
    """`column` of `targets` matched on `keys` for each row of `table`, in table order (null if none).

    `targets` must have one row per key.
    """
    if table.num_rows == 0:
        return pa.array([], targets.schema.field(column).type)
    where = pc.index_in(_key(table, keys), value_set=_key(targets, keys))
    return pc.take(targets[column], where)


def finish(
    s: Scanned,
    files: list[tuple[str, str]],
    hlo_path: str | None,
    read: Callable[[str], Iterable[tuple[int, str]]],
) -> ParsedModule:
    """The module's tables, facts and warnings, after the cross-checks.

    `s` is used up: each scanned column is let go as soon as what is derived
    from it exists, and the steps run in the order that holds the least at once
    (the heap sweep before the instruction texts are parsed, the values sorted
    by id only after that), so a large module's text is never held twice.
    Checks that raise and steps that warn keep their order.
    """
    ba_path = s.ba_path
    out = ParsedModule()
    if "allocations" not in s.sections:
        raise ParseError(ba_path, 0, "no 'BufferAssignment:' section found")
    allocs = s.allocs
    if allocs.num_rows == 0:
        raise ParseError(
            ba_path, s.ends.get(ba_path, 0), "no allocation after 'BufferAssignment:' (truncated?)"
        )
    lr_path = s.lr_path or ba_path
    # Invariants that XLA's printer guarantees; a break means a cut or edited file.
    alloc_sum = sum(allocs["size"].to_pylist())
    if s.total is not None and s.total != alloc_sum:
        path, line = s.total_line or (ba_path, 0)
        raise ParseError(
            path,
            line,
            f"'Total bytes used: {s.total}' but the allocations add up to {alloc_sum} "
            "(allocations missing or file edited?)",
        )
    used_path = s.used_path or ba_path
    values, used = s.values, s.used
    if used.num_rows:
        missing = pc.invert(pc.is_in(values["value_id"], value_set=used["value_id"]))
        first = _first(missing)
        if first is not None:
            raise ParseError(
                used_path,
                0,
                f"{pc.sum(missing).as_py()} placed values have no Used values block "
                f"(first: value {values['value_id'][first].as_py()}); file truncated?",
            )
        if "from_instruction" in s.features:
            first = _first(pc.is_null(used["text"]))
            if first is not None:
                raise ParseError(
                    used_path,
                    used["line"][first].as_py(),
                    f"used value {used['value_id'][first].as_py()} has no ' from instruction:' line",
                )
    del used  # finish drops the bulky text column as soon as it has what it needs
    split = "split" in s.features
    if not split and s.total is not None and "used_values" not in s.sections:
        raise ParseError(
            ba_path, 0, "file ends after 'Total bytes used' without 'Used values:' (truncated?)"
        )
    if "used_values" not in s.sections:
        where = s.total_line[0] if s.total_line else ba_path
        raise ParseError(
            where,
            s.ends.get(where, 0),
            "no 'Used values:' section: the file ends in the BufferAssignment section "
            "(truncated?), or the -buffer-assignment-values.txt of a split (2026-04+) dump "
            "is missing",
        )
    if not split and "from_instruction" in s.features and "live_range" not in s.sections:
        raise ParseError(ba_path, 0, "no HloLiveRange section after Used values (truncated?)")
    if s.schedule_length is not None and len(s.sequence) != s.schedule_length:
        raise ParseError(
            lr_path,
            0,
            f"InstructionSequence has {len(s.sequence)} steps but 'HloLiveRange (max {s.schedule_length})' "
            "(file truncated?)",
        )

    # Live ranges name values by (instruction, index); a later entry of the same key wins.
    live = s.live
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
    live_last_vid = pc.take(live_vid, last)
    del named, value_codes, live_codes, peak_codes, by_value, by_live, value_ids, last
    _release(s)
    live_rows = {
        "value_id": live_vid,
        "instruction": live["instruction"],
        "shape_index": live["shape_index"],
        "start_time": live["start_time"],
        "end_time": live["end_time"],
    }

    peak_table = _peak_rows(s, lr_path, live_last, peak_live, peak_vid)
    logical_peak = None
    if s.peak.num_rows:
        last_cum = s.peak["cumulative"][-1].as_py()
        logical_peak = last_cum if last_cum is not None else sum_exact(s.peak["bytes"].to_numpy())
    elif s.peak_time is not None:
        logical_peak = 0
    _release(s)
    if s.trace and s.trace[-1][5] != 0:
        raise ParseError(
            lr_path,
            s.ends.get(lr_path, 0),
            "stack-trace breakdown does not end with 'remaining: 0 bytes' (truncated?)",
        )

    temp = temp_allocations(allocs)
    heap_rows, alloc_live = heap_peaks(s, temp, live_last, live_last_vid)
    del live_last, live_last_vid
    _release(s)

    instr_table = _instructions(s, out, used_path, hlo_path, read)

    # Allocation rows.
    is_parameter = pc.is_valid(allocs["parameter_number"])
    bad = _first(pc.and_(allocs["preallocated_temp"], pc.invert(temp)))
    if bad is not None:
        raise ParseError(
            ba_path,
            allocs["line"][bad].as_py(),
            "'preallocated-temp' together with parameter/output/constant/thread-local",
        )
    if not np.array_equal(allocs["index"].to_numpy(), np.arange(allocs.num_rows)):
        out.warnings.append(
            DumpError(ba_path, 0, "allocation indices are not 0..n-1 in file order")
        )
    category = pc.case_when(
        pc.make_struct(
            is_parameter, allocs["maybe_live_out"], allocs["thread_local"], allocs["constant"]
        ),
        "parameter",
        "output",
        "thread-local",
        "constant",
        "temp",
    )

    # Sorted by id a column at a time: each column in file order goes once its copy exists.
    order = pc.sort_indices(values["value_id"])
    value_count, schema = values.num_rows, values.schema
    columns = []
    for name in schema.names:
        columns.append(values[name].take(order))
        s.values = values = values.drop_columns([name])
        _release(s)
    s.values = by_id = pa.Table.from_arrays(columns, schema=schema)
    del values, order, columns
    value_table = _value_table(by_id, ba_path)
    assign_table = _table(
        "assignments",
        {
            "value_id": by_id["value_id"],
            "allocation_index": by_id["allocation"],
            "byte_offset": by_id["byte_offset"],
            "size": by_id["size"],
            "reused_cross_color": by_id["cross_color"],
        },
    )
    alloc_table = _table(
        "allocations",
        {
            "allocation_index": allocs["index"],
            "size": allocs["size"],
            "color": allocs["color"],
            "parameter_number": allocs["parameter_number"],
            "parameter_shape": allocs["parameter_shape"],
            "parameter_shape_index": allocs["parameter_shape_index"],
            "output_shape": allocs["output_shape"],
            "is_parameter": is_parameter,
            "is_constant": allocs["constant"],
            "is_thread_local": allocs["thread_local"],
            "is_maybe_live_out": allocs["maybe_live_out"],
            "is_preallocated_temp": allocs["preallocated_temp"],
            "category": category,
            "address": allocs["address"],
            "line": allocs["line"],
            "max_live_bytes": alloc_live,
        },
    )
    out.tables = {
        "allocations": alloc_table,
        "hlo_values": value_table,
        "assignments": assign_table,
        "positions": _table("positions", {c: s.positions[c] for c in s.positions.column_names}),
        "uses": _table("uses", {c: s.uses[c] for c in s.uses.column_names}),
        "instructions": instr_table,
        "sequence": _table(
            "sequence",
            {
                "time": pa.array(np.arange(len(s.sequence), dtype=np.int64)),
                "instruction": s.sequence,
            },
        ),
        "live_ranges": _table("live_ranges", live_rows),
        "peak_values": peak_table,
        "stack_trace": _rows_table(
            "stack_trace",
            [
                (i, depth, None if parent < 0 else parent, name, pct, total, current, remaining)
                for i, (depth, name, pct, total, current, remaining, parent) in enumerate(s.trace)
            ],
        ),
        "usage_report": _rows_table("usage_report", list(s.report)),
        "heap_peaks": _rows_table("heap_peaks", heap_rows),
    }
    out.sections = s.sections
    out.features = s.features
    out.warnings.extend(s.warnings)
    heap0 = next((r[5] for r in heap_rows if r[0] == 0), None)
    out.facts = {
        "total_bytes": s.total,
        "allocation_count": allocs.num_rows,
        "value_count": value_count,
        "schedule_length": s.schedule_length,
        "logical_peak_time": s.peak_time,
        "logical_peak_bytes": logical_peak,
        "heap_peak_bytes": heap0,
        "format_era": max((ERA_FEATURES[f] for f in s.features if f in ERA_FEATURES), default=None),
        "layout": "split" if "split" in s.features else "combined",
        "tiled": value_table["tiles"].null_count < value_table.num_rows,
        "has_address": allocs["address"].null_count < allocs.num_rows,
    }
    return out


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
    return _table(
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


def _instructions(
    s: Scanned,
    out: ParsedModule,
    used_path: str,
    hlo_path: str | None,
    read: Callable[[str], Iterable[tuple[int, str]]],
) -> pa.Table:
    """One row per distinct defining instruction, from the first text printed for it."""
    used = s.used
    if used["text"].null_count:
        used = used.filter(pc.is_valid(used["text"]))
    names = _lookup(used, ["value_id"], s.values.select(["value_id", "instruction"]), "instruction")
    if isinstance(names, pa.ChunkedArray):
        names = names.combine_chunks()
    codes = pc.dictionary_encode(names).indices.to_numpy(zero_copy_only=False)
    first_rows = first_occurrences(codes)
    take = pa.array(first_rows, pa.int64())
    lines = pc.take(used["line"], take)
    pieces = used["text"].chunks
    del used
    s.used = s.used.drop_columns(["text"])  # the distinct texts are all that is needed now
    texts = _take_ascending(pieces, first_rows, pa.string())
    _release(s)
    schema = SCHEMAS["instructions"]
    parts: list[pa.Table] = []
    for start in range(0, len(texts), _PARSE_BATCH):  # a batch at a time: few Python objects
        parts.append(
            _parse_batch(
                texts.slice(start, _PARSE_BATCH).to_pylist(),
                lines.slice(start, _PARSE_BATCH).to_pylist(),
                out,
                used_path,
            )
        )
    parsed = pa.concat_tables(parts) if parts else _PARSED.empty_table()
    source_file, source_line = parsed["source_file"], parsed["source_line"]
    source_function = pa.nulls(len(parsed), pa.string())
    frame_id = parsed["stack_frame_id"]
    if hlo_path and frame_id.null_count < len(frame_id):
        try:
            frames = hlo.parse_stack_frames(line for _, line in read(hlo_path))
            if "hlo" not in s.sections:
                s.sections.append("hlo")
        except DumpError as exc:
            out.warnings.append(exc)
            frames = {}
        # A frame id stands for the location where the metadata names no file.
        ids = pa.array(list(frames), pa.int64())
        where = pc.index_in(pc.cast(frame_id, pa.int64()), value_set=ids)
        resolve = pc.and_(pc.is_null(source_file), pc.is_valid(where))
        locs = list(frames.values())
        for column, values, type_ in (
            ("file", [loc.file for loc in locs], pa.string()),
            ("line", [loc.line for loc in locs], pa.int32()),
            ("function", [loc.function for loc in locs], pa.string()),
        ):
            found = pc.take(pa.array(values, type_), where)
            if column == "file":
                source_file = pc.if_else(resolve, found, source_file)
            elif column == "line":
                source_line = pc.if_else(resolve, found, source_line)
            else:
                source_function = pc.if_else(resolve, found, source_function)
    columns: dict[str, object] = {name: parsed[name] for name in _PARSED.names}
    columns.update(
        instruction=pc.take(names, take),
        source_file=source_file,
        source_line=source_line,
        source_function=source_function,
        text=texts,
    )
    return _table("instructions", {f.name: columns[f.name] for f in schema})


def _take_ascending(
    pieces: list[pa.Array], rows: np.ndarray, type_: pa.DataType
) -> pa.ChunkedArray:
    """The elements at ascending `rows` of `pieces` laid end to end, taken a piece at a time.

    Arrow's take on a chunked column first joins the chunks into one copy; here
    each piece is let go (`pieces` is emptied) once taken from, so the texts a
    module prints are never held twice.
    """
    out = []
    start = 0
    for i, piece in enumerate(pieces):
        pieces[i] = None  # type: ignore[call-overload]
        lo, hi = np.searchsorted(rows, [start, start + len(piece)])
        out.append(piece.take(pa.array(rows[lo:hi] - start, pa.int64())))
        start += len(piece)
        del piece
    return pa.chunked_array(out, type_)


#: Instruction texts parsed per batch; bounds the Python objects alive at once.
_PARSE_BATCH = 1 << 15
#: instructions column -> the hlo.Instruction attribute it is read from.
_PARSED_FROM = {
    "opcode": "opcode",
    "shape": "shape",
    "operands": "operands",
    "parameter_number": "parameter_number",
    "fusion_kind": "fusion_kind",
    "called_computations": "called",
    "custom_call_target": "custom_call_target",
    "op_name": "op_name",
    "op_type": "op_type",
    "source_file": "source_file",
    "source_line": "source_line",
    "stack_frame_id": "stack_frame_id",
}
_PARSED = pa.schema([SCHEMAS["instructions"].field(name) for name in _PARSED_FROM])
#: All of an Instruction's columns in one C call per text.
_FIELDS = operator.attrgetter(*_PARSED_FROM.values())
_UNREAD = (None,) * len(_PARSED)


def _parse_batch(texts: list[str], lines: list[int], out: ParsedModule, used_path: str) -> pa.Table:
    rows: list[tuple] = []
    for text, line in zip(texts, lines):
        try:
            rows.append(_FIELDS(hlo.parse_instruction(text)))
        except hlo.InstructionSyntaxError as exc:
            rows.append(_UNREAD)
            out.warnings.append(
                DumpError(used_path, line, f"instruction text not understood: {exc}")
            )
    return _rows_of(_PARSED, rows)


def _value_table(by_id: pa.Table, ba_path: str) -> pa.Table:
    """hlo_values rows (sorted by id); each distinct shape string is parsed once."""
    encoded = pc.dictionary_encode(by_id["shape"].combine_chunks())
    distinct = encoded.dictionary.to_pylist()
    codes = encoded.indices
    per_shape: dict[str, list] = {
        k: []
        for k in (
            "element_type",
            "dims",
            "is_dynamic",
            "minor_to_major",
            "tiles",
            "memory_space",
            "logical_bytes",
            "is_tuple",
        )
    }
    bad: dict[int, str] = {}
    for code, text in enumerate(distinct):
        try:
            shape = shapes.parse_shape(text)
        except shapes.ShapeSyntaxError as exc:
            bad[code] = str(exc)
            shape = None
        if shape is None:
            for col in per_shape.values():
                col.append(None)
            continue
        per_shape["element_type"].append(shape.element_type)
        per_shape["dims"].append(list(shape.dims) if not shape.is_tuple else None)
        per_shape["is_dynamic"].append(any(shape.dynamic) if not shape.is_tuple else False)
        per_shape["minor_to_major"].append(
            list(shape.minor_to_major) if shape.minor_to_major is not None else None
        )
        per_shape["tiles"].append(shape.tiles)
        per_shape["memory_space"].append(shape.memory_space)
        per_shape["logical_bytes"].append(shapes.byte_size(shape))
        per_shape["is_tuple"].append(shape.is_tuple)
    if bad:
        mask = pc.is_in(codes, value_set=pa.array(sorted(bad), codes.type))
        i = _first(mask)
        assert i is not None
        raise ParseError(
            ba_path,
            by_id["line"][i].as_py(),
            f"value shape not understood: {bad[codes[i].as_py()]}",
            by_id["shape"][i].as_py(),
        )
    columns: dict[str, object] = {
        "value_id": by_id["value_id"],
        "instruction": by_id["instruction"],
        "shape_index": by_id["shape_index"],
        "is_phi": by_id["is_phi"],
        "color": by_id["color"],
        "shape": by_id["shape"],
        "line": by_id["line"],
    }
    schema = SCHEMAS["hlo_values"]
    for name, col in per_shape.items():
        columns[name] = pc.take(pa.array(col, schema.field(name).type), codes)
    return _table("hlo_values", columns)
