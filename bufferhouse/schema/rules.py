"""Rules over the warehouse's own columns that more than one stage applies: the parse
stage when it derives a module's figures, and the in-place upgrade of an older
warehouse when it fills a column from the rows it holds. Declared once, here."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["static_buffers"]


def static_buffers(allocations: pa.Table, assignments: pa.Table) -> pa.Table:
    """(value_id, size) of the value XLA holds for each static allocation of one module
    (AllocateStaticBuffers in xla/service/buffer_assignment.cc): the largest (lowest
    value_id on a tie) of each non-thread-local parameter, constant or maybe-live-out
    allocation. Its sizes add up to XLA's peak on CPU (docs/metrics.md)."""
    static = pc.and_(
        pc.invert(allocations["is_thread_local"]),
        pc.or_(
            pc.or_(allocations["is_parameter"], allocations["is_constant"]),
            allocations["is_maybe_live_out"],
        ),
    )
    wanted = allocations["allocation_index"].filter(static)
    placed = assignments.filter(pc.is_in(assignments["allocation_index"], value_set=wanted))
    empty = pa.table({"value_id": pa.array([], pa.int64()), "size": pa.array([], pa.int64())})
    if placed.num_rows == 0:
        return empty
    order = [("allocation_index", "ascending"), ("size", "descending"), ("value_id", "ascending")]
    placed = placed.sort_by(order)
    index = placed["allocation_index"].to_numpy()
    first = np.flatnonzero(np.r_[True, index[1:] != index[:-1]])  # a Python loop: 0.04 CPU-s
    return placed.select(["value_id", "size"]).take(pa.array(first, pa.int64()))
