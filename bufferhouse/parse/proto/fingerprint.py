"""The assignment fingerprint: one compile recognisable whether it came as a text
dump, a `.hlo.pb` or a program inside a profile (modules.assignment_fingerprint)."""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["assignment_fingerprint"]


def assignment_fingerprint(tables: dict[str, pa.Table]) -> str:
    """A SHA-256 of the buffer assignment as both text and proto carry it, so the same
    compile seen as a dump, a proto or inside a profile has the same fingerprint.

    Covers, in a fixed order: each allocation's (index, size, color, parameter number,
    constant, thread-local, maybe-live-out) and each placement's (value id, defining
    instruction, shape index, allocation, offset, size). Not file names, metadata or
    instruction ids (a profile's HloProto renumbers them). Computed on whole columns.
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
    values = tables["hlo_values"].select(["value_id", "instruction", "shape_index"])
    asg = tables["assignments"].select(["value_id", "allocation_index", "byte_offset", "size"])
    asg = asg.join(values, "value_id", join_type="left outer").sort_by(
        [("value_id", "ascending"), ("allocation_index", "ascending"), ("byte_offset", "ascending")]
    )
    _hash_rows(
        h,
        asg,
        ("value_id", "instruction", "shape_index", "allocation_index", "byte_offset", "size"),
    )
    return h.hexdigest()


def _hash_rows(h, table: pa.Table, columns: tuple[str, ...]) -> None:
    """Feed each row's columns as text, joined by \x1f and ended by \x1e, into `h`."""
    if table.num_rows == 0:
        return
    texts = [pc.fill_null(pc.cast(table[c], pa.string()), "\x00") for c in columns]
    rows = pc.binary_join_element_wise(*texts, "", "\x1f")  # trailing "" ends each row
    if isinstance(rows, pa.ChunkedArray):
        rows = rows.combine_chunks()
    offsets = np.frombuffer(rows.buffers()[1], dtype=np.int32)
    first, last = offsets[rows.offset], offsets[rows.offset + len(rows)]
    h.update(memoryview(rows.buffers()[2])[first:last])
