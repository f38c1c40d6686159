"""XLA's own peak, ComputePeakMemorySizes (xla/service/buffer_assignment.cc): the one
home of its static rule, for every form a module arrives in.

The static part (AllocateStaticBuffers): for each parameter, constant or
maybe-live-out allocation that is not thread-local, its largest value (not the
allocation's size), held once. Then every heap-simulator trace is replayed in
order on one reference-counted heap; the peak is the most at any point.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from bufferhouse.parse.heapsim import ALLOC, RefCountedHeap

__all__ = ["XlaPeaks", "static_buffers", "xla_peaks"]

_KIND = {"ALLOC": 0, "FREE": 1, "SHARE_WITH": 2}


@dataclass(frozen=True)
class XlaPeaks:
    """The static part alone (what PjRt's CPU executable reports, its buffer assignment
    keeping no traces), and with the traces replayed (None without a trace)."""

    static_bytes: int
    with_traces: int | None


def static_buffers(allocations: pa.Table, assignments: pa.Table) -> pa.Table:
    """(value_id, size) of the value XLA holds for each static allocation: the largest
    (lowest value_id on a tie) of each non-thread-local parameter, constant or
    maybe-live-out allocation."""
    static = pc.and_(
        pc.invert(allocations["is_thread_local"]),
        pc.or_(
            pc.or_(allocations["is_parameter"], allocations["is_constant"]),
            allocations["is_maybe_live_out"],
        ),
    )
    wanted = allocations["allocation_index"].filter(static)
    placed = assignments.filter(pc.is_in(assignments["allocation_index"], value_set=wanted))
    if placed.num_rows == 0:
        return pa.table({"value_id": pa.array([], pa.int64()), "size": pa.array([], pa.int64())})
    placed = placed.sort_by(
        [("allocation_index", "ascending"), ("size", "descending"), ("value_id", "ascending")]
    )
    index = placed["allocation_index"].to_numpy()
    first = [0] + [i for i in range(1, len(index)) if index[i] != index[i - 1]]
    return placed.select(["value_id", "size"]).take(pa.array(first, pa.int64()))


def xla_peaks(allocations: pa.Table, assignments: pa.Table, heap_events: pa.Table) -> XlaPeaks:
    """ComputePeakMemorySizes over a module's tables: the static buffers, then the traces."""
    held = static_buffers(allocations, assignments)
    sizes = dict(zip(held["value_id"].to_pylist(), held["size"].to_pylist()))
    if heap_events.num_rows:
        events = heap_events.sort_by([("trace_index", "ascending"), ("event_index", "ascending")])
        ids = events["value_id"].to_pylist()
        for b, size in zip(ids, events["size"].to_pylist()):
            sizes.setdefault(b, size)
    heap = RefCountedHeap(sizes)
    for b in held["value_id"].to_pylist():
        heap.apply(ALLOC, b, 0)
    static = peak = heap.mem
    if not heap_events.num_rows:
        return XlaPeaks(static, None)
    kinds = [_KIND.get(k, -1) for k in events["kind"].to_pylist()]
    shares = events["share_with"].to_pylist()
    for kind, b, share in zip(kinds, ids, shares):
        heap.apply(kind, b, share if share is not None else 0)
        peak = max(peak, heap.mem)
    return XlaPeaks(static, peak)
