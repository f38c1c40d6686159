"""The heap sweep: per memory space, the most bytes in use at once.

`heap_peak_bytes` (docs/metrics: indefinite allocations plus the most temp
bytes live at once, aliased bytes counted once) is computed here from the
scanned allocations, values and live ranges, in numpy: a large module has
hundreds of thousands of allocations, so nothing here loops per value.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bufferhouse.parse.model import Scanned


def temp_allocations(allocs: pa.Table) -> pa.Array:
    """Allocations that hold temporaries: not parameter, output, thread-local or constant."""
    return pc.invert(
        pc.or_(
            pc.or_(pc.is_valid(allocs["parameter_number"]), allocs["maybe_live_out"]),
            pc.or_(allocs["thread_local"], allocs["constant"]),
        )
    )


def is_tuple_shape(shape: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Values whose printed shape is a tuple, `(...)`: their buffer is a table of pointers."""
    return pc.fill_null(pc.starts_with(shape, "("), False)


def xla_static_peak(allocs: pa.Table, values: pa.Table) -> int:
    """XLA's peak_memory_in_bytes before any heap-simulator event: the static buffers.

    ComputePeakMemoryImpl (xla/service/buffer_assignment.cc) starts from
    AllocateStaticBuffers: for every allocation that is a parameter, constant or
    maybe-live-out and not thread-local, the size of its largest value (not
    the allocation's size), over every memory space; then it replays the
    buffer assignment's heap-simulator traces. The buffer assignment a CPU
    executable reports to memory_analysis() carries no traces, so on CPU this
    sum is the whole figure (docs/metrics.md, "xla_peak_bytes").
    """
    static = pc.and_(
        pc.invert(allocs["thread_local"]),
        pc.or_(
            pc.or_(pc.is_valid(allocs["parameter_number"]), allocs["constant"]),
            allocs["maybe_live_out"],
        ),
    )
    placed = values.filter(pc.is_in(values["allocation"], value_set=allocs["index"].filter(static)))
    largest = placed.group_by("allocation").aggregate([("size", "max")])["size_max"]
    return sum_exact(largest.to_numpy()) if len(largest) else 0


def heap_peaks(
    s: Scanned, temp: pa.Array, live_last: pa.Table, live_vid: pa.Array | pa.ChunkedArray
) -> tuple[list[tuple], pa.Array]:
    """Per color: indefinite bytes + max temp bytes in use at once.

    Bytes in use in a temp allocation at step t = the measure of the union of
    the byte ranges [offset, offset+size) of its values live at t (both ends
    inclusive). Aliases share a range and are counted once; values whose
    ranges the heap simulator overlapped only touch in time and are also
    counted once. Tuple-shaped values (pointer tables) are left out: XLA gives
    each its own allocation, never heap-simulated, and only merges it into the
    temp allocation afterwards (CombineTempAllocations), so the heap-simulator
    trace never allocates them (docs/metrics.md, "heap_peak_bytes").
    `live_vid` is the value each entry of `live_last` names.
    Also returns each allocation's own maximum (null unless temp), row for
    row with s.allocs. Numbers stay in numpy arrays: a large module has
    hundreds of thousands of allocations.
    """
    has_live = s.live.num_rows > 0 or (s.schedule_length is not None)
    index = s.allocs["index"].to_numpy()
    color = s.allocs["color"].to_numpy()
    size = s.allocs["size"].to_numpy()
    is_temp = temp.to_numpy(zero_copy_only=False)
    values = s.values.select(["value_id", "allocation", "byte_offset", "size", "shape"])
    temp_values = values.filter(
        pc.and_(
            pc.and_(
                pc.is_in(values["allocation"], value_set=pa.array(index[is_temp])),
                pc.not_equal(values["size"], 0),
            ),
            pc.invert(is_tuple_shape(values["shape"])),
        )
    )
    del values
    # value -> (start, end): each live entry resolved to its value; the last entry wins.
    where = pc.index_in(temp_values["value_id"], value_set=live_vid).to_numpy(zero_copy_only=False)
    end_of_time = s.schedule_length if s.schedule_length is not None else 0
    found = ~np.isnan(where) if where.dtype.kind == "f" else np.ones(len(where), dtype=bool)
    rows_at = np.where(found, np.nan_to_num(where), 0).astype(np.int64)
    starts = np.where(
        found, live_last["start_time"].to_numpy()[rows_at] if len(live_last) else 0, 0
    )
    ends = np.where(
        found, live_last["end_time"].to_numpy()[rows_at] if len(live_last) else 0, end_of_time
    )
    del where, found, rows_at
    offset = temp_values["byte_offset"].to_numpy()
    time, alloc, delta = _in_use_events(
        temp_values["allocation"].to_numpy(),
        offset,
        offset + temp_values["size"].to_numpy(),
        starts,
        ends,
    )
    del temp_values, offset, starts, ends
    rows = []
    for c in np.unique(color).tolist():
        mine = color == c
        total, indefinite = sum_exact(size[mine]), sum_exact(size[mine & ~is_temp])
        temps = index[mine & is_temp]
        if not has_live and len(temps):
            rows.append((c, total, indefinite, total - indefinite, None, None, None))
            continue
        best, best_t = _peak(*(a[np.isin(alloc, temps)] for a in (time, delta)))
        rows.append((c, total, indefinite, total - indefinite, best, indefinite + best, best_t))
    # Each temp allocation's most bytes in use: 0 when none of its values is ever live.
    most = np.zeros(len(index), dtype=np.int64)
    with_events, their_most = _max_per_alloc(time, alloc, delta)
    by_index = np.argsort(index, kind="stable")
    most[by_index[np.searchsorted(index, with_events, sorter=by_index)]] = their_most
    return rows, pa.array(most, pa.int64(), mask=~(is_temp & has_live))


