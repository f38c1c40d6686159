"""Rows into DuckDB: a table's Arrow rows appended in the order the warehouse stores
them (module, then its key columns), as a stream of record batches."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bufferhouse.schema import TABLES_BY_NAME, quote_identifier

__all__ = ["COMBINE_BYTES", "INSERT_BATCH_ROWS", "insert_arrow", "stored_order"]


#: Rows per record batch streamed into DuckDB: a table to sort is copied this
#: many rows at a time, not whole.
INSERT_BATCH_ROWS = 1 << 16

#: A table to sort up to this size is joined into one chunk first (a copy).
COMBINE_BYTES = 64 << 20


def stored_order(table_name: str, data: pa.Table) -> np.ndarray | None:
    """Row order that sorts `data` module by module as its table declares for storage
    (Table.stored_order); None when it needs no sorting."""
    keys = TABLES_BY_NAME[table_name].stored_order
    if not keys or data.num_rows < 2:
        return None
    order = pc.sort_indices(data, [("module_id", "ascending"), *((k, "ascending") for k in keys)])
    return order.to_numpy().astype(np.int64)


def _batches(data: pa.Table, order: np.ndarray | None, rows: int) -> Iterator[pa.RecordBatch]:
    """`data` (in `order`) a slice at a time; the table is let go once the last is taken."""
    if order is None:
        yield from data.to_batches(rows)
        return
    if data.nbytes <= COMBINE_BYTES:
        # A batch of small modules is a chunk per module: taking from each of
        # hundreds of chunks, column by column, cost more than the copy.
        data = data.combine_chunks()
    starts = [_chunk_starts(column) for column in data.columns]
    for at in range(0, data.num_rows, rows):
        where = order[at : at + rows]
        yield pa.RecordBatch.from_arrays(
            [_gather(c, s, where) for c, s in zip(data.columns, starts)], schema=data.schema
        )


def _chunk_starts(column: pa.ChunkedArray) -> np.ndarray:
    return np.cumsum([0] + [len(chunk) for chunk in column.chunks])


def _gather(column: pa.ChunkedArray, starts: np.ndarray, rows: np.ndarray) -> pa.Array:
    """column[rows], a chunk at a time: Arrow's take on a chunked column first joins
    all its chunks into one copy (for the instruction texts, the largest column)."""
    if column.num_chunks == 1:
        return column.chunk(0).take(pa.array(rows))
    which = np.searchsorted(starts, rows, side="right") - 1
    by_chunk = np.argsort(which, kind="stable")
    bounds = np.searchsorted(which[by_chunk], np.arange(column.num_chunks + 1))
    parts = [
        column.chunk(c).take(pa.array(rows[by_chunk[lo:hi]] - starts[c]))
        for c, (lo, hi) in enumerate(itertools.pairwise(bounds))
        if hi > lo
    ]
    back = np.empty_like(by_chunk)
    back[by_chunk] = np.arange(len(by_chunk))
    return pa.concat_arrays(parts).take(pa.array(back))


def insert_arrow(con: duckdb.DuckDBPyConnection, table_name: str, data: pa.Table) -> None:
    """Append `data` to the table, in its stored order.

    DuckDB keeps a registered Arrow table alive until the transaction ends: the
    rows go in as a stream instead, which lets go of the table once read, so a
    batch's tables are freed one by one as they are written, not at COMMIT.
    """
    if data.num_rows == 0:
        return
    order = stored_order(table_name, data)
    reader = pa.RecordBatchReader.from_batches(
        data.schema, _batches(data, order, INSERT_BATCH_ROWS)
    )
    # By name: a column an upgrade added sits last in the stored table, wherever it is declared.
    columns = ", ".join(quote_identifier(name) for name in data.schema.names)
    del data, order
    view = f"_bh_load_{table_name}"
    con.register(view, reader)
    try:
        con.execute(
            f"INSERT INTO {quote_identifier(table_name)} ({columns})"
            f" SELECT * FROM {quote_identifier(view)}"
        )
    finally:
        # After a failed write DuckDB may refuse even this; the write's error is the one to report.
        with contextlib.suppress(duckdb.Error):
            con.unregister(view)
