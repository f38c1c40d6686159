"""The line reader over a batch of small modules: one LineReader a module (its state is
the module's), but one Arrow table a scanned kind for the whole batch, each row with its
module's index in the batch (`module`, int32).

Building a module's nine scanned tables from row tuples cost ~0.45 ms a module of the
~1.1 ms the line reader spends on a helper module (issue 39): the cost is the number of
Arrow calls, not the rows. Here the calls are made once a batch.

A module the line reader refuses (a located ParseError, an unreadable file) is left out
of the batch (`failed`): parse.batch parses it alone, so its error is the one-module
parse's, word for word.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from bufferhouse.parse import model
from bufferhouse.parse.reader import read_lines, stored_size
from bufferhouse.parse.text import native
from bufferhouse.parse.text.scan import LineReader, _table, split_layout

#: The scanned kinds of model.Scanned a batch holds as tables, with their schemas.
KINDS = {
    "allocs": model.ALLOCS,
    "values": model.VALUES,
    "cross": model.CROSS,
    "used": model.USED,
    "positions": model.POSITIONS,
    "uses": model.USES,
    "schedule": model.SCHEDULE,
    "live": model.LIVE,
    "peak": model.PEAK,
}


@dataclass
class BatchScanned:
    """The batch's scanned tables (each with a `module` column, rows in module order) and
    each module's reader (its small facts: sections, features, totals, the trace)."""

    tables: dict[str, pa.Table]
    readers: list[LineReader | None]  # None: failed, parsed alone
    ba_paths: list[str]
    hlo_paths: list[str | None]
    modules: int = 0
    failed: set[int] = field(default_factory=set)


def readable(files: list[tuple[str, str]], vector_min_bytes: int) -> bool:
    """Whether the one-module parse reads these files with the line reader alone: below
    the column reader's size, or without its kernels (parse_module, vector.scan)."""
    if native.MISSING:
        return True
    try:
        return sum(stored_size(path) for _, path in files) < vector_min_bytes
    except OSError:
        return False


def read_batch(
    modules: list[list[tuple[str, str]]], hlo_paths: list[str | None], vector_min_bytes: int
) -> BatchScanned:
    """Each module's files, given as (role, path), read by a LineReader of its own; the rows
    of all of them as one table a kind."""
    readers: list[LineReader | None] = []
    failed = set()
    for i, files in enumerate(modules):
        reader = _read_one(files) if readable(files, vector_min_bytes) else None
        if reader is None:
            failed.add(i)
        readers.append(reader)
    ba_paths = [next(p for role, p in files if role == "buffer_assignment") for files in modules]
    tables = {kind: _batch_table(kind, readers) for kind in KINDS}
    return BatchScanned(tables, readers, ba_paths, list(hlo_paths), len(modules), failed)


def _read_one(files: list[tuple[str, str]]) -> LineReader | None:
    """The module read as scan.read reads it, its rows left in the reader; None when it
    refuses the module (parse.batch reads that one alone, for its error)."""
    reader = LineReader()
    try:
        for role, path in files:
            if role == "usage_report":
                reader.feed_report(path, read_lines(path))
            else:
                reader.feed(path, read_lines(path))
    except Exception:  # the one-module parse words it
        return None
    if split_layout(files):
        reader.features.add("split")
    return reader


def _rows(kind: str, reader: LineReader) -> list:
    """The reader's rows of a scanned kind, as scan.LineReader.scanned tabulates them."""
    if kind == "allocs":
        return [model.alloc_row(a) for a in reader.allocs]
    if kind == "schedule":
        return reader.schedule
    return getattr(reader, kind)


def _batch_table(kind: str, readers: list[LineReader | None]) -> pa.Table:
    """One scanned kind of all the batch's modules, with each row's module."""
    rows: list = []
    counts = np.zeros(len(readers), np.int64)
    for i, reader in enumerate(readers):
        if reader is not None:
            got = _rows(kind, reader)
            counts[i] = len(got)
            rows.extend(got)
    table = _table(KINDS[kind], rows)
    module = np.repeat(np.arange(len(readers), dtype=np.int32), counts)
    return table.append_column("module", pa.array(module, pa.int32()))


def module_bounds(module: pa.ChunkedArray | pa.Array | np.ndarray, modules: int) -> np.ndarray:
    """Where each module's rows start in a table in module order, and where the last ends
    (modules + 1 offsets)."""
    if not isinstance(module, np.ndarray):
        module = module.to_numpy() if isinstance(module, pa.Array) else _np(module)
    return np.searchsorted(module, np.arange(modules + 1, dtype=np.int32))


def rank(module: np.ndarray, modules: int) -> np.ndarray:
    """Each row's position among its module's rows (a table in module order)."""
    starts = module_bounds(module, modules)
    return np.arange(len(module), dtype=np.int64) - starts[module]


def _np(column: pa.ChunkedArray) -> np.ndarray:
    return column.combine_chunks().to_numpy(zero_copy_only=False)
