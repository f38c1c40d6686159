"""columns.instructions over a batch: one row per distinct defining instruction of each
module, every module's texts read by one call of the compiled kernel (a helper module's
few texts cost a call of their own before: 0.83 ms a module, issue 39).

The rows, their order and the warnings are those of each module's own
columns.instructions; a module with a number too large for its column in a text is left
(parse.batch parses it alone, for its located error).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bufferhouse.errors import DumpError
from bufferhouse.parse import hlo
from bufferhouse.parse.text import instructions as text_columns
from bufferhouse.parse.text import rules
from bufferhouse.parse.text.batch_scan import BatchScanned
from bufferhouse.parse.text.columns import (
    _FIELDS,
    _PARSED,
    _UNREAD,
    _rows_of,
    resolve_frames,
    stack_frames,
    table,
)


def instructions(
    b: BatchScanned,
    t: dict[str, pa.Table],
    warnings: list[list[DumpError]],
    sections: list[list[str]],
    read: Callable[[str], Iterable[tuple[int, str]]],
    left: np.ndarray,
) -> pa.Table:
    """The batch's instructions table, with its `module` column."""
    used = t["used"]
    if used["text"].null_count:
        used = used.filter(pc.is_valid(used["text"]))
    n = max(b.modules, 1)
    module = _np(used["module"]).astype(np.int64)
    names = used["instruction"].combine_chunks()  # batch_rules: the names as placed
    codes = _np(pc.dictionary_encode(names).indices).astype(np.int64)
    _, first = np.unique(codes * n + module, return_index=True)
    first_rows = np.sort(first)
    take = pa.array(first_rows, pa.int64())
    texts = used["text"].combine_chunks().take(take)
    lines = used["line"].combine_chunks().take(take)
    of = module[first_rows]
    paths = [
        (r.used_path or path) if r is not None else path for r, path in zip(b.readers, b.ba_paths)
    ]
    parsed = _parse(texts, lines, of, paths, warnings, left)
    source = _sources(b, parsed, of, sections, warnings, read, n)
    columns: dict[str, object] = {name: parsed[name] for name in _PARSED.names}
    columns.update(
        instruction=names.take(take),
        source_file=source[0],
        source_line=source[1],
        source_function=source[2],
        text=texts,
    )
    out = table("instructions", columns)
    return out.append_column("module", pa.array(of, pa.int32()))


def _np(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return column.to_numpy(zero_copy_only=False)


def _parse(
    texts: pa.Array,
    lines: pa.Array,
    of: np.ndarray,
    paths: list[str],
    warnings: list[list[DumpError]],
    left: np.ndarray,
) -> pa.Table:
    """columns.parse_batch over the batch's texts: the common form by the kernel, the rest
    one by one, each warning its module's."""
    fast, fast_rows = text_columns.read_fast(texts)
    slow_rows = text_columns.other_rows(len(texts), fast_rows)
    rows: list[tuple] = []
    at = pa.array(slow_rows, pa.int64())
    for row, text, line in zip(
        slow_rows.tolist(), texts.take(at).to_pylist(), lines.take(at).to_pylist()
    ):
        i = int(of[row])
        try:
            got = _FIELDS(hlo.parse_instruction(text))
        except hlo.InstructionSyntaxError as exc:
            got = _UNREAD
            warnings[i].append(DumpError(paths[i], line, f"instruction text not understood: {exc}"))
        if not _fits(got):
            left[i], got = True, _UNREAD
        rows.append(got)
    slow = _rows_of(_PARSED, rows)
    if not len(slow_rows):
        return fast
    if not len(fast_rows):
        return slow
    order = np.empty(len(texts), np.int64)
    order[fast_rows] = np.arange(len(fast_rows))
    order[slow_rows] = len(fast_rows) + np.arange(len(slow_rows))
    return pa.concat_tables([fast, slow]).take(pa.array(order))


def _fits(row: tuple) -> bool:
    """Every number of a parsed text fits its instructions column (columns._too_large_in_text)."""
    for f, value in zip(_PARSED, row):
        if value is not None and pa.types.is_integer(f.type):
            least, greatest, _ = rules.limits("instructions", f.name)
            if not least <= value <= greatest:
                return False
    return True


def _sources(
    b: BatchScanned,
    parsed: pa.Table,
    of: np.ndarray,
    sections: list[list[str]],
    warnings: list[list[DumpError]],
    read: Callable[[str], Iterable[tuple[int, str]]],
    n: int,
) -> tuple:
    """source_file, source_line, source_function: each module with an HLO file beside it
    and frame ids in its texts resolves them by its own file's frames."""
    frame_id = parsed["stack_frame_id"]
    framed = np.bincount(of[_np(pc.is_valid(frame_id))], minlength=b.modules)
    wanting = [i for i in np.flatnonzero(framed).tolist() if b.hlo_paths[i]]
    if not wanting:
        nulls = pa.nulls(len(parsed), pa.string())
        return parsed["source_file"], parsed["source_line"], nulls
    known: list[int] = []
    locs: list = []
    for i in wanting:
        frames = stack_frames(b.hlo_paths[i], read, sections[i], warnings[i])
        known += [key * n + i for key in frames]
        locs += frames.values()
    keys = pc.add(pc.multiply(pc.cast(frame_id, pa.int64()), n), pa.array(of, pa.int64()))
    return resolve_frames(keys, known, locs, parsed)
