"""XLA's own peak, ComputePeakMemorySizes (xla/service/buffer_assignment.cc), for every
form a module arrives in.

The static part (AllocateStaticBuffers, schema/rules.py): for each parameter,
constant or maybe-live-out allocation that is not thread-local, its largest value
(not the allocation's size), held once. Then every heap-simulator trace is replayed
in order on one reference-counted heap; the peak is the most at any point.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from bufferhouse.parse.heapsim import ALLOC, RefCountedHeap
from bufferhouse.schema.rules import static_buffers

__all__ = ["TPU_TEMP_STEP", "XlaPeaks", "tpu_temp_bytes", "xla_peaks"]

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


#: libtpu counts the HBM temp allocation in steps of 16 KiB: the alignment
#: CombineTempAllocations puts between the parts it joins into the TPU temp
#: allocation (every part of every fixture starts at a multiple of 16 KiB), and the
#: `HLO temp` figure libtpu's log prints under `Program hbm requirement`.
TPU_TEMP_STEP = 16 * 1024


def tpu_temp_bytes(
    allocations: pa.Table,
    is_temp: np.ndarray,
    assignments: pa.Table,
    is_tuple: np.ndarray,
    is_scalar: np.ndarray,
    temp_peak: int | None,
) -> int | None:
    """memory_analysis().temp_size_in_bytes of a TPU compile (docs/metrics.md, TPU temp):
    HBM's `HLO temp` plus its fragmentation, as libtpu reports them.

    Over memory space 0's temp allocations: R = their sizes rounded up to 16 KiB,
    P = the most temp bytes in use at once (`temp_peak`, the heap-simulated values)
    + the bytes of the tuple-shaped values in them (pointer tables, never
    heap-simulated, held throughout); the figure is R + (R - P). 0 when no value
    there is heap-simulated (tuples only: libtpu prints no HBM temp). None when every
    heap-simulated value is a scalar: libtpu counts some such compiles by the rule and
    gives 0 for others (while loops' counters), for a reason not found; and None
    without `temp_peak`. `is_tuple`, `is_scalar`: row for row with `assignments`.
    """
    index = allocations["allocation_index"].to_numpy()
    color = allocations["color"].to_numpy()
    size = allocations["size"].to_numpy()
    candidates = set(index[is_temp & (color == 0)].tolist())
    a_alloc = assignments["allocation_index"].to_numpy().tolist()
    a_offset = assignments["byte_offset"].to_numpy().tolist()
    a_size = assignments["size"].to_numpy().tolist()
    heap = [
        (a, scalar)
        for a, s, tup, scalar in zip(a_alloc, a_size, is_tuple.tolist(), is_scalar.tolist())
        if a in candidates and s and not tup
    ]
    if not heap:
        return 0
    if all(scalar for _, scalar in heap) or temp_peak is None:
        return None
    counted = {a for a, _ in heap}
    rounded = sum(
        -(-int(s) // TPU_TEMP_STEP) * TPU_TEMP_STEP
        for i, s in zip(index.tolist(), size.tolist())
        if i in counted
    )
    tuples = {
        (a, off, s)
        for a, off, s, tup in zip(a_alloc, a_offset, a_size, is_tuple.tolist())
        if a in counted and tup and s
    }
    padded = temp_peak + sum(s for _, _, s in tuples)
    return 2 * rounded - padded
