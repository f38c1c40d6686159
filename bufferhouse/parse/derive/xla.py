"""XLA's own peak, ComputePeakMemorySizes (xla/service/buffer_assignment.cc), for every
form a module arrives in.

The static part (AllocateStaticBuffers, schema/rules.py): for each parameter,
constant or maybe-live-out allocation that is not thread-local, its largest value
(not the allocation's size), held once. Then every heap-simulator trace is replayed
in order on one reference-counted heap; the peak is the most at any point.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from bufferhouse.parse.heapsim import ALLOC, RefCountedHeap
from bufferhouse.schema.rules import static_buffers

__all__ = ["XlaPeaks", "xla_peaks"]

_KIND = {"ALLOC": 0, "FREE": 1, "SHARE_WITH": 2}


@dataclass(frozen=True)
class XlaPeaks:
    """The static part alone (what PjRt's CPU executable reports, its buffer assignment
    keeping no traces), and with the traces replayed (None without a trace)."""

    static_bytes: int
    with_traces: int | None


def xla_peaks(allocations: pa.Table, assignments: pa.Table, heap_events: pa.Table) -> XlaPeaks:
    """ComputePeakMemorySizes over a module's tables: the static buffers, then the traces."""
    held = static_buffers(allocations, assignments)
    sizes = dict(zip(held["value_id"].to_pylist(), held["size"].to_pylist()))
    if heap_events.num_rows:
        events = heap_events.sort_by([("trace_index", "ascending"), ("event_index", "ascending")])
        ids = events["value_id"].to_pylist()
        for b, size in zip(ids, events["size"].to_pylist()):
            sizes.setdefault(b, size)
    heap = RefCountedHeap(sizes, heap_events.num_rows + held.num_rows)
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
