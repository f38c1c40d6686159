"""The instructions table (opcodes, operands, op_name and source locations from the
metadata and the stack-frame index) and the program order, from the HloModuleProto."""

from __future__ import annotations

import pyarrow as pa

from bufferhouse.errors import ParseError
from bufferhouse.parse.proto import hlo_pb2
from bufferhouse.parse.proto.tables import module_table

__all__ = ["flatten_schedule", "instructions_table"]


def instructions_table(ids, instr_by_id, iname, comp_name, module, shape_of) -> pa.Table:
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
    return module_table("instructions", cols)


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
    if entry.id not in {c.id for c in module.computations}:
        return None
    order: list[str] = []
    done: set[int] = {entry.id}
    # A stack of [computation id, position, its instruction's callees, next callee], not
    # recursion: a call chain thousands deep is a valid module (issue 31: RecursionError).
    stack: list[list] = [[entry.id, 0, None, 0]]
    while stack:
        frame = stack[-1]
        cid, pos, callees, k = frame
        ids = seqs[cid].instruction_ids if cid in seqs else ()
        if pos == len(ids):
            stack.pop()
            continue
        ins = instr_by_id.get(ids[pos])
        if ins is None:
            raise ParseError(
                where,
                0,
                f"hlo_module.schedule.sequences[{cid}]: instruction id {ids[pos]} is not in hlo_module",
            )
        if callees is None:
            callees = frame[2] = _callees(ins)
        if k < len(callees):
            frame[3] = k + 1
            c = callees[k]
            if c is not None and c not in done and c in seqs:
                done.add(c)
                stack.append([c, 0, None, 0])
            continue
        order.append(ins.name)
        frame[1:] = [pos + 1, None, 0]
    return order


def _callees(ins) -> list[int | None]:
    """The computations scheduled before `ins`, in HloLiveRange's order."""
    if ins.opcode in _FLATTEN_CALLS:
        return list(ins.called_computation_ids)
    if ins.opcode == "while":
        body, cond = ([*ins.called_computation_ids, None, None])[:2]
        return [cond, body]  # condition first, then body
    return []
