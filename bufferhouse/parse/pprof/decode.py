"""Read a device memory profile (gzipped pprof `Profile`) into a Snapshot, or fail located.

Every damage names the file, the byte offset and what was expected: a gzip
stream cut short or corrupt (offset in the compressed file), a message that
is not a Profile (offset in the uncompressed message, from a walk of the wire
format), a Profile of another kind (a CPU profile), or absurd contents (a
negative size, an index into the string table past its end, a sample that
names no location). Nothing of a damaged profile is kept.
"""

from __future__ import annotations

import hashlib
import zlib

from bufferhouse.errors import ParseError
from bufferhouse.parse.pprof.snapshot import Frame, LiveSample, Snapshot
from bufferhouse.parse.proto import profile_pb2, wire
from bufferhouse.parse.reader import Inflated, check_inflation, describe

GZIP_MAGIC = b"\x1f\x8b"
#: The sample types of a memory profile, in the order jax writes them.
COUNT_TYPE, BYTES_TYPE = "allocations/count", "space/bytes"
#: Profile's top-level fields read and their wire types (repeated varints aside).
_PROFILE_FIELDS = {1: wire.LEN, 2: wire.LEN, 4: wire.LEN, 5: wire.LEN, 6: wire.LEN, 9: wire.VARINT}
#: More than this in one sample is no device's memory: 1 EiB.
ABSURD_BYTES = 1 << 60
_CHUNK = 1 << 20


class NotMemoryProfile(ParseError):
    """A well-formed pprof profile of another kind (CPU, Go heap): not a snapshot."""


def gunzip(data: bytes, path: str, limit: int | None = None) -> bytes:
    """The uncompressed bytes of a gzip file; damage is a ParseError at the compressed offset.

    Inflated a block at a time (never more than _CHUNK from one call), and no further
    than the bound every gzip reader keeps (reader.inflation_bound) or `limit`."""
    if data[:2] != GZIP_MAGIC:
        raise ParseError(
            path, 0, "not a device memory profile: expected gzip data (bytes 1f 8b) at byte 0"
        )
    inflate = zlib.decompressobj(wbits=31)
    out, total, at = [], 0, 0
    try:
        while not inflate.eof:
            if inflate.unconsumed_tail:
                piece = inflate.decompress(inflate.unconsumed_tail, _CHUNK)
            elif at < len(data):
                piece = inflate.decompress(data[at : at + _CHUNK], _CHUNK)
                at += _CHUNK
            else:
                break
            total += len(piece)
            if limit is not None and total > limit:
                raise ParseError(path, 0, f"more than --max-bytes {limit} bytes; skipped")
            check_inflation(total, len(data))
            out.append(piece)
    except Inflated as exc:
        raise ParseError(path, 0, f"not a device memory profile: {describe(exc)}") from None
    except zlib.error as exc:
        consumed = min(at, len(data)) - len(inflate.unconsumed_tail)
        raise ParseError(
            path, 0, f"corrupt gzip data near byte {consumed} of {len(data)}: {exc}"
        ) from None
    if not inflate.eof:
        raise ParseError(
            path,
            0,
            f"gzip stream cut short at byte {len(data)} (after {total} uncompressed bytes):"
            " expected more compressed data and the gzip trailer",
        )
    return b"".join(out)


def content_hash(message: bytes) -> str:
    return hashlib.sha256(b"pprof\0" + message).hexdigest()


def decode_profile(message: bytes, path: str) -> profile_pb2.Profile:
    """The Profile message; damage is a ParseError with the offset where the walk broke."""
    try:
        wire.check_message(message, _PROFILE_FIELDS)
    except wire.WireError as exc:
        raise ParseError(
            path, 0, f"not a pprof Profile: {exc} (offset in the uncompressed message)"
        ) from None
    profile = profile_pb2.Profile()
    try:
        profile.ParseFromString(message)
    except wire.DECODE_ERRORS as exc:
        raise ParseError(
            path, 0, f"not a pprof Profile: {_damaged_field(message)}: {exc}"
        ) from None
    return profile


def _damaged_field(message: bytes) -> str:
    names = {1: "sample_type", 2: "sample", 4: "location", 5: "function", 6: "string_table"}
    kinds = {
        1: profile_pb2.ValueType,
        2: profile_pb2.Sample,
        4: profile_pb2.Location,
        5: profile_pb2.Function,
    }
    for number, _, start, end in wire.fields(message):
        if number == 6:
            try:
                bytes(message[start:end]).decode("utf-8")
            except UnicodeDecodeError:
                return f"field 6 (string_table) at bytes {start}..{end} is not UTF-8"
        elif number in kinds:
            try:
                kinds[number]().ParseFromString(message[start:end])
            except wire.DECODE_ERRORS:
                return f"field {number} ({names[number]}) at bytes {start}..{end}"
    return "a nested field"


def _offsets(message: bytes, number: int) -> list[int]:
    """Uncompressed byte offset of each occurrence of a top-level field (for messages)."""
    return [start for n, _, start, _ in wire.fields(message) if n == number]


