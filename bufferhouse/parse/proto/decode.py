"""One HloProto with a buffer assignment -> the warehouse tables the text path fills.

Column meanings are the text path's (parse/text/finish.py): a fact that both
forms carry lands with the same value from either, and tests/test_proto.py
compares the two ingests of one compile row for row. What the proto does not
carry (Used values' uses, HloLiveRange's live ranges and peak list, `(phi)`,
the printed instruction text, file lines) stays NULL or has no rows, as each
column's doc says. What only the proto carries lands too: the heap-simulator
trace (`heap_events`), XLA's own peak (`modules.xla_peak_bytes`, the way
`memory_analysis()` computes it) and the trace's peak.

The proto is decoded by protobuf (upb) in one call; columns are built from its
repeated fields with list comprehensions, one pass per column. This module
builds the buffer-assignment tables (allocations, values, assignments, heap
totals) and assembles the module; shapes are printed by printing.py, the
instructions and program order come from instructions.py, the trace and XLA's
peak from trace.py.
"""

from __future__ import annotations

import pyarrow.compute as pc

from bufferhouse.errors import DumpError, ParseError
from bufferhouse.parse.model import ParsedModule
from bufferhouse.parse.proto import hlo_pb2, wire
from bufferhouse.parse.proto.instructions import flatten_schedule, instructions_table
from bufferhouse.parse.proto.invariants import check_invariants
from bufferhouse.parse.proto.printing import (
    ShapeTexts,
    index_text,
    shape_text,
    subshape,
    value_columns,
)
from bufferhouse.parse.proto.tables import module_schema, module_table
from bufferhouse.parse.proto.trace import heap_events_table, xla_peaks
from bufferhouse.schema import MODULE_TABLES

__all__ = ["NoBufferAssignment", "decode_hlo_proto", "parse_hlo_proto"]

#: HloProto's top-level fields and their wire types (all length-delimited).
_HLO_PROTO_FIELDS = {1: wire.LEN, 3: wire.LEN}


class NoBufferAssignment(DumpError):
    """An HloProto without a buffer assignment (e.g. before optimizations): not a module."""


def decode_hlo_proto(data: bytes, where: str) -> hlo_pb2.HloProto:
    """Parse serialized HloProto bytes; a damaged or foreign message is a ParseError
    naming `where` and, from a walk of the wire format, the byte offset and field."""
    try:
        wire.check_message(data, _HLO_PROTO_FIELDS)
    except wire.WireError as exc:
        raise ParseError(where, 0, f"not a readable HloProto: {exc}") from None
    proto = hlo_pb2.HloProto()
    try:
        proto.ParseFromString(data)
    except wire.DECODE_ERRORS as exc:
        # The top level was well formed: the damage is inside hlo_module or buffer_assignment.
        field = _damaged_field(data)
        raise ParseError(where, 0, f"not a readable HloProto: {field}: {exc}") from None
    if not proto.HasField("hlo_module") or not proto.hlo_module.computations:
        raise ParseError(
            where,
            0,
            "not an HloProto: no hlo_module with computations (field 1); "
            "a .pb of another message type?",
        )
    if not proto.HasField("buffer_assignment") or not (proto.buffer_assignment.buffer_allocations):
        raise NoBufferAssignment(where, 0, "HloProto without a buffer assignment (field 3)")
    return proto


def _damaged_field(data: bytes) -> str:
    """Which field of an HloProto, however deep, fails to parse, and at which byte."""
    return wire.locate(data, hlo_pb2.HloProto.DESCRIPTOR) or "a nested field"


