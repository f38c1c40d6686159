"""The protobuf wire format at the top level of a message, walked by hand.

protobuf's parser says only "Error parsing message" about a damaged file; this
walk names the byte offset and the field where it breaks, so a truncated
`.hlo.pb` gets a message a user can act on. xplane.py uses it to read an XSpace
from a stream, seeking past the fields it does not want (the trace events).
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


class WireError(ValueError):
    """Bytes that are not a protobuf message; `offset` is where the walk stopped."""

    def __init__(self, offset: int, message: str) -> None:
        self.offset = offset
        super().__init__(f"at byte {offset}: {message}")


def read_varint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    """The varint at `pos` and the position after it."""
    result = shift = 0
    start = pos
    while True:
        if pos >= len(data):
            raise WireError(start, "varint runs past the end (truncated?)")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise WireError(start, "varint longer than 10 bytes")


def fields(data: bytes | memoryview, base: int = 0) -> Iterator[tuple[int, int, int, int]]:
    """(field number, wire type, start, end) of each field: for LEN fields start..end is
    the payload, for the others the encoded value. Offsets count from `base`."""
    pos, n = 0, len(data)
    while pos < n:
        at = pos
        key, pos = read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise WireError(base + at, "field number 0 (not a protobuf message)")
        if wire == VARINT:
            _, end = read_varint(data, pos)
        elif wire == I64:
            end = pos + 8
        elif wire == I32:
            end = pos + 4
        elif wire == LEN:
            length, pos = read_varint(data, pos)
            end = pos + length
        else:
            raise WireError(base + at, f"field {number} has wire type {wire} (groups are not used)")
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
            return result, pos
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
