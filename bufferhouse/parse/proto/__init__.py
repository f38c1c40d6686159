"""XLA's protobuf forms of memory data: `.hlo.pb` dumps and XProf profiles.

The messages are declared in hlo.proto / xplane.proto beside this file (only the
fields read, with XLA's field numbers; `python -m bufferhouse.parse.proto.regen`
rebuilds the *_pb2 modules). decode.py turns one HloProto into the tables the
text path fills, with printing.py (shapes as XLA prints them), instructions.py
(instructions and program order) and trace.py (heap_events, XLA's peak);
xplane.py finds the HloProtos in a profile
without reading its trace events; `merge_text_and_proto` makes one module of a
text dump and the proto of the same compile. Each gives a Reading; parse/derive
computes the figures.
"""

from __future__ import annotations

import dataclasses
import hashlib

import pyarrow as pa
import pyarrow.compute as pc

from bufferhouse.errors import DumpError, ParseError
from bufferhouse.parse.model import Reading
from bufferhouse.parse.proto import wire
from bufferhouse.parse.proto.decode import NoBufferAssignment, decode_hlo_proto, parse_hlo_proto
from bufferhouse.parse.proto.tables import ColumnOverflow
from bufferhouse.parse.proto.unknown import unknown_field_warnings
from bufferhouse.parse.reader import (
    CHUNK,
    FLOOR,
    RATIO,
    READ_ERRORS,
    Inflated,
    describe,
    open_dump,
)

__all__ = [
    "FLOOR",
    "RATIO",
    "NoBufferAssignment",
    "combine_text_and_proto",
    "different_compiles",
    "parse_proto_file",
    "parse_xplane_program",
    "read_proto_bytes",
    "xplane_content_hash",
]


def read_proto_bytes(path: str, max_bytes: int | None = None) -> bytes:
    """The whole (decompressed) file; a read error is a DumpError naming it.

    What is read is bounded: a first field no protobuf can hold (a file of zeros)
    stops the read at its first block, and a .gz at the one bound every gzip reader
    keeps (reader.inflation_bound: RATIO times its size).
    """
    try:
        with open_dump(path) as f:
            chunks, total = [], 0
            while chunk := f.read(CHUNK):
                if not total:
                    _first_key(path, chunk)
                total += len(chunk)
                if max_bytes is not None and total > max_bytes:
                    raise DumpError(path, 0, f"more than --max-bytes {max_bytes} bytes; skipped")
                chunks.append(chunk)
    except Inflated as exc:
        raise ParseError(path, 0, f"not an HloProto: {describe(exc)}") from None
    except READ_ERRORS as exc:
        raise DumpError(path, 0, f"cannot read file: {describe(exc)}") from None
    return b"".join(chunks)


def _first_key(path: str, chunk: bytes) -> None:
    """The file's first field key must be one protobuf can hold (zeros are not)."""
    try:
        wire.key(wire.read_varint(chunk[:10], 0)[0], 0)
    except wire.WireError as exc:
        if "runs past the end" not in str(exc):  # a key cut by a short file: decode says so
            raise ParseError(path, 0, f"not a readable HloProto: {exc}") from None


def parse_proto_file(path: str, max_bytes: int | None = None) -> Reading:
    """One module from an `.hlo.pb` (raises NoBufferAssignment for one without)."""
    data = read_proto_bytes(path, max_bytes)
    return _parse(decode_hlo_proto(data, path), path)


def xplane_content_hash(program: str, data: bytes) -> str:
    """The content hash of a profile's program: its name and HloProto bytes."""
    h = hashlib.sha256()
    h.update(b"xplane\0" + program.encode() + b"\0")
    h.update(data)
    return h.hexdigest()


def parse_xplane_program(path: str, program: str, data: bytes) -> Reading:
    """One program of a profile, from its HloProto `data` (xplane.read_programs)."""
    where = f"{path}#{program}"
    return _parse(decode_hlo_proto(data, where), where, "xplane")


