"""The structural invariants of an HloProto's buffer assignment, checked before any
table is built: the statements `bufferhouse check` runs (schema/invariants.py),
run here over the rows the proto would give, each break named by its proto field.

A proto is bytes a program wrote, and a flipped bit still decodes: an index
listed twice, a slice past its allocation, a negative size, a trace naming an
allocation that is not there. Loaded, such a module fails `check` or, worse,
passes it with wrong figures; so ingest refuses it with the field path.
"""

from __future__ import annotations

import pyarrow as pa

from bufferhouse.errors import ParseError
from bufferhouse.parse.proto.printing import index_text
from bufferhouse.schema.invariants import Violation, violations

__all__ = ["check_invariants"]

_BA = "buffer_assignment"


def check_invariants(proto, where: str) -> None:
    """Raise ParseError at the first break of a structural invariant, naming its field."""
    ba = proto.buffer_assignment
    found = violations(_rows(ba))
    if found:
        v = found[0]
        raise ParseError(where, 0, f"{_field(ba, v)}: {v.problem}")


def _rows(ba) -> dict[str, pa.Table]:
    """The columns the invariants read, as the decoder would fill them."""
    allocs, lbs, traces = ba.buffer_allocations, ba.logical_buffers, ba.heap_simulator_traces
    size_of = {lb.id: lb.size for lb in lbs}
    assigned = [(a.index, s) for a in allocs for s in a.assigned]
    events = [
        (t, k, tr.buffer_allocation_index, e)
        for t, tr in enumerate(traces)
        for k, e in enumerate(tr.events)
    ]
    i64 = pa.int64()
    return {
        "allocations": pa.table(
            {
                "allocation_index": pa.array([a.index for a in allocs], i64),
                "size": pa.array([a.size for a in allocs], i64),
            }
        ),
        "hlo_values": pa.table(
            {
                "value_id": pa.array([lb.id for lb in lbs], i64),
                "shape_index": pa.array(
                    [index_text(tuple(lb.defined_at.shape_index)) for lb in lbs], pa.string()
                ),
            }
        ),
        "assignments": pa.table(
            {
                "value_id": pa.array([s.logical_buffer_id for _, s in assigned], i64),
                "allocation_index": pa.array([i for i, _ in assigned], i64),
                "byte_offset": pa.array([s.offset for _, s in assigned], i64),
                "size": pa.array([s.size for _, s in assigned], i64),
            }
        ),
        "heap_events": pa.table(
            {
                "trace_index": pa.array([t for t, _, _, _ in events], i64),
                "event_index": pa.array([k for _, k, _, _ in events], i64),
                "value_id": pa.array([e.buffer_id for _, _, _, e in events], i64),
                "allocation_index": pa.array([i for _, _, i, _ in events], i64),
                "size": pa.array([size_of.get(e.buffer_id) for _, _, _, e in events], i64),
                "heap_bytes": pa.nulls(len(events), i64),
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
    if v.invariant == "trace_allocations":
        return f"{_BA}.heap_simulator_traces[{v.a}].buffer_allocation_index"
    return f"{_BA}.heap_simulator_traces[{v.a}].events[{v.b}]"
