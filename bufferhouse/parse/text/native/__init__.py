"""The compiled column reader's kernels, as Arrow columns (docs/native.md).

Each kernel reads one of grammar.py's line kinds over a column of lines, in C
without the GIL, and gives the pattern's named groups as typed columns: numbers as
int64, strings as strings ("" where a group took no part). It reads only the lines
the pattern matches, as Python's `re` reads them; at the first other line it raises
Irregular, and the module goes to the line reader, which words every error.
tests/parse/text/test_native*.py and tests/parse/text/test_grammar.py hold each kernel to its pattern.
`_instructions` reads instruction texts instead, wrapped by text/instructions.py.

The extensions are built by `pip install` where a C compiler exists (setup.py);
without them `MISSING` says why, and parse reads every dump with the line reader.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pyarrow as pa

try:
    from bufferhouse.parse.text.native import _allocations, _blocks, _instructions, _lines
except ImportError as exc:  # not built: no compiler at install time
    _allocations = _blocks = _instructions = _lines = None
    MISSING: str | None = f"the compiled column reader is not built ({exc})"
else:
    MISSING = None

__all__ = [
    "ALLOCATION",
    "CROSS",
    "CROSS_HEAD",
    "MISSING",
    "OTHER",
    "VALUE",
    "Allocations",
    "Irregular",
    "UsedLines",
    "allocations",
    "glued",
    "live_ranges",
    "peak",
    "sequence",
    "split_lines",
    "starting_with",
    "used_blocks",
]


class Irregular(Exception):
    """Something the column reader does not read; the line reader will."""


def split_lines(text: bytes | memoryview) -> pa.LargeStringArray | None:
    """The newline-terminated lines of `text` without their line ends (CRLF read as LF),
    or None if one holds a lone CR, a NUL byte or invalid UTF-8."""
    split = _lines.split_lines(text)
    if split is None:
        return None
    offsets, chars = split
    return pa.LargeStringArray.from_buffers(
        len(offsets) // 8 - 1, pa.py_buffer(offsets), pa.py_buffer(chars)
    )


def _buffers(lines: pa.LargeStringArray) -> tuple[np.ndarray, pa.Buffer]:
    """The offsets (this slice's) and characters of a large_string column."""
    _, offsets, chars = lines.buffers()
    at = np.frombuffer(offsets, np.int64)[lines.offset : lines.offset + len(lines) + 1]
    return at, chars if chars is not None else pa.py_buffer(b"")


def _run(kernel, lines: pa.LargeStringArray) -> tuple:
    """The kernel's columns over `lines`; Irregular at the first line it does not read."""
    if lines.null_count:
        raise Irregular("null line")
    try:
        bad, *columns = kernel(*_buffers(lines))
    except OverflowError:  # a string column past what Arrow's int32 offsets address
        raise Irregular("a string column past 2 GiB") from None
    if bad >= 0:
        raise Irregular(f"line {bad} of the piece")
    return tuple(columns)


def _numbers(column: bytes) -> pa.Array:
    return pa.array(np.frombuffer(column, np.int64))


def _strings(offsets: bytes, chars: bytes) -> pa.StringArray:
    return pa.StringArray.from_buffers(
        len(offsets) // 4 - 1, pa.py_buffer(offsets), pa.py_buffer(chars)
    )


def starting_with(lines: pa.LargeStringArray, prefixes: tuple[bytes, ...]) -> np.ndarray:
    """The indexes of the lines that start with one of `prefixes` (at most 16)."""
    return np.frombuffer(_lines.starting_with(*_buffers(lines), prefixes), np.int64)


def sequence(lines: pa.LargeStringArray) -> pa.Table:
    """grammar.STEP over every line: columns step, name."""
    step, name_offsets, name_chars, _ = _run(_lines.sequence, lines)
    return pa.table({"step": _numbers(step), "name": _strings(name_offsets, name_chars)})


def live_ranges(lines: pa.LargeStringArray) -> pa.Table:
    """grammar.BUFFER_LIVE_RANGE over every line: columns name, idx, start, end."""
    start, end, name_o, name_c, idx_o, idx_c, _ = _run(_lines.live_ranges, lines)
    return pa.table(
        {
            "name": _strings(name_o, name_c),
            "idx": _strings(idx_o, idx_c),
            "start": _numbers(start),
            "end": _numbers(end),
        }
    )


def peak(lines: pa.LargeStringArray) -> tuple[pa.Table, np.ndarray]:
    """grammar.PEAK over every line but blank ones: columns name, idx ("" if none), bytes,
    cumulative (null if none); and the indexes of the lines read."""
    bytes_, cumulative, name_o, name_c, idx_o, idx_c, has, rows = _run(_lines.peak, lines)
    printed = np.frombuffer(has, np.uint8).astype(bool)
    table = pa.table(
        {
            "name": _strings(name_o, name_c),
            "idx": _strings(idx_o, idx_c),
            "bytes": _numbers(bytes_),
            "cumulative": pa.array(np.frombuffer(cumulative, np.int64), mask=~printed),
        }
    )
    return table, np.frombuffer(rows, np.int64)


@dataclass(frozen=True)
class UsedLines:
    """A piece of the Used values section as used_blocks reads it."""

    letters: np.ndarray  # uint8: each line's letter (grammar.BLOCK_LETTERS), b"x" if none
    ids: np.ndarray  # int64 per header line ('h')
    names: pa.StringArray
    position_block: np.ndarray  # int64 per position: its header's rank in the piece
    position_name: pa.StringArray
    position_idx: pa.StringArray  # "" if none
    use_block: np.ndarray  # int64 per use
    use_name: pa.StringArray
    use_op: np.ndarray  # int64
    use_idx: pa.StringArray  # "" if none
    texts: pa.StringArray  # per from line ('f'): after FROM and one space if it has one
    spaced: np.ndarray  # bool per from line: a space after FROM
    ends: np.ndarray  # bool per from line: it ends with '>'


def used_blocks(lines: pa.LargeStringArray, letters: tuple) -> UsedLines:
    """Each line's letter by the table `letters` (grammar.BLOCK_LETTERS), and the lines
    the letters say read: grammar.HEADER for 'h', POSITION for 'i' before its block's
    'U' line and USE after it, the text after FROM for 'f'. Irregular at the first
    'h' or 'i' line not read."""
    (letter, ids, *columns) = _run(
        lambda offsets, chars: _blocks.used_blocks(offsets, chars, letters), lines
    )
    names = _strings(*columns[0:2])
    pos_block, pos_name, pos_idx = columns[2], _strings(*columns[3:5]), _strings(*columns[5:7])
    use_block, use_op = columns[7], columns[8]
    use_name, use_idx = _strings(*columns[9:11]), _strings(*columns[11:13])
    texts, spaced, ends = _strings(*columns[13:15]), columns[15], columns[16]
    return UsedLines(
        letters=np.frombuffer(letter, np.uint8),
        ids=np.frombuffer(ids, np.int64),
        names=names,
        position_block=np.frombuffer(pos_block, np.int64),
        position_name=pos_name,
        position_idx=pos_idx,
        use_block=np.frombuffer(use_block, np.int64),
        use_name=use_name,
        use_op=np.frombuffer(use_op, np.int64),
        use_idx=use_idx,
        texts=texts,
        spaced=np.frombuffer(spaced, np.uint8).astype(bool),
        ends=np.frombuffer(ends, np.uint8).astype(bool),
    )


def glued(lines: pa.LargeStringArray, from_text: str) -> tuple[np.ndarray, np.ndarray]:
    """The lines that start with `from_text` (grammar.FROM), then one space or none, '%',
    and end with a grammar.GLUED_HEADER after the text; and where in the character
    buffer of `lines` each such header starts."""
    rows, splits = _run(lambda offsets, chars: _blocks.glued(offsets, chars, from_text), lines)
    return np.frombuffer(rows, np.int64), np.frombuffer(splits, np.int64)


#: The kinds of a BufferAssignment section's lines, as allocations() numbers them: an
#: allocation header, a ` value:` line, grammar.CROSS_HEAD, a cross-color `  value:`
#: line, and every other line (the line reader's).
OTHER, ALLOCATION, VALUE, CROSS_HEAD, CROSS = range(5)


class Allocations(NamedTuple):
    """A BufferAssignment section's lines, read in one pass."""

    kinds: np.ndarray  # uint8, one per line
    allocs: pa.Table  # grammar.ALLOCATION: index, address ("" if none), size, rest
    values: pa.Table  # grammar.VALUE: id, name, idx ("" if none), phi, color (null if
    # none), size, offset, shape
    cross: pa.Table  # grammar.CROSS: id, name, idx, phi, color ("" if none), other; the
    # line reader reads only the id as a number, so the colors are the digits printed


def _flags(column: bytes) -> np.ndarray:
    return np.frombuffer(column, np.uint8).astype(bool)


def allocations(lines: pa.LargeStringArray) -> Allocations:
    """Every line of a BufferAssignment section body classified, and each allocation
    header, ` value:` and cross-color `  value:` line read by its pattern (Irregular at
    the first that it does not fullmatch, or whose numbers pass int64)."""
    (kinds,), alloc, value, cross = _run(_allocations.allocations, lines)
    index, size, address_o, address_c, rest_o, rest_c = alloc
    id_, color, size_v, offset, phi, colored, name_o, name_c, idx_o, idx_c, shape_o, shape_c = value
    allocs = pa.table(
        {
            "index": _numbers(index),
            "address": _strings(address_o, address_c),
            "size": _numbers(size),
            "rest": _strings(rest_o, rest_c),
        }
    )
    values = pa.table(
        {
            "id": _numbers(id_),
            "name": _strings(name_o, name_c),
            "idx": _strings(idx_o, idx_c),
            "phi": pa.array(_flags(phi)),
            "color": pa.array(np.frombuffer(color, np.int64), mask=~_flags(colored)),
            "size": _numbers(size_v),
            "offset": _numbers(offset),
            "shape": _strings(shape_o, shape_c),
        }
    )
    c_id, c_phi, c_name_o, c_name_c, c_idx_o, c_idx_c, color_o, color_c, other_o, other_c = cross
    crosses = pa.table(
        {
            "id": _numbers(c_id),
            "name": _strings(c_name_o, c_name_c),
            "idx": _strings(c_idx_o, c_idx_c),
            "phi": pa.array(_flags(c_phi)),
            "color": _strings(color_o, color_c),
            "other": _strings(other_o, other_c),
        }
    )
    return Allocations(np.frombuffer(kinds, np.uint8), allocs, values, crosses)
