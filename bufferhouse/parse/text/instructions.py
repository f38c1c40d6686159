"""Instruction texts of the common form read as columns by a compiled kernel.

hlo.parse_instruction reads one text at a time in Python, about 9 µs each, and a
large module prints hundreds of thousands of distinct texts. Most of them are
`%name = SHAPE opcode(%a, %b), key=value, ..., metadata={...}`, which the kernel
(native/_instructions.c) reads in C without the GIL, all columns at once. It reads
a text only where it gives exactly parse_instruction's columns, and leaves every
other text to parse_instruction (tests/parse/text/test_instruction_columns.py and
tests/parse/text/test_instruction_kernel.py hold the two equal, column by column). Without the
compiled reader (native.MISSING) every text is parse_instruction's.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from bufferhouse.parse.text import native
from bufferhouse.schema import TABLES_BY_NAME, arrow_schema

#: instructions column -> the hlo.Instruction attribute it is read from: the columns an
#: instruction text gives (columns.parse_batch's table, whichever way a text is read).
PARSED_FROM = {
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
PARSED = pa.schema(
    [arrow_schema(TABLES_BY_NAME["instructions"]).field(name) for name in PARSED_FROM]
)

__all__ = ["other_rows", "read_fast"]


def _input(texts: pa.Array) -> tuple[np.ndarray, pa.Buffer]:
    """The int64 offsets (this slice's) and characters of a string column."""
    _, offsets, chars = texts.buffers()
    width = np.int64 if pa.types.is_large_string(texts.type) else np.int32
    at = np.frombuffer(offsets, width)[texts.offset : texts.offset + len(texts) + 1]
    return at.astype(np.int64), chars if chars is not None else pa.py_buffer(b"")


def _bitmap(valid: bytes) -> pa.Buffer | None:
    """An Arrow validity bitmap from one uint8 flag a row; None if every row is valid."""
    flags = np.frombuffer(valid, np.uint8)
    return None if flags.all() else pa.py_buffer(np.packbits(flags, bitorder="little"))


def _strings(offsets: bytes, chars: bytes, valid: bytes | None = None) -> pa.StringArray:
    return pa.StringArray.from_buffers(
        len(offsets) // 4 - 1,
        pa.py_buffer(offsets),
        pa.py_buffer(chars),
        None if valid is None else _bitmap(valid),
    )


def _columns(buffers: list[bytes]) -> dict[str, pa.Array]:
    """The kernel's buffers (in PARSED's order) as PARSED's columns."""
    take = iter(buffers).__next__

    def lists() -> pa.ListArray:
        offsets = pa.array(np.frombuffer(take(), np.int32))
        return pa.ListArray.from_arrays(offsets, _strings(take(), take()))

    def ints() -> pa.Array:
        values, valid = np.frombuffer(take(), np.int32), np.frombuffer(take(), np.uint8)
        return pa.array(values, pa.int32(), mask=valid == 0)

    def strings() -> pa.StringArray:
        return _strings(take(), take(), take())

    read = {
        "opcode": lambda: _strings(take(), take()),
        "shape": lambda: _strings(take(), take()),
        "operands": lists,
        "called_computations": lists,
        "parameter_number": ints,
        "source_line": ints,
        "stack_frame_id": ints,
    }
    return {name: read.get(name, strings)() for name in PARSED.names}


def read_fast(texts: pa.Array | pa.ChunkedArray) -> tuple[pa.Table, np.ndarray]:
    """The PARSED columns of the texts of the common form, and the (ascending) indexes of
    those texts; hlo.parse_instruction reads each of them the same."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    if native.MISSING or not len(texts):
        return PARSED.empty_table(), np.empty(0, np.int64)
    try:
        rows, *buffers = native._instructions.instructions(*_input(texts))
    except OverflowError:  # texts past 2 GiB in all: parse_instruction reads them
        return PARSED.empty_table(), np.empty(0, np.int64)
    rows = np.frombuffer(rows, np.int64)
    table = pa.Table.from_pydict(_columns(buffers), schema=PARSED)
    if texts.null_count:  # a null's offsets may span text: never read
        keep = texts.is_valid().to_numpy(zero_copy_only=False)[rows]
        table, rows = table.filter(pa.array(keep)), rows[keep]
    return table, rows


def other_rows(n: int, rows: np.ndarray) -> np.ndarray:
    """The indexes of 0..n-1 not in `rows`: the texts read_fast left to the slow path."""
    left = np.ones(n, bool)
    left[rows] = False
    return np.flatnonzero(left)
