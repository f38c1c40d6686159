"""The heap-simulator trace: heap_events rows with the bytes in use after each event."""

from __future__ import annotations

import pyarrow as pa

from bufferhouse.errors import ParseError
from bufferhouse.parse.heapsim import BadShare, RefCountedHeap
from bufferhouse.parse.proto.tables import module_table

__all__ = ["heap_events_table"]

_KINDS = ("ALLOC", "FREE", "SHARE_WITH")


def heap_events_table(ba, lb_index, placed: dict, where: str) -> tuple[pa.Table, int]:
    """heap_events rows: every event of every trace, with the bytes in use in the trace's
    heap after it (XLA's reference counting: a shared buffer's bytes count once).

    `placed`: buffer id -> (allocation index, byte offset, allocation color). A trace's
    memory space is the color of the allocation its buffers are placed in, else of its
    buffers: never found through its buffer_allocation_index, which is the allocation's
    index before CombineTempAllocations renumbered them (parse/proto/invariants.py).
    """
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
        first = placed.get(ids[0])
        color = first[2] if first else lbs[lb_index[ids[0]]].color
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
                {b: placed[b][:2] for b in set(ids) if b in placed},
                where,
                t,
            )
        )
        n_events += len(events)
    return module_table("heap_events", cols), n_events


def _replay(kinds, ids, shares, size, slot, where, t) -> list[int]:
    """Bytes in use after each event of one trace, counted as XLA counts them, with one
    addition: an ALLOC of a buffer placed at the (allocation, offset) of a buffer still
    held shares that one's bytes. Memory-space assignment's trace of its alternate
    memory (TPU VMEM, AssignPresetBuffers) writes no SHARE_WITH for the aliases of a
    while loop's state, and XLA's own replay counts them twice (a VMEM peak of 7.1 MiB
    in a 4.6 MiB allocation); XLA's heap simulator writes SHARE_WITH for every buffer it
    places on a live one, so its traces replay as before."""
    heap = RefCountedHeap(size, len(kinds))
    holder: dict[tuple[int, int], int] = {}  # slot -> the buffer whose bytes are there
    out = []
    for k, (kind, b, share) in enumerate(zip(kinds, ids, shares)):
        if kind == 0 and b in slot:
            at = slot[b]
            held = holder.get(at)
            if held is not None and held != b and heap.ref.get(heap.root(held), 0) > 0:
                kind, share = 2, held
            else:
                holder[at] = b
        try:
            root = heap.root(b) if kind == 1 else b  # before the FREE unlinks it
            left = heap.apply(kind, b, share)
        except BadShare as exc:
            raise ParseError(
                where, 0, f"buffer_assignment.heap_simulator_traces[{t}].events[{k}]: {exc}"
            ) from None
        if left < 0:
            raise ParseError(
                where,
                0,
                f"buffer_assignment.heap_simulator_traces[{t}].events[{k}]: "
                f"buffer {root} is freed more often than allocated",
            )
        out.append(heap.mem)
    return out
