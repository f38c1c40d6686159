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
repeated fields with list comprehensions, one pass per column.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.message import DecodeError

from bufferhouse.errors import DumpError, ParseError
from bufferhouse.parse import shapes
from bufferhouse.parse.model import ParsedModule
from bufferhouse.parse.proto import hlo_pb2, wire
from bufferhouse.schema import MODULE_TABLES, TABLES_BY_NAME, arrow_schema

__all__ = [
    "NoBufferAssignment",
    "decode_hlo_proto",
    "parse_hlo_proto",
    "xla_peak",
]

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
    except DecodeError as exc:
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
    """Which top-level field of an HloProto fails to parse, with its byte range."""
    names = {1: "hlo_module", 3: "buffer_assignment"}
    for number, _, start, end in wire.fields(data):
        cls = {1: hlo_pb2.HloModuleProto, 3: hlo_pb2.BufferAssignmentProto}.get(number)
        if cls is None:
            continue
        try:
            cls().ParseFromString(data[start:end])
        except DecodeError:
            return f"field {number} ({names[number]}) at bytes {start}..{end}"
    return "a nested field"


# --------------------------------------------------------------------------- shapes

#: xla.PrimitiveType number -> the name XLA prints (xla_data.proto).
PRIMITIVE_NAMES = {
    1: "pred", 2: "s8", 3: "s16", 4: "s32", 5: "s64", 6: "u8", 7: "u16", 8: "u32",
    9: "u64", 10: "f16", 11: "f32", 12: "f64", 13: "tuple", 14: "opaque", 15: "c64",
    16: "bf16", 17: "token", 18: "c128", 19: "f8e5m2", 20: "f8e4m3fn", 21: "s4",
    22: "u4", 23: "f8e4m3b11fnuz", 24: "f8e5m2fnuz", 25: "f8e4m3fnuz", 26: "s2",
    27: "u2", 28: "f8e4m3", 29: "f8e3m4", 30: "s1", 31: "u1", 32: "f4e2m1fn",
    33: "f8e8m0fnu", 34: "b",
}  # fmt: skip

_TUPLE = 13


class _ShapeTexts(dict):
    """shape_text by the shape's serialized bytes: a module repeats a few shapes many times,
    and serializing (in C) is far cheaper than printing (in Python)."""

    def __call__(self, shape: hlo_pb2.ShapeProto) -> str:
        key = shape.SerializeToString()
        text = self.get(key)
        if text is None:
            text = self[key] = shape_text(shape)
        return text


def shape_text(shape: hlo_pb2.ShapeProto, layout: bool = True) -> str:
    """The shape as XLA prints it (ShapeUtil::HumanString[WithLayout])."""
    if shape.element_type == _TUPLE:
        # XLA marks every fifth element of a long tuple with its index
        return (
            "("
            + ", ".join(
                (f"/*index={i}*/" if i and i % 5 == 0 else "") + shape_text(s, layout)
                for i, s in enumerate(shape.tuple_shapes)
            )
            + ")"
        )
    name = PRIMITIVE_NAMES.get(shape.element_type, f"type{shape.element_type}")
    if name == "b":  # a buffer type wraps its element shape
        inner = shape_text(shape.tuple_shapes[0], layout) if shape.tuple_shapes else ""
        return f"b({inner})"
    dynamic = shape.is_dynamic_dimension
    dims = ",".join(
        (f"<={d}" if i < len(dynamic) and dynamic[i] else str(d))
        for i, d in enumerate(shape.dimensions)
    )
    text = f"{name}[{dims}]"
    if layout and shape.dimensions and shape.HasField("layout"):
        text += _layout_text(shape.layout)
    return text


def _layout_text(layout: hlo_pb2.LayoutProto) -> str:
    parts = ",".join(str(d) for d in layout.minor_to_major)
    extra = ""
    for tile in layout.tiles:
        extra += "T(" + ",".join(str(d) for d in tile.dimensions) + ")"
    if layout.element_size_in_bits:
        extra += f"E({layout.element_size_in_bits})"
    if layout.memory_space:
        extra += f"S({layout.memory_space})"
    return "{" + parts + (":" + extra if extra else "") + "}"


def _subshape(shape: hlo_pb2.ShapeProto, index: Iterable[int]) -> hlo_pb2.ShapeProto | None:
    for i in index:
        if shape.element_type != _TUPLE or i >= len(shape.tuple_shapes):
            return None
        shape = shape.tuple_shapes[i]
    return shape


def index_text(index: Iterable[int]) -> str:
    return "{" + ",".join(str(i) for i in index) + "}"


# --------------------------------------------------------------------------- the module


def _schema(table: str) -> pa.Schema:
    schema = arrow_schema(TABLES_BY_NAME[table])
    return schema.remove(schema.get_field_index("module_id"))


