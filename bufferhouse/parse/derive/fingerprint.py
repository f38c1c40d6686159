"""The assignment fingerprint: one compile recognisable whether it came as a text
dump, a `.hlo.pb` or a program inside a profile (modules.assignment_fingerprint)."""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bufferhouse.parse.derive.heap import value_rows

__all__ = ["assignment_fingerprint"]


def assignment_fingerprint(tables: dict[str, pa.Table], value_row: pa.Array | None = None) -> str:
    """A SHA-256 of the buffer assignment as both text and proto carry it, so the same
    compile seen as a dump, a proto or inside a profile has the same fingerprint.

    Covers, in a fixed order: each allocation's (index, size, color, parameter number,
    constant, thread-local, maybe-live-out) and each placement's (value id, defining
    instruction, shape index, allocation, offset, size). Not file names, metadata or
    instruction ids (a profile's HloProto renumbers them). Computed on whole columns.
    `value_row`: heap.value_rows of the tables, when the caller has it.
    """
    h = hashlib.sha256(b"bufferhouse-assignment-v1\n")
    allocs = tables["allocations"].sort_by("allocation_index")
    _hash_rows(
        h,
        allocs,
        (
            "allocation_index",
            "size",
            "color",
            "parameter_number",
            "is_constant",
            "is_thread_local",
            "is_maybe_live_out",
        ),
    )
    # Each placement with its value's instruction and shape index, in (value, allocation,
    # offset) order: looked up a slice at a time, not joined whole (a join and a sort of
    # the whole table were a 519 MB module's peak, +300 MB).
    values, asg = tables["hlo_values"], tables["assignments"]
    order = pc.sort_indices(
        asg,
        [
            ("value_id", "ascending"),
            ("allocation_index", "ascending"),
            ("byte_offset", "ascending"),
        ],
    )
    if value_row is None:
        value_row = value_rows(values, asg)
    for start in range(0, len(order), HASH_ROWS):
        rows = order.slice(start, HASH_ROWS)
        found = pc.take(value_row, rows)
        placed = {
            c: pc.take(asg[c], rows)
            for c in ("value_id", "allocation_index", "byte_offset", "size")
        }
        placed["instruction"] = pc.take(values["instruction"], found)
        placed["shape_index"] = pc.take(values["shape_index"], found)
        _hash_slice(
            h,
            pa.table(placed),
            ("value_id", "instruction", "shape_index", "allocation_index", "byte_offset", "size"),
        )
    return h.hexdigest()


#: Rows turned into text at a time: the text of all rows at once was the peak of a
#: 519 MB module's ingest (1.1 GiB); bytes hashed are the same either way.
HASH_ROWS = 1 << 17


def _hash_rows(h, table: pa.Table, columns: tuple[str, ...]) -> None:
    """Feed each row's columns as text, joined by \x1f and ended by \x1e, into `h`."""
    for start in range(0, table.num_rows, HASH_ROWS):
        _hash_slice(h, table.slice(start, HASH_ROWS), columns)


def _hash_slice(h, table: pa.Table, columns: tuple[str, ...]) -> None:
    texts = [pc.fill_null(pc.cast(table[c], pa.string()), "\x00") for c in columns]
    rows = pc.binary_join_element_wise(*texts, "", "\x1f")  # trailing "" ends each row
    if isinstance(rows, pa.ChunkedArray):
        rows = rows.combine_chunks()
    offsets = np.frombuffer(rows.buffers()[1], dtype=np.int32)
    first, last = offsets[rows.offset], offsets[rows.offset + len(rows)]
    h.update(memoryview(rows.buffers()[2])[first:last])
