"""Cross-check a scanned module and derive the warehouse tables from it.

Checks here are the invariants that XLA's printer guarantees across sections
(every placed value has a Used values block, the schedule is complete, the
peak list matches the live ranges...): a break means a cut or edited file and
raises ParseError with file and line. Work is done on whole Arrow columns;
Python loops run only over what is small (allocations, distinct shapes,
distinct instructions, the peak list) or inherently sequential (the heap sweep).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bufferhouse.errors import DumpError, ParseError
from bufferhouse.ingest import hlo, shapes
from bufferhouse.ingest.model import ERA_FEATURES, ParsedModule, Scanned, first_occurrences
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


def _last_by_key(table: pa.Table, keys: list[str], columns: list[str]) -> pa.Table:
    """For each distinct key, the columns of its last row in table order."""
    encoded = pc.dictionary_encode(_key(table, keys))
    last = np.zeros(len(encoded.dictionary), dtype=np.int64)
    np.maximum.at(last, encoded.indices.to_numpy(zero_copy_only=False), np.arange(len(encoded)))
    rows = np.sort(last)
    return table.select(keys + columns).take(pa.array(rows, pa.int64()))


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
    key = ["instruction", "shape_index"]
    value_keys = _last_by_key(values, key, ["value_id"])
    live = s.live
    live_vid = _lookup(live, key, value_keys, "value_id")
    live_last = _last_by_key(live, key, ["start_time", "end_time"])
    live_rows = {
        "value_id": live_vid,
        "instruction": live["instruction"],
        "shape_index": live["shape_index"],
        "start_time": live["start_time"],
        "end_time": live["end_time"],
    }

    peak_rows = _peak_rows(s, lr_path, value_keys, live_last)
    if s.trace and s.trace[-1][5] != 0:
        raise ParseError(
            lr_path,
            s.ends.get(lr_path, 0),
            "stack-trace breakdown does not end with 'remaining: 0 bytes' (truncated?)",
        )

    instr_table = _instructions(s, out, used_path, hlo_path, read)

    # Allocation rows.
    is_parameter = pc.is_valid(allocs["parameter_number"])
    temp = _is_temp(allocs)
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

    by_id = values.take(pc.sort_indices(values["value_id"]))
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

    heap_rows, alloc_live = _heap_peaks(s, temp, value_keys, live_last)
    index = allocs["index"].to_pylist()
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
            "max_live_bytes": [alloc_live.get(i) for i in index],
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
        "peak_values": _rows_table("peak_values", peak_rows),
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
    logical_peak = None
    if s.peak:
        last_cum = s.peak[-1][3]
        logical_peak = last_cum if last_cum is not None else sum(r[2] for r in s.peak)
    elif s.peak_time is not None:
        logical_peak = 0
    heap0 = next((r[5] for r in heap_rows if r[0] == 0), None)
    out.facts = {
        "total_bytes": s.total,
        "allocation_count": allocs.num_rows,
        "value_count": values.num_rows,
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


def _keys_of(table: pa.Table, names: set[str]) -> dict[tuple[str, str], tuple]:
    """Rows of a (instruction, shape_index, ...) table whose instruction is in `names`, as a dict."""
    if not names:
        return {}
    subset = table.filter(pc.is_in(table["instruction"], value_set=pa.array(sorted(names))))
    cols = [subset[c].to_pylist() for c in subset.column_names]
    return {(row[0], row[1]): row[2:] for row in zip(*cols)}


def _peak_rows(s: Scanned, lr_path: str, value_keys: pa.Table, live_last: pa.Table) -> list[tuple]:
    """The printed peak list: names must be live values, and the list must be complete."""
    if not s.peak:
        if s.peak_time is not None and "peak_index" in s.features:
            _check_peak_count(s, lr_path, live_last)
        return []
    names = {name for name, *_ in s.peak}
    live_by_key = _keys_of(live_last, names)
    live_names = {k[0] for k in live_by_key}
    by_key = _keys_of(value_keys, names)
    rows = []
    running = 0
    for ordinal, (name, index, nbytes, cumulative, line) in enumerate(s.peak):
        k = (name, index if index is not None else "{}")
        if index is not None and k not in live_by_key:
            raise ParseError(
                lr_path, line, f"peak list names {name}{index}, which has no BufferLiveRange entry"
            )
        if index is None and name not in live_names:
            raise ParseError(
                lr_path, line, f"peak list names {name}, which has no BufferLiveRange entry"
            )
        running += nbytes
        if cumulative is not None and cumulative != running:
            raise ParseError(
                lr_path, line, f"cumulative {cumulative} bytes, but the running sum is {running}"
            )
        vid = by_key.get(k)
        rows.append((ordinal, name, index, vid[0] if vid else None, nbytes, cumulative))
    if s.peak_time is not None and "peak_index" in s.features:
        _check_peak_count(s, lr_path, live_last)
    return rows


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
    if live_at_peak != len(s.peak):
        raise ParseError(
            lr_path,
            s.peak[-1][4] if s.peak else s.ends.get(lr_path, 0),
            f"peak list at {t} has {len(s.peak)} entries but {live_at_peak} values are live "
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
    texts = pc.take(used["text"], take)
    lines = pc.take(used["line"], take)
    del used
    s.used = s.used.drop_columns(["text"])  # the distinct texts are all that is needed now
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


def _is_temp(allocs: pa.Table) -> pa.Array:
    """Allocations that hold temporaries: not parameter, output, thread-local or constant."""
    return pc.invert(
        pc.or_(
            pc.or_(pc.is_valid(allocs["parameter_number"]), allocs["maybe_live_out"]),
            pc.or_(allocs["thread_local"], allocs["constant"]),
        )
    )


def _heap_peaks(
    s: Scanned, temp: pa.Array, value_keys: pa.Table, live_last: pa.Table
) -> tuple[list[tuple], dict[int, int | None]]:
    """Per color: indefinite bytes + max temp bytes in use at once.

    Bytes in use in a temp allocation at step t = the measure of the union of
    the byte ranges [offset, offset+size) of its values live at t (both ends
    inclusive). Aliases share a range and are counted once; values whose
    ranges the heap simulator overlapped only touch in time and are also
    counted once. Also returns each temp allocation's own maximum.
    """
    has_live = s.live.num_rows > 0 or (s.schedule_length is not None)
    colors: dict[int, dict[str, int]] = {}
    temps_by_color: dict[int, list[int]] = {}
    for idx, color, size, is_temp in zip(
        s.allocs["index"].to_pylist(),
        s.allocs["color"].to_pylist(),
        s.allocs["size"].to_pylist(),
        temp.to_pylist(),
    ):
        c = colors.setdefault(color, {"total": 0, "indefinite": 0, "temp": 0})
        c["total"] += size
        if is_temp:
            c["temp"] += size
            temps_by_color.setdefault(color, []).append(idx)
        else:
            c["indefinite"] += size
    temp_allocs = pa.array([idx for idxs in temps_by_color.values() for idx in idxs], pa.int64())
    values = s.values
    temp_values = values.filter(
        pc.and_(
            pc.is_in(values["allocation"], value_set=temp_allocs),
            pc.not_equal(values["size"], 0),
        )
    )
    # value -> (start, end): each live entry resolved to its value; the last entry wins.
    live_vid = _lookup(live_last, ["instruction", "shape_index"], value_keys, "value_id")
    where = pc.index_in(temp_values["value_id"], value_set=live_vid).to_numpy(zero_copy_only=False)
    end_of_time = s.schedule_length if s.schedule_length is not None else 0
    found = ~np.isnan(where) if where.dtype.kind == "f" else np.ones(len(where), dtype=bool)
    rows_at = np.where(found, np.nan_to_num(where), 0).astype(np.int64)
    starts = np.where(
        found, live_last["start_time"].to_numpy()[rows_at] if len(live_last) else 0, 0
    )
    ends = np.where(
        found, live_last["end_time"].to_numpy()[rows_at] if len(live_last) else 0, end_of_time
    )
    offset = temp_values["byte_offset"].to_numpy()
    time, alloc, delta = _in_use_events(
        temp_values["allocation"].to_numpy(),
        offset,
        offset + temp_values["size"].to_numpy(),
        starts,
        ends,
    )
    alloc_max: dict[int, int | None] = _max_per_alloc(time, alloc, delta)
    rows = []
    for color in sorted(colors):
        c = colors[color]
        temps = temps_by_color.get(color, [])
        if not has_live and temps:
            for idx in temps:
                alloc_max[idx] = None
            rows.append((color, c["total"], c["indefinite"], c["temp"], None, None, None))
            continue
        for idx in temps:
            alloc_max.setdefault(idx, 0)
        mine = np.isin(alloc, np.array(temps, dtype=np.int64))
        best, best_t = _peak(time[mine], delta[mine])
        rows.append(
            (color, c["total"], c["indefinite"], c["temp"], best, c["indefinite"] + best, best_t)
        )
    return rows, alloc_max


def _in_use_events(
    alloc: np.ndarray, lo: np.ndarray, hi: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(time, allocation, +/-bytes) at which bytes of each allocation come into and out of use.

    Bytes in use = the union of the byte ranges [lo, hi) of values live then
    (steps start..end, inclusive). Each allocation's range boundaries cut it
    into segments; a segment is in use while any value covering it is live, so
    overlapping live times on one segment merge and aliases count once.
    """
    n = len(alloc)
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    point_alloc, point_x = np.r_[alloc, alloc], np.r_[lo, hi]
    order = np.lexsort((point_x, point_alloc))
    sorted_alloc, sorted_x = point_alloc[order], point_x[order]
    distinct = np.r_[
        True, (sorted_alloc[1:] != sorted_alloc[:-1]) | (sorted_x[1:] != sorted_x[:-1])
    ]
    inverse = np.empty(2 * n, dtype=np.int64)
    inverse[order] = np.cumsum(distinct) - 1  # each boundary's rank among distinct ones
    first, stop = inverse[:n], inverse[n:]  # segments first..stop-1 of each value
    seg_alloc = sorted_alloc[distinct]
    seg_len = np.r_[np.diff(sorted_x[distinct]), 0]
    counts = stop - first
    pair_seg = np.repeat(first, counts) + (
        np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    )
    pair_start = np.repeat(start, counts)
    pair_end = np.repeat(end, counts)
    order = np.lexsort((pair_start, pair_seg))
    pair_seg, pair_start, pair_end = pair_seg[order], pair_start[order], pair_end[order]
    # Merge the live times of one segment: a new run starts past everything before it.
    span = int(max(pair_end.max(), pair_start.max())) + 2
    base = pair_seg * span
    reach = np.maximum.accumulate(base + pair_end)
    before = np.r_[-1, reach[:-1]] - base  # negative when the segment changes
    new_run = before < pair_start
    run_starts = np.flatnonzero(new_run)
    run_end = np.maximum.reduceat(pair_end, run_starts)
    run_seg = pair_seg[run_starts]
    length = seg_len[run_seg]
    time = np.r_[pair_start[run_starts], run_end + 1]
    return time, np.r_[seg_alloc[run_seg], seg_alloc[run_seg]], np.r_[length, -length]