def _table(name: str, columns: dict[str, object]) -> pa.Table:
    schema = _schema(name)
    n = max((len(c) for c in columns.values() if c is not None), default=0)  # type: ignore[arg-type]
    arrays = []
    for f in schema:
        col = columns.get(f.name)
        if col is None:
            arrays.append(pa.nulls(n, f.type))
        elif isinstance(col, (pa.Array, pa.ChunkedArray)):
            arrays.append(col.cast(f.type) if col.type != f.type else col)
        else:
            arrays.append(pa.array(col, f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def parse_hlo_proto(proto: hlo_pb2.HloProto, where: str) -> ParsedModule:
    """The warehouse tables of one module from its HloProto (see the module doc).

    Every cross-reference is checked first (buffer ids, instruction ids,
    allocation indices): one that points at nothing is a ParseError naming the
    field, and no table is built.
    """
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
    texts = _ShapeTexts()
    by_position: dict[tuple[int, tuple[int, ...]], str | None] = {}

    def value_shape(iid: int, index: tuple[int, ...]) -> str | None:
        key = (iid, index)
        if key not in by_position:
            sub = _subshape(instr_by_id[iid].shape, index)
            by_position[key] = texts(sub) if sub is not None else None
        return by_position[key]

    v_instr = [iname[lb_instr[r]] for r in placed_rows]
    v_index_t = [lb_shape_index[r] for r in placed_rows]
    v_shape = [value_shape(lb_instr[r], ix) for r, ix in zip(placed_rows, v_index_t)]
    values = _value_columns(v_shape, where)
    values.update(
        value_id=placed,
        instruction=v_instr,
        shape_index=[index_text(ix) for ix in v_index_t],
        is_phi=None,
        color=[lb_color[r] for r in placed_rows],
        shape=v_shape,
        line=None,
    )
    value_table = _table("hlo_values", values)

    assign_table = _table(
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
    alloc_table = _table(
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

    instr_table = _instructions(
        sorted({lb_instr[r] for r in placed_rows}),
        instr_by_id,
        iname,
        comp_name,
        module,
        lambda iid: value_shape(iid, ()),
    )
    sequence = flatten_schedule(module, entry, instr_by_id, where)
    events, trace_rows = _heap_events(ba, lb_index, alloc_color, where)

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

    empty = {t.name: _schema(t.name).empty_table() for t in MODULE_TABLES}
    out.tables = {
        **empty,
        "allocations": alloc_table,
        "hlo_values": value_table,
        "assignments": assign_table,
        "instructions": instr_table,
        "sequence": _table(
            "sequence",
            {"time": list(range(len(sequence))), "instruction": sequence},
        )
        if sequence is not None
        else empty["sequence"],
        "heap_peaks": _table(
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


def _value_columns(shape_texts: list[str | None], where: str) -> dict[str, object]:
    """hlo_values' shape-derived columns, by the same parser the text path uses."""
    per: dict[str, list] = {
        k: []
        for k in (
            "element_type",
            "dims",
            "is_dynamic",
            "minor_to_major",
            "tiles",
            "memory_space",
            "logical_bytes",
            "is_tuple",
        )
    }
    cache: dict[str | None, tuple] = {}
    for text in shape_texts:
        row = cache.get(text)
        if row is None:
            if text is None:
                row = (None,) * 8
            else:
                try:
                    s = shapes.parse_shape(text)
                except shapes.ShapeSyntaxError as exc:
                    raise ParseError(where, 0, f"shape not understood: {exc}", text) from None
                row = (
                    s.element_type,
                    list(s.dims) if not s.is_tuple else None,
                    any(s.dynamic) if not s.is_tuple else False,
                    list(s.minor_to_major) if s.minor_to_major is not None else None,
                    s.tiles,
                    s.memory_space,
                    shapes.byte_size(s),
                    s.is_tuple,
                )
            cache[text] = row
        for k, v in zip(per, row):
            per[k].append(v)
    return per


def _instructions(ids, instr_by_id, iname, comp_name, module, shape_of) -> pa.Table:
    """instructions rows from the HloInstructionProtos, a column at a time; source
    locations from the metadata, else from the module's stack-frame index."""
    frames = _frames(module.stack_frame_index)
    ins = [instr_by_id[i] for i in ids]
    md = [i.metadata for i in ins]
    opcode = [i.opcode for i in ins]
    frame_id = [m.stack_frame_id for m in md]
    files = [m.source_file for m in md]
    located = [
        (f, m.source_line or None, None)
        if f
        else (frames.get(fid, (None, None, None)) if fid else (None, None, None))
        for f, m, fid in zip(files, md, frame_id)
    ]
    source_file, source_line, source_function = (
        (list(c) for c in zip(*located)) if located else ([], [], [])
    )
    cols = {
        "instruction": [iname[i] for i in ids],
        "opcode": opcode,
        "shape": [shape_of(i) for i in ids],
        "operands": [[iname.get(o) or f"<id {o}>" for o in i.operand_ids] for i in ins],
        "parameter_number": [
            i.parameter_number if op == "parameter" else None for i, op in zip(ins, opcode)
        ],
        "fusion_kind": [i.fusion_kind or None for i in ins],
        "called_computations": [
            [comp_name.get(c, f"<id {c}>") for c in i.called_computation_ids] for i in ins
        ],
        "custom_call_target": [i.custom_call_target or None for i in ins],
        "op_name": [m.op_name or None for m in md],
        "op_type": [m.op_type or None for m in md],
        "source_file": source_file,
        "source_line": source_line,
        "source_function": source_function,
        "stack_frame_id": [f or None for f in frame_id],
        "text": None,
    }
    return _table("instructions", cols)


def _frames(index: hlo_pb2.StackFrameIndexProto) -> dict[int, tuple[str, int, str]]:
    """1-based frame id -> (file, line, function) of the frame's own location."""
    out = {}
    files, functions, locations = index.file_names, index.function_names, index.file_locations
    for fid, frame in enumerate(index.stack_frames, start=1):
        loc_id = frame.file_location_id
        if not 1 <= loc_id <= len(locations):
            continue
        loc = locations[loc_id - 1]
        file = files[loc.file_name_id - 1] if 1 <= loc.file_name_id <= len(files) else None
        func = (
            functions[loc.function_name_id - 1]
            if 1 <= loc.function_name_id <= len(functions)
            else None
        )
        out[fid] = (file, loc.line, func)
    return out


#: Opcodes whose called computations HloLiveRange flattens into the program order.
_FLATTEN_CALLS = {"call", "conditional", "async-start"}


def flatten_schedule(module, entry, instr_by_id, where: str) -> list[str] | None:
    """The module's program order as HloLiveRange flattens it (each called computation of a
    call, conditional, async-start or while scheduled before its caller; a computation once);
    None when the module has no schedule."""
    seqs = module.schedule.sequences
    if not seqs:
        return None
    comps = {c.id: c for c in module.computations}
    order: list[str] = []
    done: set[int] = set()

    def flatten(cid: int) -> None:
        if cid in done or cid not in seqs:
            return
        done.add(cid)
        for iid in seqs[cid].instruction_ids:
            ins = instr_by_id.get(iid)
            if ins is None:
                raise ParseError(
                    where,
                    0,
                    f"hlo_module.schedule.sequences[{cid}]: instruction id {iid} is not in hlo_module",
                )
            if ins.opcode in _FLATTEN_CALLS:
                for c in ins.called_computation_ids:
                    flatten(c)
            elif ins.opcode == "while":
                calls = list(ins.called_computation_ids)
                # condition first, then body, as HloLiveRange does
                body, cond = ([*calls, None, None])[:2]
                for c in (cond, body):
                    if c is not None:
                        flatten(c)
            order.append(ins.name)

    if entry.id not in comps:
        return None
    flatten(entry.id)
    return order


# --------------------------------------------------------------------------- the trace

_KINDS = ("ALLOC", "FREE", "SHARE_WITH")


def _heap_events(ba, lb_index, alloc_color, where: str) -> tuple[pa.Table, int]:
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
    return _table("heap_events", cols), n_events


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


# --------------------------------------------------------------------------- fingerprint


def assignment_fingerprint(tables: dict[str, pa.Table]) -> str:
    """A SHA-256 of the buffer assignment as both text and proto carry it, so the same
    compile seen as a dump, a proto or inside a profile has the same fingerprint.

    Covers, in a fixed order: each allocation's (index, size, color, parameter number,
    constant, thread-local, maybe-live-out) and each placement's (value id, defining
    instruction, shape index, allocation, offset, size). Not file names, metadata or
    instruction ids (a profile's HloProto renumbers them). Computed on whole columns.
    """
    h = hashlib.sha256(b"bufferhouse-assignment-v1\n")
    allocs = tables["allocations"].sort_by("allocation_index")
    _hash_rows(
        h,
        allocs,
        (
            "allocation_index",
            "size",
            "color",
            "parameter_number",
            "is_constant",
            "is_thread_local",
            "is_maybe_live_out",
        ),
    )
    values = tables["hlo_values"].select(["value_id", "instruction", "shape_index"])
    asg = tables["assignments"].select(["value_id", "allocation_index", "byte_offset", "size"])
    asg = asg.join(values, "value_id", join_type="left outer").sort_by(
        [("value_id", "ascending"), ("allocation_index", "ascending"), ("byte_offset", "ascending")]
    )
    _hash_rows(
        h,
        asg,
        ("value_id", "instruction", "shape_index", "allocation_index", "byte_offset", "size"),
    )
    return h.hexdigest()


def _hash_rows(h, table: pa.Table, columns: tuple[str, ...]) -> None:
    """Feed each row's columns as text, joined by \x1f and ended by \x1e, into `h`."""
    if table.num_rows == 0:
        return
    texts = [pc.fill_null(pc.cast(table[c], pa.string()), "\x00") for c in columns]
    rows = pc.binary_join_element_wise(*texts, "", "\x1f")  # trailing "" ends each row
    if isinstance(rows, pa.ChunkedArray):
        rows = rows.combine_chunks()
    offsets = np.frombuffer(rows.buffers()[1], dtype=np.int32)
    first, last = offsets[rows.offset], offsets[rows.offset + len(rows)]
    h.update(memoryview(rows.buffers()[2])[first:last])
