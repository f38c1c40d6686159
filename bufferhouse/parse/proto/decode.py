"""One HloProto with a buffer assignment -> the warehouse tables the text path fills.

Column meanings are the text path's (parse/text/finish.py): a fact that both
forms carry lands with the same value from either, and tests/parse/proto/test_proto.py
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

from dataclasses import dataclass, field

import pyarrow as pa

from bufferhouse.errors import DumpError, ParseError
from bufferhouse.parse.model import Reading, ReadingFacts
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
from bufferhouse.parse.proto.sharding import shardings_table
from bufferhouse.parse.proto.tables import module_schema, module_table
from bufferhouse.parse.proto.trace import heap_events_table
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


def parse_hlo_proto(proto: hlo_pb2.HloProto, where: str, form: str = "proto") -> Reading:
    """The reading of one module from its HloProto (see the module doc).

    Every cross-reference is checked first (buffer ids, instruction ids,
    allocation indices): one that points at nothing is a ParseError naming the
    field, and no table is built.
    """
    check_invariants(proto, where)  # the structural invariants `check` runs, by field
    module, ba = proto.hlo_module, proto.buffer_assignment
    ins = _Instructions(module, where)
    entry = _entry(module, where)
    buffers = _logical_buffers(ba, ins)
    placed = _placements(ba, buffers, where)
    aliases = _aliases(ba, buffers, ins, where)
    shapes = _ValueShapes(ins)
    values = _values_table(buffers, placed, ins, shapes, where)
    sequence = flatten_schedule(module, entry, ins.by_id, where)
    at = {
        v: (a, o, placed.alloc_color[a])
        for v, a, o in zip(placed.value, placed.alloc, placed.offset)
    }
    events, _ = heap_events_table(ba, buffers.row, at, where)
    empty = {t.name: module_schema(t.name).empty_table() for t in MODULE_TABLES}
    tables = {
        **empty,
        "allocations": _allocations_table(ba, entry, placed, buffers, aliases, ins),
        "hlo_values": values,
        "assignments": _assignments_table(placed, buffers),
        "instructions": instructions_table(
            sorted({buffers.instruction[buffers.row[v]] for v in placed.values}),
            ins.by_id,
            ins.names,
            ins.computations,
            module,
            lambda iid: shapes(iid, ()),
        ),
        "heap_events": events,
        "shardings": shardings_table(module),
    }
    sections = ["allocations", "proto"]
    if len(events):
        sections.append("heap_trace")
    if sequence is not None:
        tables["sequence"] = module_table(
            "sequence", {"time": list(range(len(sequence))), "instruction": sequence}
        )
        sections.append("schedule")
    facts = ReadingFacts(
        layout="proto",
        schedule_length=len(sequence) if sequence is not None else None,
        module_name=module.name,
    )
    return Reading(tables, facts, form, sections=sections)


class _Instructions:
    """The module's instructions by id and their names; fusion bodies (which define no
    buffers) are indexed only when something names one of theirs."""

    def __init__(self, module: hlo_pb2.HloModuleProto, where: str) -> None:
        self.where = where
        self.by_id: dict[int, hlo_pb2.HloInstructionProto] = {}
        self.computations: dict[int, str] = {}
        self._fused = []
        for comp in module.computations:
            self.computations[comp.id] = comp.name
            if comp.is_fusion_computation:
                self._fused.append(comp)
            else:
                self.by_id.update((i.id, i) for i in comp.instructions)
        self.names = {i: instr.name for i, instr in self.by_id.items()}
        self._by_name: dict[str, int] = {}  # built only for protos that name instructions

    def _index_fused(self) -> bool:
        if not self._fused:
            return False
        for comp in self._fused:
            self.by_id.update((i.id, i) for i in comp.instructions)
        self.names.update((i, x.name) for i, x in self.by_id.items() if i not in self.names)
        self._fused.clear()
        self._by_name.clear()
        return True

    def resolve(self, loc: hlo_pb2.LogicalBufferProto.Location, field: str) -> int:
        """The id of the instruction a location names (by id, or by name in older protos)."""
        if loc.instruction_id in self.names:
            return loc.instruction_id
        if self._index_fused():
            return self.resolve(loc, field)
        if loc.instruction_name:
            if not self._by_name:
                self._by_name.update((n, i) for i, n in self.names.items())
            if loc.instruction_name in self._by_name:
                return self._by_name[loc.instruction_name]
        raise ParseError(
            self.where,
            0,
            f"{field}: instruction id {loc.instruction_id}"
            + (f" ({loc.instruction_name})" if loc.instruction_name else "")
            + " is not in hlo_module",
        )


def _entry(module: hlo_pb2.HloModuleProto, where: str) -> hlo_pb2.HloComputationProto:
    """The entry computation, by id (or by name in older protos)."""
    for c in module.computations:
        if c.id == module.entry_computation_id:
            return c
    for c in module.computations:
        if c.name == module.entry_computation_name:
            return c
    raise ParseError(where, 0, "hlo_module.entry_computation_id names no computation of the module")


@dataclass
class _Buffers:
    """The logical buffers, row by row: defining instruction, shape index and color."""

    row: dict[int, int] = field(default_factory=dict)  # buffer id -> row
    instruction: list[int] = field(default_factory=list)
    shape_index: list[tuple[int, ...]] = field(default_factory=list)
    color: list[int] = field(default_factory=list)


def _logical_buffers(ba: hlo_pb2.BufferAssignmentProto, ins: _Instructions) -> _Buffers:
    out = _Buffers()
    for i, lb in enumerate(ba.logical_buffers):
        out.row[lb.id] = i
        at = lb.defined_at
        field_name = f"buffer_assignment.logical_buffers[{i}].defined_at"
        iid = at.instruction_id
        out.instruction.append(iid if iid in ins.names else ins.resolve(at, field_name))
        out.shape_index.append(tuple(at.shape_index))
        out.color.append(lb.color)
    return out


@dataclass
class _Placements:
    """What is assigned where: one entry per (allocation, assigned buffer)."""

    value: list[int] = field(default_factory=list)
    alloc: list[int] = field(default_factory=list)
    offset: list[int] = field(default_factory=list)
    size: list[int] = field(default_factory=list)
    alloc_color: dict[int, int] = field(default_factory=dict)

    @property
    def values(self) -> list[int]:
        """The placed buffers, by id."""
        return sorted(set(self.value))


def _placements(ba: hlo_pb2.BufferAssignmentProto, buffers: _Buffers, where: str) -> _Placements:
    out = _Placements(alloc_color={a.index: a.color for a in ba.buffer_allocations})
    for ai, alloc in enumerate(ba.buffer_allocations):
        for j, asg in enumerate(alloc.assigned):
            if asg.logical_buffer_id not in buffers.row:
                raise ParseError(
                    where,
                    0,
                    f"buffer_assignment.buffer_allocations[{ai}].assigned[{j}]: logical buffer "
                    f"{asg.logical_buffer_id} is not in logical_buffers",
                )
            out.value.append(asg.logical_buffer_id)
            out.alloc.append(alloc.index)
            out.offset.append(asg.offset)
            out.size.append(asg.size)
    return out


def _aliases(
    ba: hlo_pb2.BufferAssignmentProto, buffers: _Buffers, ins: _Instructions, where: str
) -> dict[int, list[tuple[int, tuple[int, ...]]]]:
    """Where each buffer also appears (BufferAlias: the positions of its whole HloBuffer,
    not of the value alone, so they do not fill `positions`); used for output_shape."""
    out: dict[int, list[tuple[int, tuple[int, ...]]]] = {}
    for k, alias in enumerate(ba.buffer_aliases):
        if alias.source_buffer_id not in buffers.row:
            raise ParseError(
                where,
                0,
                f"buffer_assignment.buffer_aliases[{k}]: logical buffer "
                f"{alias.source_buffer_id} is not in logical_buffers",
            )
        iid = ins.resolve(alias.location, f"buffer_assignment.buffer_aliases[{k}].location")
        out.setdefault(alias.source_buffer_id, []).append((iid, tuple(alias.location.shape_index)))
    return out


class _ValueShapes:
    """The printed shape at (instruction, shape index), each printed once."""

    def __init__(self, ins: _Instructions) -> None:
        self._ins = ins
        self._texts = ShapeTexts()
        self._seen: dict[tuple[int, tuple[int, ...]], str | None] = {}

    def __call__(self, iid: int, index: tuple[int, ...]) -> str | None:
        key = (iid, index)
        if key not in self._seen:
            sub = subshape(self._ins.by_id[iid].shape, index)
            self._seen[key] = self._texts(sub) if sub is not None else None
        return self._seen[key]


def _values_table(
    buffers: _Buffers,
    placed: _Placements,
    ins: _Instructions,
    shapes: _ValueShapes,
    where: str,
) -> pa.Table:
    """hlo_values: every logical buffer placed in an allocation, by id."""
    ids = placed.values
    rows = [buffers.row[v] for v in ids]
    index = [buffers.shape_index[r] for r in rows]
    shape = [shapes(buffers.instruction[r], ix) for r, ix in zip(rows, index)]
    values = value_columns(shape, where)
    values.update(
        value_id=ids,
        instruction=[ins.names[buffers.instruction[r]] for r in rows],
        shape_index=[index_text(ix) for ix in index],
        is_phi=None,
        color=[buffers.color[r] for r in rows],
        shape=shape,
        line=None,
    )
    return module_table("hlo_values", values)


def _assignments_table(placed: _Placements, buffers: _Buffers) -> pa.Table:
    cross = [
        buffers.color[buffers.row[v]] != placed.alloc_color[a]
        for v, a in zip(placed.value, placed.alloc)
    ]
    columns = {
        "value_id": placed.value,
        "allocation_index": placed.alloc,
        "byte_offset": placed.offset,
        "size": placed.size,
        "reused_cross_color": cross,
    }
    table = module_table("assignments", columns)
    return table.sort_by([("value_id", "ascending"), ("allocation_index", "ascending")])


_ALLOCATION_COLUMNS = (
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
)


def _allocations_table(
    ba: hlo_pb2.BufferAssignmentProto,
    entry: hlo_pb2.HloComputationProto,
    placed: _Placements,
    buffers: _Buffers,
    aliases: dict[int, list[tuple[int, tuple[int, ...]]]],
    ins: _Instructions,
) -> pa.Table:
    """Allocation rows, with the parameter and output shapes the text prints (the flags
    as the proto gives them; derive adds category and the rest)."""
    root = entry.root_id
    params = {i.parameter_number: i for i in entry.instructions if i.opcode == "parameter"}

    def at_root(v: int) -> bool:
        r = buffers.row[v]
        if buffers.instruction[r] == root and not buffers.shape_index[r]:
            return True
        return any(iid == root and not ix for iid, ix in aliases.get(v, ()))

    outputs = {a for v, a in zip(placed.value, placed.alloc) if at_root(v)}
    rows = []
    for alloc in ba.buffer_allocations:
        is_param = alloc.is_entry_computation_parameter
        param = params.get(alloc.parameter_number) if is_param else None
        param_shape = shape_text(param.shape, layout=False) if param else "<unknown shape>"
        rows.append(
            (
                alloc.index,
                alloc.size,
                alloc.color,
                alloc.parameter_number if is_param else None,
                param_shape if is_param else None,
                index_text(alloc.parameter_shape_index) if is_param else None,
                shape_text(ins.by_id[root].shape, layout=False) if alloc.index in outputs else None,
                is_param,
                alloc.is_constant,
                alloc.is_thread_local,
                alloc.maybe_live_out,
            )
        )
    cols = list(zip(*rows)) if rows else [()] * len(_ALLOCATION_COLUMNS)
    return module_table("allocations", dict(zip(_ALLOCATION_COLUMNS, (list(c) for c in cols))))
