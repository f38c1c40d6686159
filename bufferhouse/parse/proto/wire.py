"""The protobuf wire format, walked by hand.

protobuf's parser says only "Error parsing message" about a damaged file; this
walk names the byte offset and the field where it breaks (`locate` descends
through the nested messages, by their descriptors, to the innermost one), so a
truncated `.hlo.pb` gets a message a user can act on. xplane.py uses it to read
an XSpace from a stream, seeking past the fields it does not want (the trace
events).

What no protobuf writer emits is refused at the first byte it shows in (`key`):
field number 0 (so a file of zeros stops at byte 0, not after a walk through
it), a field number past 2^29-1, wire types 3, 4 (groups), 6 and 7, and a
varint past 2^64-1. Each field then costs the walk a bounded amount of work.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

from google.protobuf.message import DecodeError

#: What protobuf's parser raises on a damaged message: upb says DecodeError for all of
#: it; the pure-Python runtime (PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python) raises
#: UnicodeDecodeError for a proto3 string that is not UTF-8.
DECODE_ERRORS = (DecodeError, UnicodeDecodeError)

VARINT, I64, LEN, SGROUP, EGROUP, I32 = 0, 1, 2, 3, 4, 5
#: protobuf's largest field number.
MAX_FIELD = (1 << 29) - 1


class WireError(ValueError):
    """Bytes that are not a protobuf message; `offset` is where the walk stopped."""

    def __init__(self, offset: int, message: str) -> None:
        self.offset = offset
        super().__init__(f"at byte {offset}: {message}")


def read_varint(data: bytes | memoryview, pos: int, base: int = 0) -> tuple[int, int]:
    """The varint at `pos` and the position after it (errors at offsets from `base`)."""
    result = shift = 0
    start = pos
    while True:
        if pos >= len(data):
            raise WireError(base + start, "varint runs past the end (truncated?)")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return _fits(result, base + start), pos
        shift += 7
        if shift >= 70:
            raise WireError(base + start, "varint longer than 10 bytes")


def _fits(value: int, at: int) -> int:
    if value >> 64:
        raise WireError(at, f"varint {value} is past 2^64-1")
    return value


def key(value: int, at: int) -> tuple[int, int]:
    """(field number, wire type) of a field's key; what no protobuf holds is a WireError."""
    number, wire = value >> 3, value & 7
    if number == 0:
        raise WireError(at, "field number 0 (not a protobuf message)")
    if number > MAX_FIELD:
        raise WireError(at, f"field number {number} is past protobuf's largest, 2^29-1")
    if wire in (SGROUP, EGROUP):
        raise WireError(at, f"field {number} has wire type {wire} (groups are not used)")
    if wire > I32:
        raise WireError(at, f"field {number} has wire type {wire}, which protobuf does not have")
    return number, wire


def fields(data: bytes | memoryview, base: int = 0) -> Iterator[tuple[int, int, int, int]]:
    """(field number, wire type, start, end) of each field: for LEN fields start..end is
    the payload, for the others the encoded value. Offsets count from `base`."""
    pos, n = 0, len(data)
    while pos < n:
        at = pos
        value, pos = read_varint(data, pos, base)
        number, wire = key(value, base + at)
        if wire == VARINT:
            _, end = read_varint(data, pos, base)
        elif wire == I64:
            end = pos + 8
        elif wire == I32:
            end = pos + 4
        else:
            length, pos = read_varint(data, pos, base)
            end = pos + length
        if end > n:
            raise WireError(
                base + at,
                f"field {number} needs {end - pos} bytes but {n - pos} remain (truncated?)",
            )
        yield number, wire, pos, end
        pos = end


def check_message(data: bytes | memoryview, expected: dict[int, int], base: int = 0) -> None:
    """Walk the top level: every field must be well formed, and the fields in `expected`
    (number -> wire type) must have that wire type, as the message declares them."""
    for number, wire, start, _ in fields(data, base):
        want = expected.get(number)
        if want is not None and wire != want:
            raise WireError(
                base + start,
                f"field {number} has wire type {wire}, expected {want}",
            )


def stream_varint(f: BinaryIO, offset: int) -> tuple[int, int] | None:
    """Read a varint from a stream at `offset`; None at a clean end of stream."""
    result = shift = 0
    pos = offset
    while True:
        b = f.read(1)
        if not b:
            if pos == offset:
                return None
            raise WireError(offset, "varint runs past the end of the file (truncated?)")
        pos += 1
        result |= (b[0] & 0x7F) << shift
        if not b[0] & 0x80:
            return _fits(result, offset), pos
        shift += 7
        if shift >= 70:
            raise WireError(offset, "varint longer than 10 bytes")


def encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def locate(data: bytes | memoryview, descriptor, path: str = "", base: int = 0) -> str | None:
    """The innermost field of the message `descriptor` that protobuf cannot parse: its
    path (`hlo_module.computations[2].instructions[17].shape`) and what is wrong at which
    byte; None when the walk finds nothing wrong. A field whose wire type is not the
    declared one is an unknown field to protobuf, and is skipped here too."""
    seen: dict[int, int] = {}
    try:
        for number, wire, start, end in fields(data, base):
            fd = descriptor.fields_by_number.get(number)
            if fd is None or wire != LEN:
                continue
            name = fd.name
            if is_repeated(fd):
                seen[number] = seen.get(number, -1) + 1
                name = f"{name}[{seen[number]}]"
            inner = f"{path}.{name}" if path else name
            payload = data[start:end]
            if fd.type == fd.TYPE_MESSAGE:
                found = locate(payload, fd.message_type, inner, base + start)
                if found:
                    return found
            elif fd.type == fd.TYPE_STRING:
                try:
                    bytes(payload).decode("utf-8")
                except UnicodeDecodeError as exc:
                    return (
                        f"{inner}: at byte {base + start + exc.start}: a string that is not UTF-8"
                    )
            elif is_repeated(fd) and fd.type != fd.TYPE_BYTES:
                found = _packed(payload, fd, inner, base + start)
                if found:
                    return found
    except WireError as exc:
        return f"{path or 'the message'}: {exc}"
    return None


def is_repeated(fd) -> bool:
    """protobuf 6 says is_repeated; older ones, label (since removed)."""
    if hasattr(fd, "is_repeated"):
        return fd.is_repeated
    return fd.label == fd.LABEL_REPEATED


def _packed(payload: bytes | memoryview, fd, path: str, base: int) -> str | None:
    """What is wrong with a packed repeated number field, if anything."""
    width = {fd.TYPE_DOUBLE: 8, fd.TYPE_FIXED64: 8, fd.TYPE_SFIXED64: 8}.get(fd.type)
    width = width or {fd.TYPE_FLOAT: 4, fd.TYPE_FIXED32: 4, fd.TYPE_SFIXED32: 4}.get(fd.type)
    if width:
        if len(payload) % width:
            return f"{path}: at byte {base}: {len(payload)} bytes of packed {width}-byte numbers"
        return None
    pos = 0
    try:
        while pos < len(payload):
            _, pos = read_varint(payload, pos, base)
    except WireError as exc:
        return f"{path}: {exc}"
    return None