def _parse(proto, where: str, form: str = "proto") -> Reading:
    """parse_hlo_proto, a number too large for its warehouse column a ParseError, and a
    warning for each field a newer XLA added (unknown.py)."""
    try:
        reading = parse_hlo_proto(proto, where, form)
    except ColumnOverflow as exc:
        raise ParseError(where, 0, f"a number does not fit its warehouse column: {exc}") from None
    reading.warnings.extend(unknown_field_warnings(proto, where))
    return reading


def different_compiles(text: Reading, proto: Reading) -> str | None:
    """Why a text dump and a proto side by side are not one compile, or None.

    They are one compile when their assignments agree: the same values (id,
    instruction, ShapeIndex), each in the same allocation, and as many allocations. A
    size or offset that differs beside that is a disagreement of one compile's forms
    (a warning, combine_text_and_proto); another program renamed to the same stem
    differs in its values or where they sit."""
    for table, keys in (
        ("hlo_values", ["value_id", "instruction", "shape_index"]),
        ("assignments", ["value_id", "allocation_index"]),
        ("allocations", ["allocation_index"]),
    ):
        diff = _first_difference(
            text.tables[table].select(keys), proto.tables[table].select(keys), keys
        )
        if diff:
            return f"{table}: {diff}"
    return None


def combine_text_and_proto(text: Reading, proto: Reading, proto_path: str) -> Reading:
    """One reading of a compile from its text dump and its proto side by side.

    The text's tables are kept (they carry more: uses, live ranges, the peak list);
    the proto adds the heap-simulator trace and the shardings. The tables both carry are compared, and
    each disagreement becomes a warning naming the proto file; the proto's own warnings
    (a newer XLA's fields) are kept.
    """
    warnings = [*text.warnings, *proto.warnings]
    checks = {
        "allocations": (
            ["allocation_index"],
            [
                "size",
                "color",
                "parameter_number",
                "is_parameter",
                "is_constant",
                "is_thread_local",
                "is_maybe_live_out",
            ],
        ),
        "assignments": (["value_id", "allocation_index"], ["byte_offset", "size"]),
        "hlo_values": (["value_id"], ["instruction", "shape_index", "color", "shape"]),
    }
    for table, (keys, columns) in checks.items():
        a, b = text.tables[table], proto.tables[table]
        diff = _first_difference(a.select(keys + columns), b.select(keys + columns), keys)
        if diff:
            warnings.append(DumpError(proto_path, 0, f"text and proto disagree on {table}: {diff}"))
    return Reading(
        tables={
            **text.tables,
            "heap_events": proto.tables["heap_events"],
            "shardings": proto.tables["shardings"],
        },
        facts=dataclasses.replace(text.facts, module_name=proto.facts.module_name),
        form="text+proto",
        warnings=warnings,
        sections=[*text.sections, *(s for s in proto.sections if s not in text.sections)],
        features=set(text.features),
    )


def _first_difference(a: pa.Table, b: pa.Table, keys: list[str]) -> str | None:
    """The first row (by key) that differs between two tables, described; None if equal."""
    if a.num_rows != b.num_rows:
        return f"{a.num_rows} rows in the text, {b.num_rows} in the proto"
    order = [(k, "ascending") for k in keys]
    a, b = a.sort_by(order), b.sort_by(order)
    for name in a.column_names:
        x, y = a[name], b[name].cast(a[name].type)
        same = pc.fill_null(pc.equal(x, y), False)
        both_null = pc.and_(pc.is_null(x), pc.is_null(y))
        bad = pc.invert(pc.or_(same, both_null))
        if pc.any(bad).as_py():
            i = pc.index(bad, True).as_py()
            key = ", ".join(f"{k}={a[k][i].as_py()}" for k in keys)
            return f"{name} at {key}: {x[i].as_py()!r} in the text, {y[i].as_py()!r} in the proto"
    return None