def parse_hlo_proto(proto: hlo_pb2.HloProto, where: str) -> ParsedModule:
    """The warehouse tables of one module from its HloProto (see the module doc).

    Every cross-reference is checked first (buffer ids, instruction ids,
    allocation indices): one that points at nothing is a ParseError naming the
    field, and no table is built.
    """
    check_invariants(proto, where)  # the structural invariants `check` runs, by field
    module = proto.hlo_module
    ba = proto.buffer_assignment
    out = ParsedModule()

    # Instructions by id, computation names by id.
    instr_by_id: dict[int, hlo_pb2.HloInstructionProto] = {}
    comp_name: dict[int, str] = {}
    fused = []  # fusion bodies define no buffers: indexed only if something names them
    for comp in module.computations:
        comp_name[comp.id] = comp.name
        if comp.is_fusion_computation:
            fused.append(comp)
        else:
            instr_by_id.update((ins.id, ins) for ins in comp.instructions)
    iname = {i: ins.name for i, ins in instr_by_id.items()}
    by_name: dict[str, int] = {}  # built only for protos that name instructions

    def index_fused() -> bool:
        if not fused:
            return False
        for comp in fused:
            instr_by_id.update((ins.id, ins) for ins in comp.instructions)
        iname.update((i, ins.name) for i, ins in instr_by_id.items() if i not in iname)
        fused.clear()
        by_name.clear()
        return True

    entry = next(
        (c for c in module.computations if c.id == module.entry_computation_id),
        None,
    )
    if entry is None:
        entry = next(
            (c for c in module.computations if c.name == module.entry_computation_name), None
        )
    if entry is None:
        raise ParseError(
            where, 0, "hlo_module.entry_computation_id names no computation of the module"
        )

    def instruction_of(loc: hlo_pb2.LogicalBufferProto.Location, field: str) -> int:
        if loc.instruction_id in instr_by_id:
            return loc.instruction_id
        if index_fused():
            return instruction_of(loc, field)
        if loc.instruction_name:  # older protos
            if not by_name:
                by_name.update((n, i) for i, n in iname.items())
            if loc.instruction_name in by_name:
                return by_name[loc.instruction_name]
        raise ParseError(
            where,
            0,
            f"{field}: instruction id {loc.instruction_id}"
            + (f" ({loc.instruction_name})" if loc.instruction_name else "")
            + " is not in hlo_module",
        )

    lbs = ba.logical_buffers
    lb_index: dict[int, int] = {}
    lb_instr: list[int] = []
    lb_shape_index: list[tuple[int, ...]] = []
    lb_color: list[int] = []
    for i, lb in enumerate(lbs):
        lb_index[lb.id] = i
        at = lb.defined_at
        iid = at.instruction_id
        lb_instr.append(
            iid
            if iid in iname
            else instruction_of(at, f"buffer_assignment.logical_buffers[{i}].defined_at")
        )
        lb_shape_index.append(tuple(at.shape_index))
        lb_color.append(lb.color)

    # Allocations and what is assigned where.
    allocs = ba.buffer_allocations
    a_value: list[int] = []
    a_alloc: list[int] = []
    a_offset: list[int] = []
    a_size: list[int] = []
    for ai, alloc in enumerate(allocs):
        for j, asg in enumerate(alloc.assigned):
            if asg.logical_buffer_id not in lb_index:
                raise ParseError(
                    where,
                    0,
                    f"buffer_assignment.buffer_allocations[{ai}].assigned[{j}]: logical buffer "
                    f"{asg.logical_buffer_id} is not in logical_buffers",
                )
            a_value.append(asg.logical_buffer_id)
            a_alloc.append(alloc.index)
            a_offset.append(asg.offset)
            a_size.append(asg.size)
    alloc_color = {a.index: a.color for a in allocs}

    # Where each buffer also appears (BufferAlias: the positions of its whole HloBuffer,
    # not of the value alone, so they do not fill `positions`); used for output_shape.
    aliases: dict[int, list[tuple[int, tuple[int, ...]]]] = {}
    for k, alias in enumerate(ba.buffer_aliases):
        if alias.source_buffer_id not in lb_index:
            raise ParseError(
                where,
                0,
                f"buffer_assignment.buffer_aliases[{k}]: logical buffer "
                f"{alias.source_buffer_id} is not in logical_buffers",
            )
        iid = instruction_of(alias.location, f"buffer_assignment.buffer_aliases[{k}].location")
        aliases.setdefault(alias.source_buffer_id, []).append(
            (iid, tuple(alias.location.shape_index))
        )

    placed = sorted(set(a_value))
    placed_rows = [lb_index[v] for v in placed]

    # Values (hlo_values): every logical buffer placed in an allocation, by id.
    texts = ShapeTexts()
    by_position: dict[tuple[int, tuple[int, ...]], str | None] = {}

    def value_shape(iid: int, index: tuple[int, ...]) -> str | None:
        key = (iid, index)
        if key not in by_position:
            sub = subshape(instr_by_id[iid].shape, index)
            by_position[key] = texts(sub) if sub is not None else None
        return by_position[key]

    v_instr = [iname[lb_instr[r]] for r in placed_rows]
    v_index_t = [lb_shape_index[r] for r in placed_rows]
    v_shape = [value_shape(lb_instr[r], ix) for r, ix in zip(placed_rows, v_index_t)]
    values = value_columns(v_shape, where)
    values.update(
        value_id=placed,
        instruction=v_instr,
        shape_index=[index_text(ix) for ix in v_index_t],
        is_phi=None,
        color=[lb_color[r] for r in placed_rows],
        shape=v_shape,
        line=None,
    )
    value_table = module_table("hlo_values", values)

    assign_table = module_table(
        "assignments",
        {
            "value_id": a_value,
            "allocation_index": a_alloc,
            "byte_offset": a_offset,
            "size": a_size,
            "reused_cross_color": [
                lb_color[lb_index[v]] != alloc_color[a] for v, a in zip(a_value, a_alloc)
            ],
        },
    ).sort_by([("value_id", "ascending"), ("allocation_index", "ascending")])

    # Allocation rows, with the parameter and output shapes the text prints.
    entry_root = entry.root_id
    param_instr = {
        ins.parameter_number: ins for ins in entry.instructions if ins.opcode == "parameter"
    }
    at_root = {
        v
        for v in placed
        if (lb_instr[lb_index[v]] == entry_root and not lb_shape_index[lb_index[v]])
        or any(iid == entry_root and not ix for iid, ix in aliases.get(v, ()))
    }
    by_alloc: dict[int, list[int]] = {}
    for v, a in zip(a_value, a_alloc):
        by_alloc.setdefault(a, []).append(v)
    rows = []
    for alloc in allocs:
        is_param = alloc.is_entry_computation_parameter
        param = param_instr.get(alloc.parameter_number) if is_param else None
        output = any(v in at_root for v in by_alloc.get(alloc.index, ()))
        temp = not (is_param or alloc.maybe_live_out or alloc.is_thread_local or alloc.is_constant)
        category = (
            "parameter"
            if is_param
            else "output"
            if alloc.maybe_live_out
            else "thread-local"
            if alloc.is_thread_local
            else "constant"
            if alloc.is_constant
            else "temp"
        )
        rows.append(
            (
                alloc.index,
                alloc.size,
                alloc.color,
                alloc.parameter_number if is_param else None,
                (shape_text(param.shape, layout=False) if param is not None else "<unknown shape>")
                if is_param
                else None,
                index_text(alloc.parameter_shape_index) if is_param else None,
                shape_text(instr_by_id[entry_root].shape, layout=False) if output else None,
                is_param,
                alloc.is_constant,
                alloc.is_thread_local,
                alloc.maybe_live_out,
                temp,
                category,
            )
        )
    cols = list(zip(*rows)) if rows else [()] * 13
    alloc_table = module_table(
        "allocations",
        dict(
            zip(
                (
                    "allocation_index",
                    "size",
                    "color",
                    "parameter_number",
                    "parameter_shape",
                    "parameter_shape_index",
                    "output_shape",
                    "is_parameter",
                    "is_constant",
                    "is_thread_local",
                    "is_maybe_live_out",
                    "is_preallocated_temp",
                    "category",
                ),
                (list(c) for c in cols),
            )
        ),
    )

    instr_table = instructions_table(
        sorted({lb_instr[r] for r in placed_rows}),
        instr_by_id,
        iname,
        comp_name,
        module,
        lambda iid: value_shape(iid, ()),
    )
    sequence = flatten_schedule(module, entry, instr_by_id, where)
    events, trace_rows = heap_events_table(ba, lb_index, alloc_color, where)

    heap_rows = []
    for color in sorted({a.color for a in allocs}):
        mine = [a for a in allocs if a.color == color]
        total = sum(a.size for a in mine)
        indefinite = sum(
            a.size
            for a in mine
            if a.is_entry_computation_parameter
            or a.maybe_live_out
            or a.is_thread_local
            or a.is_constant
        )
        heap_rows.append((color, total, indefinite, total - indefinite, None, None, None))

    empty = {t.name: module_schema(t.name).empty_table() for t in MODULE_TABLES}
    out.tables = {
        **empty,
        "allocations": alloc_table,
        "hlo_values": value_table,
        "assignments": assign_table,
        "instructions": instr_table,
        "sequence": module_table(
            "sequence",
            {"time": list(range(len(sequence))), "instruction": sequence},
        )
        if sequence is not None
        else empty["sequence"],
        "heap_peaks": module_table(
            "heap_peaks",
            dict(
                zip(
                    (
                        "color",
                        "total_bytes",
                        "indefinite_bytes",
                        "temp_allocation_bytes",
                        "temp_peak_bytes",
                        "heap_peak_bytes",
                        "peak_time",
                    ),
                    (list(c) for c in zip(*heap_rows)),
                )
            ),
        ),
        "heap_events": events,
    }
    out.sections = (
        ["allocations", "proto", "heap_trace"] if len(events) else ["allocations", "proto"]
    )
    if sequence is not None:
        out.sections.append("schedule")
    out.features = set()
    peaks = xla_peaks(ba)
    out.facts = {
        "total_bytes": int(sum(a.size for a in allocs)),
        "allocation_count": len(allocs),
        "value_count": len(placed),
        "schedule_length": len(sequence) if sequence is not None else None,
        "logical_peak_time": None,
        "logical_peak_bytes": None,
        "heap_peak_bytes": None,
        "format_era": None,
        "layout": "proto",
        "tiled": bool(pc.sum(pc.is_valid(value_table["tiles"])).as_py()),
        "has_address": False,
        "trace_peak_bytes": peaks[1] if trace_rows else None,
        "xla_static_peak_bytes": peaks[0],
        "module_proto_name": module.name,
    }
    return out
