"""The live-range sweep: per memory space, the most temp bytes in use at once.

Bytes in use at step t (docs/metrics.md, heap_peak_bytes) = the union of the
byte ranges of the temp values whose live range covers t, aliased bytes counted
once, computed in numpy over whole columns: a large module has hundreds of
thousands of allocations, so nothing here loops per value.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


@dataclass(frozen=True)
class SpaceSweep:
    """One memory space's most temp bytes in use at once, and the first step reaching it."""

    temp_peak_bytes: int
    peak_time: int | None


def sweep(
    allocations: pa.Table,
    is_temp: np.ndarray,
    assignments: pa.Table,
    is_tuple: pa.ChunkedArray | pa.Array,
    live_ranges: pa.Table,
    schedule_length: int | None,
) -> tuple[dict[int, SpaceSweep], pa.Array]:
    """Per color: the most temp bytes in use at once; and each allocation's own most
    (null unless temp), row for row with `allocations`.

    Bytes in use in a temp allocation at step t = the measure of the union of the
    byte ranges [offset, offset+size) of its values live at t (both ends
    inclusive). Aliases share a range and are counted once; values whose ranges
    the heap simulator overlapped only touch in time and are also counted once.
    Tuple-shaped values (pointer tables, `is_tuple`, row for row with
    `assignments`) are left out: XLA gives each its own allocation, never
    heap-simulated, and only merges it into the temp allocation afterwards
    (CombineTempAllocations), so the heap-simulator trace never allocates them.
    A value's live range is its last `live_ranges` entry; a temp value without one
    counts as live throughout.
    """
    index = allocations["allocation_index"].to_numpy()
    color = allocations["color"].to_numpy()
    temp_index = pa.array(index[is_temp])
    keep = pc.and_(
        pc.and_(
            pc.is_in(assignments["allocation_index"], value_set=temp_index),
            pc.not_equal(assignments["size"], 0),
        ),
        pc.invert(pc.fill_null(is_tuple, False)),
    )
    temp_values = assignments.filter(keep)
    starts, ends = _ranges(temp_values["value_id"], live_ranges, schedule_length)
    offset = temp_values["byte_offset"].to_numpy()
    time, alloc, delta = _in_use_events(
        temp_values["allocation_index"].to_numpy(),
        offset,
        offset + temp_values["size"].to_numpy(),
        starts,
        ends,
    )
    del temp_values, offset, starts, ends
    spaces = {}
    for c in np.unique(color[is_temp]).tolist():
        best, best_t = _peak(
            *(a[np.isin(alloc, index[(color == c) & is_temp])] for a in (time, delta))
        )
        spaces[c] = SpaceSweep(best, best_t)
    # Each temp allocation's most bytes in use: 0 when none of its values is ever live.
    most = np.zeros(len(index), dtype=np.int64)
    with_events, their_most = _max_per_alloc(time, alloc, delta)
    by_index = np.argsort(index, kind="stable")
    most[by_index[np.searchsorted(index, with_events, sorter=by_index)]] = their_most
    return spaces, pa.array(most, pa.int64(), mask=~is_temp)


def _ranges(
    value_ids: pa.ChunkedArray, live_ranges: pa.Table, schedule_length: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of each value: its last live_ranges entry; 0..end of program without one."""
    ids = live_ranges["value_id"]
    last = _last_rows(
        ids.to_numpy(zero_copy_only=False)
        if ids.null_count == 0
        else pc.fill_null(ids, -1).to_numpy()
    )
    # The distinct ids ascend: binary search, not index_in (0.08 CPU-s on 372k values).
    keys, ids_of = last[0], pc.fill_null(value_ids, -1).to_numpy()  # -1 is never a key
    at = np.minimum(np.searchsorted(keys, ids_of), max(len(keys) - 1, 0))
    found = keys[at] == ids_of if len(keys) else np.zeros(len(ids_of), dtype=bool)
    rows = last[1][at] if len(keys) else np.zeros(len(ids_of), dtype=np.int64)
    start = (
        live_ranges["start_time"].to_numpy()
        if live_ranges.num_rows
        else np.zeros(1, dtype=np.int64)
    )
    end = (
        live_ranges["end_time"].to_numpy() if live_ranges.num_rows else np.zeros(1, dtype=np.int64)
    )
    end_of_time = schedule_length if schedule_length is not None else 0
    return np.where(found, start[rows], 0), np.where(found, end[rows], end_of_time)


def _last_rows(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ids (but -1) and the row of each one's last occurrence."""
    if not len(ids):
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    reverse = ids[::-1]
    distinct, first_in_reverse = np.unique(reverse, return_index=True)
    rows = len(ids) - 1 - first_in_reverse
    keep = distinct != -1
    return distinct[keep], rows[keep]


def value_rows(values: pa.Table, assignments: pa.Table) -> pa.Array:
    """Each assignment's row in `values` (one row per value id), null where none: by binary
    search where the ids ascend, as a text reading's do (index_in: 63 ms cold on 372k
    values, 19 ms this way; derive wants it twice)."""
    ids = values["value_id"].to_numpy()
    if len(ids) and values["value_id"].null_count == 0 and np.all(ids[1:] > ids[:-1]):
        wanted = assignments["value_id"]
        if wanted.null_count == 0:
            want = wanted.to_numpy()
            at = np.minimum(np.searchsorted(ids, want), len(ids) - 1)
            return pa.array(at.astype(np.int32), mask=ids[at] != want)
    where = pc.index_in(assignments["value_id"], value_set=values["value_id"])
    return where.combine_chunks() if isinstance(where, pa.ChunkedArray) else where


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
