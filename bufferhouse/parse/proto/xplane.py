"""XProf profiles (`*.xplane.pb`, an XSpace): the HloProto of every program they saw.

A profile can be gigabytes, nearly all of it trace events (XPlane.lines). The
XSpace is walked here at the wire level, from a stream: each plane's header
fields are read, `lines` (field 3) is skipped with a seek (a forward read
through a .gz), and only the rest of the plane is handed to protobuf. So memory
holds one plane's metadata at a time, never its events. The HloProtos are in
the event metadata of the `/host:metadata` plane (on every backend): one entry
per program, named `<module>(<program_id>)`, with a bytes stat named
`Hlo Proto`.

An ingest walks a profile twice, however many programs it holds: discovery
lists the programs (list_programs: the whole file, for the device planes that
name the backend), then read_programs reads all their HloProtos in one pass
that ends with the last plane holding one (jax writes `/host:metadata` first,
so that pass is short). One pass per program decompressed a `.gz` from its
start N+1 times.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import BinaryIO

from bufferhouse.errors import DumpError, ParseError
from bufferhouse.parse.proto import wire, xplane_pb2
from bufferhouse.parse.reader import RATIO, READ_ERRORS, describe, inflation_bound, open_dump

__all__ = ["Program", "list_programs", "missing_program", "read_program", "read_programs"]

_PLANES = 1  # XSpace.planes
_LINES = 3  # XPlane.lines: skipped
_HLO_STAT = "Hlo Proto"
#: The wire type of each field the walk knows: XSpace's planes, errors, warnings and
#: hostnames; XPlane's id, name, lines, metadata maps and stats. Any other is refused.
_XSPACE = {1: wire.LEN, 2: wire.LEN, 3: wire.LEN, 4: wire.LEN}
_XPLANE = {1: wire.VARINT, 2: wire.LEN, 3: wire.LEN, 4: wire.LEN, 5: wire.LEN, 6: wire.LEN}


@dataclass(frozen=True)
class Program:
    """One program of a profile: its event-metadata name and where its plane starts
    (uncompressed byte offset of the plane's payload)."""

    name: str
    offset: int
    backend: str  # cpu, gpu or tpu: from the profile's device planes


class _Stream:
    """A forward-only reader that knows its offset (a .gz cannot tell() cheaply)."""

    def __init__(self, f: BinaryIO, path: str) -> None:
        self.f, self.path, self.pos = f, path, 0
        #: The file's size when it can seek (not a .gz): no length may run past it.
        self.size = None
        #: The most one plane's metadata (all but `lines`) may take in memory: the file's
        #: size, or for a .gz what its size allows (reader.inflation_bound, the bound
        #: open_dump keeps on the whole stream too).
        self.limit = 1 << 34
        if f.seekable():
            self.size = self.limit = f.seek(0, 2)
            f.seek(0)
        elif path.endswith(".gz") and os.path.isfile(path):
            self.limit = inflation_bound(os.path.getsize(path))

    def length(self, at: int, number: int, what: str) -> int:
        """A LEN field's length, which must fit in what is left of the file."""
        n = self.varint()
        if n is None:
            raise wire.WireError(at, "file ends in a field header (truncated?)")
        if self.size is not None and n > self.size - self.pos:
            raise wire.WireError(
                at,
                f"{what} field {number} is {n} bytes long but {self.size - self.pos} "
                "remain in the file (corrupt length?)",
            )
        return n

    def read(self, n: int) -> bytes:
        """`n` bytes, read a block at a time: a corrupt length costs no more memory than
        the file holds."""
        blocks, want = [], n
        while want:
            block = self.f.read(min(want, 1 << 20))
            if not block:
                raise wire.WireError(self.pos, f"file ends {want} bytes early (truncated?)")
            blocks.append(block)
            self.pos += len(block)
            want -= len(block)
        return b"".join(blocks)

    def skip(self, n: int) -> None:
        if self.size is not None:
            if n > self.size - self.pos:
                raise wire.WireError(
                    self.pos, f"file ends {n - (self.size - self.pos)} bytes early (truncated?)"
                )
            self.f.seek(n, 1)
            self.pos += n
            return
        while n:  # through a .gz: read and drop, a block at a time
            block = self.f.read(min(n, 1 << 20))
            if not block:
                raise wire.WireError(self.pos, f"file ends {n} bytes early (truncated?)")
            self.pos += len(block)
            n -= len(block)

    def varint(self) -> int | None:
        got = wire.stream_varint(self.f, self.pos)
        if got is None:
            return None
        value, self.pos = got
        return value

    def seek_to(self, offset: int) -> None:
        if self.size is not None:
            self.f.seek(offset)
            self.pos = offset
        else:
            self.skip(offset - self.pos)


def _plane_header(s: _Stream, length: int) -> bytes:
    """The plane's fields other than `lines`, re-encoded as an XPlane without lines."""
    end = s.pos + length
    kept = bytearray()
    while s.pos < end:
        at = s.pos
        key = s.varint()
        if key is None:
            raise wire.WireError(at, "file ends inside a plane (truncated?)")
        number, kind = _known(key, at, _XPLANE, "XPlane")
        if kind == wire.LEN:
            n = s.length(at, number, "XPlane")
            if s.pos + n > end:
                raise wire.WireError(at, f"XPlane field {number} runs past its plane")
            if number == _LINES:
                s.skip(n)
                continue
            if len(kept) + n > s.limit:
                raise wire.WireError(
                    at,
                    f"XPlane metadata past {s.limit} bytes, more than the file can hold "
                    f"({RATIO} times its size for a .gz): corrupt length or a gzip bomb?",
                )
            kept += wire.encode_varint(key) + wire.encode_varint(n) + s.read(n)
        elif kind == wire.VARINT:
            value = s.varint()
            if value is None:
                raise wire.WireError(at, "file ends inside a plane (truncated?)")
            kept += wire.encode_varint(key) + wire.encode_varint(value)
        else:
            kept += wire.encode_varint(key) + s.read(8 if kind == wire.I64 else 4)
    if s.pos != end:
        raise wire.WireError(s.pos, "a field runs past the end of its plane")
    return bytes(kept)


def _known(key: int, at: int, declared: dict[int, int], what: str) -> tuple[int, int]:
    """(field number, wire type) of a key: a valid one, of the declared type if declared."""
    number, kind = wire.key(key, at)
    want = declared.get(number, kind)
    if kind != want:
        raise wire.WireError(at, f"{what} field {number} has wire type {kind}, expected {want}")
    return number, kind


def _planes(f: BinaryIO, path: str, target: int = 0):
    """(payload offset, XPlane without lines) of each plane, from the stream; planes
    whose payload starts before `target` are skipped whole."""
    s = _Stream(f, path)
    while True:
        at = s.pos
        key = s.varint()
        if key is None:
            return
        number, kind = _known(key, at, _XSPACE, "not an XSpace:")
        if kind == wire.VARINT:
            s.varint()
            continue
        if kind in (wire.I64, wire.I32):
            s.skip(8 if kind == wire.I64 else 4)
            continue
        n = s.length(at, number, "XSpace")
        if number != _PLANES or s.pos < target:
            s.skip(n)  # errors, warnings, hostnames; planes before the one wanted
            continue
        offset = s.pos
        header = _plane_header(s, n)
        plane = xplane_pb2.XPlane()
        try:
            plane.ParseFromString(header)
        except wire.DECODE_ERRORS as exc:
            raise wire.WireError(offset, f"XPlane metadata does not parse: {exc}") from None
        yield offset, plane


def _hlo_stats(plane: xplane_pb2.XPlane):
    """(program name, HloProto bytes) of each event metadata with an `Hlo Proto` stat."""
    ids = [k for k, m in plane.stat_metadata.items() if m.name == _HLO_STAT]
    if not ids:
        return
    for key in sorted(plane.event_metadata):
        meta = plane.event_metadata[key]
        for stat in meta.stats:
            if stat.metadata_id in ids and stat.WhichOneof("value") == "bytes_value":
                yield meta.name or meta.display_name or str(key), stat.bytes_value


def _wrap(path: str, exc: BaseException) -> DumpError:
    if isinstance(exc, wire.WireError):
        return ParseError(path, 0, f"not a readable XProf profile (XSpace): {exc}")
    return DumpError(path, 0, f"cannot read file: {describe(exc)}")


def list_programs(path: str) -> list[Program]:
    """The programs whose HloProto the profile holds (reads only plane metadata)."""
    found: list[tuple[str, int]] = []
    backend = "cpu"  # a profile with no device plane ran on the host
    try:
        with open_dump(path) as f:
            for offset, plane in _planes(f, path):
                if plane.name.startswith("/device:GPU"):
                    backend = "gpu"
                elif plane.name.startswith("/device:TPU"):
                    backend = "tpu"
                found.extend((name, offset) for name, _ in _hlo_stats(plane))
    except (wire.WireError, *READ_ERRORS) as exc:
        raise _wrap(path, exc) from None
    return [Program(name, offset, backend) for name, offset in found]


def read_programs(path: str, wanted: Iterable[tuple[str, int]]) -> dict[tuple[str, int], bytes]:
    """The serialized HloProto of each (program, plane offset) of `wanted` (as
    list_programs found them), in one pass: from the first of their planes to the last,
    nothing before them read but to skip it, nothing after them read at all. A program
    not found is missing from the result (the file changed since it was listed)."""
    by_plane: dict[int, set[str]] = {}
    for program, offset in wanted:
        by_plane.setdefault(offset, set()).add(program)
    found: dict[tuple[str, int], bytes] = {}
    if not by_plane:
        return found
    first, last = min(by_plane), max(by_plane)
    try:
        with open_dump(path) as f:
            for offset, plane in _planes(f, path, first):
                names = by_plane.get(offset, ())
                for name, data in _hlo_stats(plane):
                    if name in names:
                        found.setdefault((name, offset), data)
                if offset >= last:
                    break
    except (wire.WireError, *READ_ERRORS) as exc:
        raise _wrap(path, exc) from None
    return found


def read_program(path: str, program: str, offset: int) -> bytes:
    """The serialized HloProto of `program`, from the plane whose payload starts at
    `offset` (as list_programs found it); reads nothing before it but to skip it."""
    data = read_programs(path, [(program, offset)]).get((program, offset))
    if data is None:
        raise missing_program(path, program)
    return data


def missing_program(path: str, program: str) -> ParseError:
    return ParseError(path, 0, f"program {program!r} not found in the profile (file changed?)")