class _Reader:
    """Resolves a Profile's cross-references, each checked, into a Snapshot."""

    def __init__(self, profile: profile_pb2.Profile, message: bytes, path: str) -> None:
        self.profile, self.message, self.path = profile, message, path
        self.strings = list(profile.string_table)
        if self.strings[:1] != [""]:
            at = (_offsets(message, 6) or [0])[0]
            raise ParseError(
                path,
                0,
                f"at byte {at} of the uncompressed Profile: string_table[0] must be the empty"
                " string (pprof rule)",
            )

    def fail(self, field: int, index: int, what: str) -> ParseError:
        offsets = _offsets(self.message, field)
        at = offsets[index] if index < len(offsets) else 0
        return ParseError(self.path, 0, f"at byte {at} of the uncompressed Profile: {what}")

    def string(self, index: int, field: int, at: int, what: str) -> str:
        if not 0 <= index < len(self.strings):
            raise self.fail(
                field,
                at,
                f"{what} is string {index}, past the string table's {len(self.strings)} entries",
            )
        return self.strings[index]

    def sample_types(self) -> tuple[str, ...]:
        types = tuple(
            f"{self.string(t.type, 1, i, 'sample_type')}/{self.string(t.unit, 1, i, 'its unit')}"
            for i, t in enumerate(self.profile.sample_type)
        )
        if COUNT_TYPE not in types or BYTES_TYPE not in types:
            raise NotMemoryProfile(
                self.path,
                0,
                f"a pprof profile but not a device memory profile: sample types"
                f" {', '.join(types) or '(none)'}; expected {COUNT_TYPE} and {BYTES_TYPE}"
                " (as jax.profiler.save_device_memory_profile writes)",
            )
        return types

    def frames(self) -> dict[int, tuple[Frame, ...]]:
        """Location id -> its frames (inlined first, as pprof lists them)."""
        functions = {}
        for i, f in enumerate(self.profile.function):
            functions[f.id] = (
                self.string(f.name, 5, i, f"function {f.id}'s name"),
                self.string(f.filename, 5, i, f"function {f.id}'s file name"),
            )
        locations = {}
        for i, loc in enumerate(self.profile.location):
            frames = []
            for line in loc.line:
                if line.function_id not in functions:
                    raise self.fail(
                        4,
                        i,
                        f"location {loc.id} names function {line.function_id}, which no"
                        " function entry has",
                    )
                if not 0 <= line.line < 1 << 31:
                    raise self.fail(4, i, f"location {loc.id} has line number {line.line}")
                name, file = functions[line.function_id]
                frames.append(Frame(name, file, line.line))
            locations[loc.id] = tuple(frames)
        return locations

    def read(self, content: str) -> Snapshot:
        types = self.sample_types()
        n_count, n_bytes = types.index(COUNT_TYPE), types.index(BYTES_TYPE)
        locations = self.frames()
        stacks: dict[tuple[Frame, ...], int] = {}
        samples = []
        for i, s in enumerate(self.profile.sample):
            if len(s.value) != len(types):
                raise self.fail(
                    2,
                    i,
                    f"sample {i} has {len(s.value)} values; expected {len(types)},"
                    " one per sample type",
                )
            count, size = s.value[n_count], s.value[n_bytes]
            if not (0 <= count < ABSURD_BYTES and 0 <= size < ABSURD_BYTES):
                raise self.fail(
                    2,
                    i,
                    f"sample {i} has count {count} and bytes {size}; expected"
                    f" counts and sizes from 0 to {ABSURD_BYTES - 1}",
                )
            frames: list[Frame] = []
            for loc in s.location_id:
                if loc not in locations:
                    raise self.fail(2, i, f"sample {i} names location {loc}, which is not listed")
                frames += locations[loc]
            stack = stacks.setdefault(tuple(frames), len(stacks)) if frames else None
            samples.append(self.sample(s, i, count, size, stack))
        time = self.profile.time_nanos
        return Snapshot(
            self.path,
            content,
            len(self.message),
            time or None,
            types,
            samples,
            list(stacks),
        )

    def sample(self, s, i: int, count: int, size: int, stack: int | None) -> LiveSample:
        kind, device, other = None, None, []
        for label in s.label:
            key = self.string(label.key, 2, i, f"sample {i}'s label key")
            if label.str:
                value = self.string(label.str, 2, i, f"sample {i}'s label {key}")
            else:
                unit = self.string(label.num_unit, 2, i, f"sample {i}'s label unit")
                value = f"{label.num}{unit}" if unit else str(label.num)
            if key == "kind" and kind is None:
                kind = value
            elif key == "device" and device is None:
                device = value
            else:
                other.append(f"{key}={value}")
        if kind is None:
            raise self.fail(
                2, i, f"sample {i} has no kind label; expected kind=buffer or kind=executable"
            )
        return LiveSample(kind, device, count, size, stack, tuple(other))


def read_snapshot(data: bytes, path: str, limit: int | None = None) -> Snapshot:
    """The Snapshot of a gzipped profile's bytes (raises ParseError, located)."""
    message = gunzip(data, path, limit)
    profile = decode_profile(message, path)
    return _Reader(profile, message, path).read(content_hash(message))
