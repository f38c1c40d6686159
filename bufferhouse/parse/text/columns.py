"""Warehouse tables from scanned columns: the schemas and builders, and the columns
derived per distinct text (instruction texts, value shapes), each text parsed once.

Numbers that do not fit their warehouse column are errors at the line that
prints them, naming the field (rules.fits).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bufferhouse.errors import DumpError, ParseError
from bufferhouse.parse import hlo, memory, shapes
from bufferhouse.parse.model import Scanned, first_occurrences
from bufferhouse.parse.text import instructions as text_columns
from bufferhouse.parse.text import rules
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


def table(name: str, columns: dict[str, object]) -> pa.Table:
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


def rows_table(name: str, rows: list[tuple]) -> pa.Table:
    return _rows_of(SCHEMAS[name], rows)


def _rows_of(schema: pa.Schema, rows: list[tuple]) -> pa.Table:
    """A table of `schema` from row tuples, transposed once."""
    columns = list(zip(*rows)) if rows else [() for _ in schema]
    return pa.Table.from_arrays(
        [pa.array(c, f.type) for f, c in zip(schema, columns)], schema=schema
    )


def first_true(mask: pa.Array) -> int | None:
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


def release(s: Scanned) -> None:
    """Hand what the last steps freed back to the OS (memory.release), for a large module."""
    if s.used.num_rows >= _RELEASE_MIN_VALUES:
        memory.release()


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


def instructions(
    s: Scanned,
    warnings: list[DumpError],
    used_path: str,
    hlo_path: str | None,
    read: Callable[[str], Iterable[tuple[int, str]]],
    threads: int = 0,
) -> pa.Table:
    """One row per distinct defining instruction, from the first text printed for it.

    The texts are parsed a batch at a time, by this thread and `threads` more."""
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
    release(s)
    schema = SCHEMAS["instructions"]
    batches = [  # a batch at a time: few Python objects
        (texts.slice(start, _PARSE_BATCH), lines.slice(start, _PARSE_BATCH))
        for start in range(0, len(texts), _PARSE_BATCH)
    ]
    parts = []
    for table_, batch_warnings in _parse_batches(batches, used_path, threads):
        parts.append(table_)
        warnings.extend(batch_warnings)
    parsed = pa.concat_tables(parts) if parts else _PARSED.empty_table()
    source_file, source_line = parsed["source_file"], parsed["source_line"]
    source_function = pa.nulls(len(parsed), pa.string())
    frame_id = parsed["stack_frame_id"]
    if hlo_path and frame_id.null_count < len(frame_id):
        frames = stack_frames(hlo_path, read, s.sections, warnings)
        source_file, source_line, source_function = resolve_frames(
            pc.cast(frame_id, pa.int64()), list(frames), list(frames.values()), parsed
        )
    columns: dict[str, object] = {name: parsed[name] for name in _PARSED.names}
    columns.update(
        instruction=pc.take(names, take),
        source_file=source_file,
        source_line=source_line,
        source_function=source_function,
        text=texts,
    )
    return table("instructions", {f.name: columns[f.name] for f in schema})


def stack_frames(
    hlo_path: str,
    read: Callable[[str], Iterable[tuple[int, str]]],
    sections: list[str],
    warnings: list[DumpError],
) -> dict:
    """The HLO file's stack frames by id ("hlo" joins `sections`); none, and its error
    joins `warnings`, when it does not read."""
    try:
        frames = hlo.parse_stack_frames(line for _, line in read(hlo_path))
    except DumpError as exc:
        warnings.append(exc)
        return {}
    if "hlo" not in sections:
        sections.append("hlo")
    return frames


def resolve_frames(
    keys: pa.Array | pa.ChunkedArray, known: list[int], locs: list, parsed: pa.Table
) -> tuple[pa.Array | pa.ChunkedArray, ...]:
    """source_file, source_line and source_function of the parsed texts: where the metadata
    names no file, the location of its frame (`keys`: each text's frame key, `known` the
    keys of `locs`; a batch keys frames by module too)."""
    source_file, source_line = parsed["source_file"], parsed["source_line"]
    where = pc.index_in(keys, value_set=pa.array(known, pa.int64()))
    resolve = pc.and_(pc.is_null(source_file), pc.is_valid(where))
    found = [
        pc.take(pa.array(values, type_), where)
        for values, type_ in (
            ([loc.file for loc in locs], pa.string()),
            ([loc.line for loc in locs], pa.int32()),
            ([loc.function for loc in locs], pa.string()),
        )
    ]
    return (
        pc.if_else(resolve, found[0], source_file),
        pc.if_else(resolve, found[1], source_line),
        pc.if_else(resolve, found[2], pa.nulls(len(parsed), pa.string())),
    )


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
_PARSED_FROM = text_columns.PARSED_FROM
_PARSED = text_columns.PARSED
#: All of an Instruction's columns in one C call per text.
_FIELDS = operator.attrgetter(*_PARSED_FROM.values())
_UNREAD = (None,) * len(_PARSED)


def parse_batch(
    texts: pa.Array, lines: pa.Array, used_path: str
) -> tuple[pa.Table, list[DumpError]]:
    """Instruction texts (and the lines that print them) as `_PARSED` rows, with a
    warning for each text not understood. Several threads may run it at once: it takes and
    returns Arrow and errors, nothing of the module.

    Texts of the common form are read as columns (text.instructions, compiled C); the
    rest one at a time by hlo.parse_instruction, which reads those the same way."""
    fast, fast_rows = text_columns.read_fast(texts)
    slow_rows = text_columns.other_rows(len(texts), fast_rows)
    rows: list[tuple] = []
    warnings: list[DumpError] = []
    line_numbers = lines.take(pa.array(slow_rows, pa.int64())).to_pylist()
    slow_texts = texts.take(pa.array(slow_rows, pa.int64())).to_pylist()
    for text, line in zip(slow_texts, line_numbers):
        try:
            rows.append(_FIELDS(hlo.parse_instruction(text)))
        except hlo.InstructionSyntaxError as exc:
            rows.append(_UNREAD)
            warnings.append(DumpError(used_path, line, f"instruction text not understood: {exc}"))
    try:
        slow = _rows_of(_PARSED, rows)
    except (OverflowError, pa.ArrowInvalid):
        # The fast path reads no number too large for its column: the first is here.
        raise _too_large_in_text(rows, line_numbers, used_path) from None
    if not len(slow_rows):
        return fast, warnings
    if not len(fast_rows):
        return slow, warnings
    order = np.empty(len(texts), np.int64)
    order[fast_rows] = np.arange(len(fast_rows))
    order[slow_rows] = len(fast_rows) + np.arange(len(slow_rows))
    return pa.concat_tables([fast, slow]).take(pa.array(order)), warnings


def _parse_batches(
    batches: list[tuple[pa.Array, pa.Array]], used_path: str, threads: int = 0
) -> list[tuple[pa.Table, list[DumpError]]]:
    """parse_batch of every batch, in order, on `threads` + 1 threads (the fast path is a
    compiled kernel, which releases the GIL). The results, warnings and the error raised
    (that of the first batch in order that fails) are those of parsing the batches one
    after another."""
    if threads < 1 or len(batches) < 2:
        return [parse_batch(*batch, used_path) for batch in batches]
    with ThreadPoolExecutor(min(threads + 1, len(batches)), "bufferhouse-texts") as pool:
        parsed = [pool.submit(parse_batch, *batch, used_path) for batch in batches]
        return [future.result() for future in parsed]


def _too_large_in_text(rows: list[tuple], lines: list[int], used_path: str) -> ParseError:
    """The first number of an instruction text that does not fit its instructions column."""
    for row, line in zip(rows, lines):
        for f, value in zip(_PARSED, row):
            if not pa.types.is_integer(f.type):
                continue
            least, greatest, _ = rules.limits("instructions", f.name)
            if value is not None and not least <= value <= greatest:
                message = rules.too_large(
                    f.name, value, "instructions", f.name, " in the from instruction text"
                )
                return ParseError(used_path, line, message)
    return ParseError(used_path, 0, "a number of an instruction text does not fit its column")


def _too_large_in(shape: shapes.Shape) -> str | None:
    """A number of the shape that does not fit its hlo_values column, worded."""
    for what, numbers, column in (
        ("memory space S(n)", [shape.memory_space], "memory_space"),
        ("dimension", () if shape.is_tuple else shape.dims, "dims"),
        ("minor_to_major entry", shape.minor_to_major or (), "minor_to_major"),
        ("logical byte size", [shapes.byte_size(shape)], "logical_bytes"),
    ):
        least, greatest, _ = rules.limits("hlo_values", column)
        for n in numbers:
            if n is not None and not least <= n <= greatest:
                return rules.too_large(what, n, "hlo_values", column, " in the value shape")
    return None


def value_table(by_id: pa.Table, ba_path: str) -> pa.Table:
    """hlo_values rows (sorted by id); each distinct shape string is parsed once."""
    per_shape, codes, bad = shape_columns(by_id)
    if bad:
        mask = pc.is_in(codes, value_set=pa.array(sorted(bad), codes.type))
        i = first_true(mask)
        assert i is not None
        raise ParseError(
            ba_path,
            by_id["line"][i].as_py(),
            bad[codes[i].as_py()],
            by_id["shape"][i].as_py(),
        )
    return values_of(by_id, per_shape)


def shape_columns(by_id: pa.Table) -> tuple[dict[str, pa.Array], pa.Array, dict[int, str]]:
    """The columns read from each value's shape, the code of each row's shape, and the
    codes of the shapes not understood (or too large) with their errors."""
    encoded = pc.dictionary_encode(by_id["shape"].combine_chunks())
    distinct = encoded.dictionary.to_pylist()
    codes = encoded.indices
    per_shape: dict[str, list] = {k: [] for k in shapes.VALUE_SHAPE_COLUMNS}
    bad: dict[int, str] = {}
    for code, text in enumerate(distinct):
        try:
            shape = shapes.parse_shape(text)
        except shapes.ShapeSyntaxError as exc:
            bad[code] = f"value shape not understood: {exc}"
            shape = None
        if shape is not None and (problem := _too_large_in(shape)):
            bad[code], shape = problem, None
        if shape is None:
            for col in per_shape.values():
                col.append(None)
            continue
        for col, value in zip(per_shape.values(), shapes.value_facts(shape)):
            col.append(value)
    schema = SCHEMAS["hlo_values"]
    taken = {
        name: pc.take(pa.array(col, schema.field(name).type), codes)
        for name, col in per_shape.items()
    }
    return taken, codes, bad


def values_of(by_id: pa.Table, per_shape: dict[str, pa.Array]) -> pa.Table:
    """The hlo_values table of the values (by id) and the columns of their shapes."""
    columns: dict[str, object] = {
        "value_id": by_id["value_id"],
        "instruction": by_id["instruction"],
        "shape_index": by_id["shape_index"],
        "is_phi": by_id["is_phi"],
        "color": by_id["color"],
        "shape": by_id["shape"],
        "line": by_id["line"],
        **per_shape,
    }
    return table("hlo_values", columns)
