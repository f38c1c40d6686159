"""The heap-simulator trace: heap_events rows with the bytes in use after each event,
and XLA's own peak (ComputePeakMemorySizes) from the buffer assignment and its traces."""

from __future__ import annotations

import pyarrow as pa

from bufferhouse.errors import ParseError
from bufferhouse.parse.proto.tables import module_table

__all__ = ["heap_events_table", "xla_peak", "xla_peaks"]

_KINDS = ("ALLOC", "FREE", "SHARE_WITH")


def heap_events_table(ba, lb_index, alloc_color, where: str) -> tuple[pa.Table, int]:
    """heap_events rows: every event of every trace, with the bytes in use in the trace's
    heap after it (XLA's reference counting: a shared buffer's bytes count once)."""
    lbs = ba.logical_buffers
    cols: dict[str, list] = {
        k: []
        for k in (
            "trace_index",
            "event_index",
            "kind",
            "value_id",
            "instruction",
            "computation",
            "share_with",
            "color",
            "allocation_index",
            "size",
            "heap_bytes",
        )
    }
    n_events = 0
    for t, trace in enumerate(ba.heap_simulator_traces):
        events = trace.events
        if not events:
            continue
        for k, ev in enumerate(events):
            if ev.buffer_id not in lb_index:
                raise ParseError(
                    where,
                    0,
                    f"buffer_assignment.heap_simulator_traces[{t}].events[{k}]: buffer "
                    f"{ev.buffer_id} is not in logical_buffers",
                )
            if ev.kind == 2 and ev.share_with_canonical_id not in lb_index:
                raise ParseError(
                    where,
                    0,
                    f"buffer_assignment.heap_simulator_traces[{t}].events[{k}]: "
                    f"share_with_canonical_id {ev.share_with_canonical_id} is not in logical_buffers",
                )
        kinds = [ev.kind for ev in events]
        ids = [ev.buffer_id for ev in events]
        index = trace.buffer_allocation_index
        color = (
            alloc_color.get(index)
            if index in alloc_color and index != 0
            else lbs[lb_index[ids[0]]].color
        )
        sizes = [lbs[lb_index[b]].size for b in ids]
        cols["trace_index"].extend([t] * len(events))
        cols["event_index"].extend(range(len(events)))
        cols["kind"].extend(_KINDS[k] if 0 <= k < 3 else f"KIND_{k}" for k in kinds)
        cols["value_id"].extend(ids)
        cols["instruction"].extend(ev.instruction_name or None for ev in events)
        cols["computation"].extend(ev.computation_name or None for ev in events)
        cols["share_with"].extend(
            ev.share_with_canonical_id if ev.kind == 2 else None for ev in events
        )
        cols["color"].extend([color] * len(events))
        cols["allocation_index"].extend([index] * len(events))
        cols["size"].extend(sizes)
        cols["heap_bytes"].extend(
            _replay(
                kinds,
                ids,
                [ev.share_with_canonical_id for ev in events],
                {b: lbs[lb_index[b]].size for b in set(ids)},
                where,
                t,
            )
        )
        n_events += len(events)
    return module_table("heap_events", cols), n_events


def _replay(kinds, ids, shares, size, where, t) -> list[int]:
    """Bytes in use after each event of one trace, counted as XLA counts them."""
    ref: dict[int, int] = {}
    under: dict[int, int] = {}
    mem = 0
    out = []
    for k, (kind, b, share) in enumerate(zip(kinds, ids, shares)):
        if kind == 0:
            ref[b] = ref.get(b, 0) + 1
            if ref[b] == 1:
                mem += size[b]
        elif kind == 1:
            root = b
            while root in under:
                root = under[root]
            under.pop(b, None)
            ref[root] = ref.get(root, 0) - 1
            if ref[root] < 0:
                raise ParseError(
                    where,
                    0,
                    f"buffer_assignment.heap_simulator_traces[{t}].events[{k}]: "
                    f"buffer {root} is freed more often than allocated",
                )
            if ref[root] == 0:
                mem -= size[root]
        elif kind == 2:
            root = share
            while root in under:
                root = under[root]
            under[b] = root
            ref[root] = ref.get(root, 0) + 1
            if ref[root] == 1:
                mem += size.get(root, 0)
        out.append(mem)
    return out


def xla_peak(ba, *, with_traces: bool) -> int:
    """XLA's peak without or with the traces (see xla_peaks)."""
    return xla_peaks(ba)[1 if with_traces else 0]


def xla_peaks(ba) -> tuple[int, int]:
    """XLA's ComputePeakMemorySizes (xla/service/buffer_assignment.cc), padded bytes.

    The static part: for each parameter, constant or maybe-live-out allocation that is
    not thread-local, its largest logical buffer (held once, by reference count).
    Then every trace's events in order, ALLOC / SHARE_WITH adding a buffer's bytes
    when its count rises to 1 and FREE taking them off when it falls to 0 (shared
    buffers resolve to their canonical root); the peak is the most at any point.
    Returns (static part alone, with the traces): the first is the figure PjRt's CPU
    client reports as `peak_memory_in_bytes`, its executable's BufferAssignmentProto
    carrying no traces.
    """
    size = {lb.id: lb.size for lb in ba.logical_buffers}
    ref: dict[int, int] = dict.fromkeys(size, 0)
    mem = 0
    for alloc in ba.buffer_allocations:
        if alloc.is_thread_local or not (
            alloc.is_entry_computation_parameter or alloc.is_constant or alloc.maybe_live_out
        ):
            continue
        best, best_size = None, 0
        for asg in alloc.assigned:
            s = size.get(asg.logical_buffer_id)
            if s is not None and s > best_size:
                best, best_size = asg.logical_buffer_id, s
        if best is not None:
            ref[best] += 1
            mem += best_size
    static = peak = mem
    under: dict[int, int] = {}
    for trace in ba.heap_simulator_traces:
        for ev in trace.events:
            b = ev.buffer_id
            if ev.kind == 0:
                ref[b] = ref.get(b, 0) + 1
                if ref[b] == 1:
                    mem += size.get(b, 0)
            elif ev.kind == 1:
                root = b
                while root in under:
                    root = under[root]
                under.pop(b, None)
                ref[root] = ref.get(root, 0) - 1
                if ref[root] == 0:
                    mem -= size.get(root, 0)
            elif ev.kind == 2:
                root = ev.share_with_canonical_id
                while root in under:
                    root = under[root]
                under[b] = root
                ref[root] = ref.get(root, 0) + 1
                if ref[root] == 1:
                    mem += size.get(root, 0)
            peak = max(peak, mem)
    return static, peak
