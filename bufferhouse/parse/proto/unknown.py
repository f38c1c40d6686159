"""Fields a newer XLA writes that today's XLA does not declare.

Our hlo.proto declares only the fields bufferhouse reads, so most of XLA's own
fields are unknown to it too; what tells a newer XLA's field apart is its number.
XLA numbers new fields upwards and never reuses a reserved one, so a field past the
highest number today's XLA declares for its message (XLA_LAST) is a newer XLA's.
protobuf parses such a field and keeps it aside (its unknown-field set); nothing
reads it, so every figure that does not depend on it stays right.

A newer XLA adds a field to every instruction or allocation, not to one in a
thousand, so the scan looks at the first few elements of each repeated field only:
it costs a few thousand messages however large the module. Each distinct (field
path, number) is one UnknownInput warning naming the file, the field and its first
bytes; `ingest --strict` refuses the module.

XLA_LAST comes from the descriptors jaxlib embeds (`python -m
bufferhouse.parse.proto.unknown .../jaxlib/libjax_common.so` prints it again for a
newer jaxlib): the exact hlo.proto and xla_data.proto jax was built with.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from bufferhouse.errors import UnknownInput
from bufferhouse.parse.proto import wire

#: The highest field number jaxlib 0.12.0.1's XLA declares, per message read.
XLA_LAST = {
    "HloProto": 3,
    "HloModuleProto": 25,
    "HloComputationProto": 9,
    "HloInstructionProto": 103,
    "HloScheduleProto": 1,
    "HloScheduleProto.InstructionSequence": 1,
    "StackFrameIndexProto": 4,
    "StackFrameIndexProto.FileLocation": 6,
    "StackFrameIndexProto.StackFrame": 2,
    "LogicalBufferProto": 4,
    "LogicalBufferProto.Location": 4,
    "BufferAllocationProto": 13,
    "BufferAllocationProto.Assigned": 4,
    "HeapSimulatorTrace": 3,
    "HeapSimulatorTrace.Event": 5,
    "BufferAssignmentProto": 5,
    "BufferAssignmentProto.BufferAlias": 2,
    "TileProto": 1,
    "LayoutProto": 17,
    "ShapeProto": 6,
    "OpMetadata": 20,
    "OpSharding": 14,
    "NamedShardingProto": 8,
    "NamedShardingProto.DimensionSharding": 2,
    "MeshProto": 3,
    "MeshProto.MeshAxis": 2,
    "AxisRefProto": 2,
    "AxisRefProto.SubAxis": 2,
}
_PACKAGE = "bufferhouse.xla."
#: How many elements of each repeated message field the scan descends into.
SAMPLED = 4
#: Warnings one module gets at most (each names a distinct field).
MAX_WARNINGS = 20
_WIRE = {0: "varint", 1: "64-bit", 2: "length-delimited", 3: "group", 5: "32-bit"}


def _unknown(msg: Message) -> list[tuple[int, int, object]]:
    """(field number, wire type, data) of each unknown field `msg` holds."""
    try:
        from google.protobuf.unknown_fields import UnknownFieldSet  # protobuf >= 4.22
    except ImportError:  # 4.21: the method it replaced
        return [(f.field_number, f.wire_type, f.data) for f in msg.UnknownFields()]
    return [(f.field_number, f.wire_type, f.data) for f in UnknownFieldSet(msg)]


def _walk(msg: Message, path: str) -> Iterator[tuple[str, Message]]:
    """(path, message) of `msg` and its sub-messages, SAMPLED elements of each list."""
    yield path, msg
    for field, value in msg.ListFields():
        if field.type != FieldDescriptor.TYPE_MESSAGE:
            continue
        inner = f"{path}.{field.name}" if path else field.name
        if field.message_type.GetOptions().map_entry:
            for _, v in zip(range(SAMPLED), value.values()):
                if isinstance(v, Message):
                    yield from _walk(v, f"{inner}[]")
        elif wire.is_repeated(field):
            for i, v in zip(range(SAMPLED), value):
                yield from _walk(v, f"{inner}[{i}]")
        else:
            yield from _walk(value, inner)


def _shown(data: object) -> str:
    """An unknown field's value as the warning's text: its bytes (the first 32, in hex)
    or its number."""
    if isinstance(data, (bytes, bytearray)):
        more = " ..." if len(data) > 32 else ""
        return f"{len(data)} bytes: {bytes(data[:32]).hex(' ')}{more}"
    if isinstance(data, int):
        return str(data)
    return "a group"


def _generic(path: str) -> str:
    """The path without its element indices: one field, however many elements."""
    out, depth = [], 0
    for ch in path:
        depth += (ch == "[") - (ch == "]")
        if depth == 0 and ch != "]":
            out.append(ch)
    return "".join(out)


def unknown_field_warnings(proto: Message, where: str) -> list[UnknownInput]:
    """One warning per distinct newer-XLA (field path, number) in `proto`'s sampled
    messages."""
    seen: set[tuple[str, int]] = set()
    out: list[UnknownInput] = []
    for path, msg in _walk(proto, ""):
        name = msg.DESCRIPTOR.full_name.removeprefix(_PACKAGE)
        last = XLA_LAST.get(name)
        if last is None:
            continue
        for number, wire_type, data in _unknown(msg):
            if number <= last or (_generic(path), number) in seen:
                continue  # one of today's XLA's fields that bufferhouse does not read
            seen.add((_generic(path), number))
            out.append(
                UnknownInput(
                    where,
                    0,
                    f"unknown field {number} ({_WIRE.get(wire_type, wire_type)}) in "
                    f"{path or name} ({name}), past the last field {last} of today's XLA: "
                    "a newer XLA's, kept in the file and not read",
                    _shown(data),
                )
            )
            if len(out) >= MAX_WARNINGS:
                return out
    return out


def _embedded_files(binary: bytes, name: str) -> list:
    """The FileDescriptorProtos named `name` embedded in a compiled library."""
    from google.protobuf import descriptor_pb2

    key = b"\x0a" + bytes([len(name)]) + name.encode()
    found, at = [], binary.find(key)
    while at >= 0:
        end = at
        with contextlib.suppress(wire.WireError):  # the bytes after the descriptor
            for number, kind, _, stop in wire.fields(memoryview(binary)[at:]):
                if not 1 <= number <= 14 or kind not in (wire.VARINT, wire.LEN):
                    break
                end = at + stop
        fd = descriptor_pb2.FileDescriptorProto()
        fd.ParseFromString(binary[at:end])
        found.append(fd)
        at = binary.find(key, at + 1)
    return found


def main(argv: list[str]) -> int:
    """Print XLA_LAST from a jaxlib's libjax_common.so."""
    binary = open(argv[0], "rb").read()  # noqa: SIM115 - a one-shot read
    for file in ("xla/service/hlo.proto", "xla/xla_data.proto"):
        (fd,) = sorted(_embedded_files(binary, file), key=lambda f: -len(f.message_type))[:1]
        stack = [(m, m.name) for m in fd.message_type]
        while stack:
            m, path = stack.pop()
            if path in XLA_LAST or path.split(".")[0] in XLA_LAST:
                print(f'    "{path}": {max((f.number for f in m.field), default=0)},')
            stack += [(n, f"{path}.{n.name}") for n in m.nested_type]
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
