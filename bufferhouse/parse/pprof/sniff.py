"""Is this file a pprof Profile? Decided by its content, in whatever order its fields come.

protobuf lets a writer put a message's fields in any order, so the first field
says nothing for sure: jax writes `sample_type` first, another writer (or a
profile merged by a tool) may put the string table or `time_nanos` first. The
rule (`is_profile`): the gzip data is a walk of well-formed top-level fields, each
known field of Profile with the wire type Profile declares, holding a
`sample_type` (field 1) that is a ValueType (varint fields 1 and 2 only) and a
`string_table` (field 6). The walk stops as soon as both are seen, or at the
first field that breaks the rule: an HloProto stops at its first field (field 1
is a whole HloModuleProto, no ValueType), a text file at its first byte (its
first field has the wrong wire type).
"""

from __future__ import annotations

from typing import BinaryIO

from bufferhouse.parse.pprof.decode import GZIP_MAGIC
from bufferhouse.parse.proto import wire
from bufferhouse.parse.reader import READ_ERRORS, open_gzip

#: Names a device memory profile usually has. A `.prof` or `.pprof` file of gzip data
#: that fails the sniff is still read (and fails, located): a damaged profile is an
#: error that names it, never a file passed over in silence. One that is not gzip is
#: someone else's (cProfile writes `.prof` files too), read only when given by name;
#: so is a `.pb.gz`, a name other protos have too.
PROFILE_SUFFIXES = (".prof", ".pprof", ".pb.gz")
_READ_WHEN_GZIP = (".prof", ".pprof")

#: Profile's top-level fields and their wire types (pprof's profile.proto): the
#: messages and strings, then the int64s; comment (13) is a repeated int64, packed or not.
_WIRE = {n: wire.LEN for n in (1, 2, 3, 4, 5, 6, 11)} | {
    n: wire.VARINT for n in (7, 8, 9, 10, 12, 14)
}
_SAMPLE_TYPE, _STRING_TABLE = 1, 6
#: A ValueType is two varints: more than this is no ValueType.
_VALUE_TYPE_MAX = 22


def looks_like_profile(path: str, explicit: bool = False) -> bool:
    """Whether discovery reads `path` as a device memory profile: gzip data that is a
    Profile by content (is_profile), or a file named like one (PROFILE_SUFFIXES) that
    is gzip, or given by name."""
    named = path.endswith(PROFILE_SUFFIXES)
    try:
        with open(path, "rb") as f:
            if f.read(2) != GZIP_MAGIC:
                return named and explicit
        if named and (explicit or path.endswith(_READ_WHEN_GZIP)):
            return True
        with open_gzip(path) as f:
            return is_profile(f)
    except READ_ERRORS:
        return named  # read, so that the damage is reported


def is_profile(f: BinaryIO) -> bool:
    """Walk the top-level fields of the (inflated) stream `f` by the rule above."""
    try:
        return _walk(f)
    except wire.WireError:
        return False


def _walk(f: BinaryIO) -> bool:
    pos, seen_type, seen_strings = 0, False, False
    while not (seen_type and seen_strings):
        got = wire.stream_varint(f, pos)
        if got is None:
            return False  # the end, without both
        at = pos
        value, pos = got
        number, kind = wire.key(value, at)
        if number in _WIRE and kind != _WIRE[number] and number != 13:
            return False
        if kind == wire.VARINT:
            got = wire.stream_varint(f, pos)
            if got is None:
                return False
            pos = got[1]
            continue
        if kind in (wire.I64, wire.I32):
            n = 8 if kind == wire.I64 else 4
        else:
            got = wire.stream_varint(f, pos)
            if got is None:
                return False
            n, pos = got
        if number == _SAMPLE_TYPE:
            if n > _VALUE_TYPE_MAX or not _is_value_type(f.read(n), n):
                return False
            seen_type = True
        else:
            seen_strings |= number == _STRING_TABLE
            if not _skip(f, n):
                return False
        pos += n
    return True


def _is_value_type(payload: bytes, n: int) -> bool:
    if len(payload) != n:
        return False
    try:
        found = [(k, w) for k, w, _, _ in wire.fields(payload)]
    except wire.WireError:
        return False
    return all(k in (1, 2) and w == wire.VARINT for k, w in found)


def _skip(f: BinaryIO, n: int) -> bool:
    """Read past `n` bytes, a block at a time; False if the stream ends first."""
    while n:
        block = f.read(min(n, 1 << 20))
        if not block:
            return False
        n -= len(block)
    return True
