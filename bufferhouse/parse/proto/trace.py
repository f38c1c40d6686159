"""The heap-simulator trace: heap_events rows with the bytes in use after each event,
and XLA's own peak (ComputePeakMemorySizes) from the buffer assignment and its traces."""

from __future__ import annotations

import pyarrow as pa

from bufferhouse.errors import ParseError
from bufferhouse.parse.proto.tables import module_table

__all__ = ["BadShare", "heap_events_table", "xla_peak", "xla_peaks"]

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


class BadShare(ValueError):
    """SHARE_WITH links no XLA trace makes: a cycle (the replay would loop forever), or
    chains so deep that following them costs more than the trace's length allows."""


#: Root lookups may take this many steps per event in all: XLA shares with a canonical
#: buffer, so its chains are one or two links long.
STEPS_PER_EVENT = 64


class _Heap:
    """XLA's reference-counted heap: a buffer's bytes count while any holder has it,
    and SHARE_WITH makes a buffer one more holder of its canonical root."""

    def __init__(self, size: dict[int, int], events: int) -> None:
        self.size = size
        self.ref: dict[int, int] = {}
        self.under: dict[int, int] = {}
        self.mem = 0
        self.steps = STEPS_PER_EVENT * events + 1024  # a bound on time, by the input

    def root(self, b: int) -> int:
        """The canonical buffer whose bytes `b` stands for."""
        while b in self.under:
            b = self.under[b]
            self.steps -= 1
            if self.steps < 0:
                raise BadShare(
                    f"SHARE_WITH chains longer than {STEPS_PER_EVENT} links per event "
                    "(expected SHARE_WITH to name a canonical buffer, as XLA's do)"
                )
        return b

    def _hold(self, b: int) -> None:
        self.ref[b] = self.ref.get(b, 0) + 1
        if self.ref[b] == 1:
            self.mem += self.size.get(b, 0)

    def apply(self, kind: int, b: int, share: int) -> int:
        """One event (0 ALLOC, 1 FREE, 2 SHARE_WITH); returns the holders left of a
        freed buffer's root (negative: freed more often than allocated), else 1."""
        if kind == 0:
            self._hold(b)
        elif kind == 1:
            root = self.root(b)
            self.under.pop(b, None)
            left = self.ref[root] = self.ref.get(root, 0) - 1
            if left == 0:
                self.mem -= self.size.get(root, 0)
            return left
        elif kind == 2:
            root = self.root(share)
            if root == b:  # b would stand for itself: every later root lookup would loop
                raise BadShare(
                    f"SHARE_WITH of buffer {b} with {share}, whose canonical buffer is {b} "
                    "itself: a cycle (expected a canonical buffer other than the one shared)"
                )
            self.under[b] = root
            self._hold(root)
        return 1


def _replay(kinds, ids, shares, size, where, t) -> list[int]:
    """Bytes in use after each event of one trace, counted as XLA counts them."""
    heap = _Heap(size, len(kinds))
    out = []
    for k, (kind, b, share) in enumerate(zip(kinds, ids, shares)):
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
    events = sum(len(trace.events) for trace in ba.heap_simulator_traces)
    heap = _Heap({lb.id: lb.size for lb in ba.logical_buffers}, events + len(ba.buffer_allocations))
    for alloc in ba.buffer_allocations:
        if alloc.is_thread_local or not (
            alloc.is_entry_computation_parameter or alloc.is_constant or alloc.maybe_live_out
        ):
            continue
        best, best_size = None, 0
        for asg in alloc.assigned:
            s = heap.size.get(asg.logical_buffer_id)
            if s is not None and s > best_size:
                best, best_size = asg.logical_buffer_id, s
        if best is not None:
            heap.apply(0, best, 0)
    static = peak = heap.mem
    for trace in ba.heap_simulator_traces:
        for ev in trace.events:
            heap.apply(ev.kind, ev.buffer_id, ev.share_with_canonical_id)
            peak = max(peak, heap.mem)
    return static, peak
