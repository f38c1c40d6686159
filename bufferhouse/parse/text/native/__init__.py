"""The compiled column reader's kernels, as Arrow columns (docs/native.md).

Each kernel reads one of grammar.py's line kinds over a column of lines, in C
without the GIL, and gives the pattern's named groups as typed columns: numbers as
int64, strings as strings ("" where a group took no part, as RE2 gave). It reads
only the lines the pattern matches, as Python's `re` reads them; at the first
other line it raises Irregular, and the module goes to the line reader, which
words every error. tests/test_native.py holds each kernel to its pattern.
`_instructions` reads instruction texts instead, wrapped by text/instructions.py.

The extensions are built by `pip install` where a C compiler exists (setup.py);
without them `MISSING` says why, and parse reads every dump with the line reader.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from bufferhouse.parse.text.blocks import Irregular

try:
    from bufferhouse.parse.text.native import _instructions, _lines
except ImportError as exc:  # not built: no compiler at install time
    _instructions = _lines = None
    MISSING: str | None = f"the compiled column reader is not built ({exc})"
else:
    MISSING = None

__all__ = ["MISSING", "live_ranges", "peak", "sequence", "split_lines"]


def split_lines(text: bytes) -> pa.LargeStringArray | None:
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
    bad, *columns = kernel(*_buffers(lines))
    if bad >= 0:
        raise Irregular(f"line {bad} of the piece")
    return tuple(columns)


def _numbers(column: bytes) -> pa.Array:
    return pa.array(np.frombuffer(column, np.int64))


def _strings(offsets: bytes, chars: bytes) -> pa.StringArray:
    return pa.StringArray.from_buffers(
        len(offsets) // 4 - 1, pa.py_buffer(offsets), pa.py_buffer(chars)
    )


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