def sum_exact(numbers: np.ndarray) -> int:
    """The exact sum, as Python's: past int64 too."""
    if len(numbers) and int(numbers.max()) >= np.iinfo(np.int64).max // len(numbers):
        return sum(numbers.tolist())
    return int(numbers.sum())


def _in_use_events(
    alloc: np.ndarray, lo: np.ndarray, hi: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(time, allocation, +/-bytes) at which bytes of each allocation come into and out of use.

    Bytes in use = the union of the byte ranges [lo, hi) of values live then
    (steps start..end, inclusive). Each allocation's range boundaries cut it
    into segments; a segment is in use while any value covering it is live, so
    overlapping live times on one segment merge and aliases count once.
    """
    n = len(alloc)
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    # Intermediates are dropped as soon as used: a large module has ~10^6 values.
    point_alloc, point_x = np.r_[alloc, alloc], np.r_[lo, hi]
    order = np.lexsort((point_x, point_alloc))
    sorted_alloc, sorted_x = point_alloc[order], point_x[order]
    del point_alloc, point_x
    distinct = np.r_[
        True, (sorted_alloc[1:] != sorted_alloc[:-1]) | (sorted_x[1:] != sorted_x[:-1])
    ]
    inverse = np.empty(2 * n, dtype=np.int64)
    inverse[order] = np.cumsum(distinct) - 1  # each boundary's rank among distinct ones
    del order
    first, stop = inverse[:n], inverse[n:]  # segments first..stop-1 of each value
    seg_alloc = sorted_alloc[distinct]
    seg_len = np.r_[np.diff(sorted_x[distinct]), 0]
    del sorted_alloc, sorted_x, distinct
    counts = stop - first
    pair_seg = np.repeat(first, counts) + (
        np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    )
    pair_start = np.repeat(start, counts)
    pair_end = np.repeat(end, counts)
    del inverse, first, stop, counts
    order = np.lexsort((pair_start, pair_seg))
    pair_seg, pair_start, pair_end = pair_seg[order], pair_start[order], pair_end[order]
    del order
    # Merge the live times of one segment: a new run starts past everything before it.
    span = int(max(pair_end.max(), pair_start.max())) + 2
    base = pair_seg * span
    reach = np.maximum.accumulate(base + pair_end)
    before = np.r_[-1, reach[:-1]] - base  # negative when the segment changes
    del base, reach
    run_starts = np.flatnonzero(before < pair_start)
    del before
    run_end = np.maximum.reduceat(pair_end, run_starts)
    run_seg = pair_seg[run_starts]
    length = seg_len[run_seg]
    time = np.r_[pair_start[run_starts], run_end + 1]
    return time, np.r_[seg_alloc[run_seg], seg_alloc[run_seg]], np.r_[length, -length]


def _peak(time: np.ndarray, delta: np.ndarray) -> tuple[int, int | None]:
    """Most bytes in use at once and the first step at which that is reached (0 when never)."""
    if len(time) == 0:
        return 0, None
    order = np.argsort(time, kind="stable")
    time, delta = time[order], delta[order]
    steps, at = np.unique(time, return_index=True)
    current = np.cumsum(np.add.reduceat(delta, at))
    best = int(current.max())
    if best <= 0:
        return 0, 0
    return best, int(steps[np.argmax(current == best)])


def _max_per_alloc(
    time: np.ndarray, alloc: np.ndarray, delta: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The allocations that have events, and each one's most bytes in use at once (at
    least 0; its events net to zero, so one running sum serves all)."""
    if len(time) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.lexsort((time, alloc))
    time, alloc, delta = time[order], alloc[order], delta[order]
    key_change = np.r_[True, (alloc[1:] != alloc[:-1]) | (time[1:] != time[:-1])]
    at = np.flatnonzero(key_change)
    current = np.cumsum(np.add.reduceat(delta, at))
    group_alloc = alloc[at]
    first = np.flatnonzero(np.r_[True, group_alloc[1:] != group_alloc[:-1]])
    most = np.maximum.reduceat(current, first)
    return group_alloc[first], np.maximum(most, 0)