def _peak(time: np.ndarray, delta: np.ndarray) -> tuple[int, int | None]:
    """Most bytes in use at once and the first step at which that is reached (0 when never)."""
    if len(time) == 0:
        return 0, None
    order = np.argsort(time, kind="stable")
    time, delta = time[order], delta[order]
    steps, at = np.unique(time, return_index=True)
    current = np.cumsum(np.add.reduceat(delta, at))
    best = int(current.max())
    if best <= 0:
        return 0, 0
    return best, int(steps[np.argmax(current == best)])


def _max_per_alloc(time: np.ndarray, alloc: np.ndarray, delta: np.ndarray) -> dict[int, int | None]:
    """Each allocation's most bytes in use at once (its events net to zero, so one running sum serves all)."""
    if len(time) == 0:
        return {}
    order = np.lexsort((time, alloc))
    time, alloc, delta = time[order], alloc[order], delta[order]
    key_change = np.r_[True, (alloc[1:] != alloc[:-1]) | (time[1:] != time[:-1])]
    at = np.flatnonzero(key_change)
    current = np.cumsum(np.add.reduceat(delta, at))
    group_alloc = alloc[at]
    first = np.flatnonzero(np.r_[True, group_alloc[1:] != group_alloc[:-1]])
    most = np.maximum.reduceat(current, first)
    return {int(a): max(int(m), 0) for a, m in zip(group_alloc[first], most)}
