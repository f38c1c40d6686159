"""The structural invariants of an HloProto's buffer assignment, checked before any
table is built: the statements `bufferhouse check` runs (schema/invariants.py),
run here over the rows the proto would give, each break named by its proto field.

A proto is bytes a program wrote, and a flipped bit still decodes: an index
listed twice, a slice past its allocation, a negative size, a trace holding a
buffer of another memory space. Loaded, such a module fails `check` or, worse,
passes it with wrong figures; so ingest refuses it with the field path.

What a heap-simulator trace promises is XLA's (xla/service/buffer_assignment.cc):
one trace per heap simulation, and a simulation is of one color (BufferAssigner::
AssignBuffersWithSequentialOrdering, SplitBuffersByColor; AssignPresetBuffers for
memory-space assignment's trace of each preset color). Its buffer_allocation_index is
set by BufferAllocation::AddHeapTrace to the index of the allocation *then*;
CombineTempAllocations then merges the temp allocations of a color into one (the
merged-in traces take the first one's old index) and renumbers every allocation,
leaving the traces' indices as they were. So the index names an allocation of the
list before renumbering, which the proto does not hold: it is not checked (a TPU
proto's traces name allocations 17 and 18 of 16), and the trace is placed by its
buffers instead (trace.py). docs/proto-input.md has the table.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from bufferhouse.errors import ParseError
from bufferhouse.parse.proto.printing import index_text
from bufferhouse.schema.invariants import Violation, violations

__all__ = ["check_invariants"]

_BA = "buffer_assignment"


#: The warehouse's INTEGER columns, which the buffer assignment's int64 fields fill.
_INT32 = range(-(1 << 31), 1 << 31)


def check_invariants(proto, where: str) -> None:
    """Raise ParseError at the first break of a structural invariant, naming its field."""
    ba = proto.buffer_assignment
    too_large = _too_large(ba)
    if too_large:
        raise ParseError(where, 0, f"{too_large}: does not fit the warehouse's INTEGER column")
    found = violations(_rows(ba))
    if found:
        v = found[0]
        raise ParseError(where, 0, f"{_field(ba, v)}: {v.problem}")


def _too_large(ba) -> str | None:
    """The first field, with its value, that an INTEGER column cannot hold."""
    for i, a in enumerate(ba.buffer_allocations):
        for name in ("index", "color", "parameter_number"):
            if getattr(a, name) not in _INT32:
                return f"{_BA}.buffer_allocations[{i}].{name} {getattr(a, name)}"
    for i, lb in enumerate(ba.logical_buffers):
        if lb.color not in _INT32:
            return f"{_BA}.logical_buffers[{i}].color {lb.color}"
    for t, trace in enumerate(ba.heap_simulator_traces):
        if trace.buffer_allocation_index not in _INT32:
            return f"{_BA}.heap_simulator_traces[{t}].buffer_allocation_index {trace.buffer_allocation_index}"
    return None


def _rows(ba) -> dict[str, pa.Table]:
    """The columns the invariants read, as the decoder would fill them: one pass over
    each repeated field (a proto's Python objects are the cost, not the SQL)."""
    ids, sizes, indexes, colors = [], [], [], []
    for lb in ba.logical_buffers:
        ids.append(lb.id)
        sizes.append(lb.size)
        colors.append(lb.color)
        index = lb.defined_at.shape_index
        indexes.append(index_text(index) if index else "{}")
    alloc_index, alloc_size, a_value, a_alloc, a_offset, a_size = [], [], [], [], [], []
    for a in ba.buffer_allocations:
        alloc_index.append(a.index)
        alloc_size.append(a.size)
        for s in a.assigned:
            a_value.append(s.logical_buffer_id)
            a_offset.append(s.offset)
            a_size.append(s.size)
            a_alloc.append(a.index)
    e_trace, e_event, e_value = [], [], []
    for t, trace in enumerate(ba.heap_simulator_traces):
        buffers = [e.buffer_id for e in trace.events]
        e_value += buffers
        e_trace += [t] * len(buffers)
        e_event += range(len(buffers))
    i64 = pa.int64()
    value_id, e_values = pa.array(ids, i64), pa.array(e_value, i64)
    at = pc.index_in(e_values, value_set=value_id)  # NULL: a buffer decode reports
    return {
        "allocations": pa.table(
            {"allocation_index": pa.array(alloc_index, i64), "size": pa.array(alloc_size, i64)}
        ),
        "hlo_values": pa.table(
            {
                "value_id": value_id,
                "shape_index": pa.array(indexes),
                "color": pa.array(colors, i64),
            }
        ),
        "assignments": pa.table(
            {
                "value_id": pa.array(a_value, i64),
                "allocation_index": pa.array(a_alloc, i64),
                "byte_offset": pa.array(a_offset, i64),
                "size": pa.array(a_size, i64),
            }
        ),
        "heap_events": pa.table(
            {
                "trace_index": pa.array(e_trace, i64),
                "event_index": pa.array(e_event, i64),
                "value_id": e_values,
                "size": pc.take(pa.array(sizes, i64), at),
                "heap_bytes": pa.nulls(len(e_value), i64),
            }
        ),
    }


def _field(ba, v: Violation) -> str:
    """The proto field path of a break, from the keys its statement returns."""
    allocs, lbs = ba.buffer_allocations, ba.logical_buffers
    if v.invariant in ("allocation_indices", "allocation_sizes"):
        at = [i for i, a in enumerate(allocs) if a.index == v.a]
        if v.invariant == "allocation_indices":
            return f"{_BA}.buffer_allocations[{at[1]}].index"
        return f"{_BA}.buffer_allocations[{at[0]}].size"
    if v.invariant in ("value_ids", "shape_indices"):
        at = [i for i, lb in enumerate(lbs) if lb.id == v.a]
        if v.invariant == "value_ids":
            return f"{_BA}.logical_buffers[{at[1]}].id"
        bad = next(i for i in at if any(x < 0 for x in lbs[i].defined_at.shape_index))
        return f"{_BA}.logical_buffers[{bad}].defined_at.shape_index"
    if v.invariant in ("values_placed_once", "slices_in_bounds"):
        at = [
            (i, j)
            for i, a in enumerate(allocs)
            for j, s in enumerate(a.assigned)
            if s.logical_buffer_id == v.a and (v.invariant != "slices_in_bounds" or a.index == v.b)
        ]
        i, j = at[1] if v.invariant == "values_placed_once" else at[0]
        return f"{_BA}.buffer_allocations[{i}].assigned[{j}]"
    if v.invariant == "trace_colors":
        color = {lb.id: lb.color for lb in lbs}
        events = ba.heap_simulator_traces[v.a].events
        k = next(k for k, e in enumerate(events) if color.get(e.buffer_id) == v.b)
        return f"{_BA}.heap_simulator_traces[{v.a}].events[{k}]"
    return f"{_BA}.heap_simulator_traces[{v.a}].events[{v.b}]"
