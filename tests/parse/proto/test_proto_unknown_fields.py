"""A field a newer XLA adds to its HloProto: the module loads, a warning names the file,
the field and its bytes, every figure is unchanged; `--strict` refuses it. Fields
today's XLA declares but bufferhouse does not read give no warning."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

import bufferhouse
from bufferhouse.errors import UnknownInput
from bufferhouse.parse.proto import hlo_pb2, wire
from bufferhouse.parse.proto.unknown import XLA_LAST, unknown_field_warnings
from tests.conftest import DATA

PROTO_ONLY = DATA / "proto" / "proto_only" / "while_newton"
FIGURES = (
    "SELECT module_name, heap_peak_bytes, xla_peak_bytes, total_bytes, "
    "(SELECT count(*) FROM allocations), (SELECT count(*) FROM hlo_values), "
    "(SELECT count(*) FROM heap_events) FROM modules"
)


def _field(number: int, payload: bytes) -> bytes:
    return wire.encode_varint(number << 3 | 2) + wire.encode_varint(len(payload)) + payload


def _tree(root: Path, extra: bool) -> Path:
    """The proto-only while_newton module, with two made-up fields when `extra`: 999 in
    the first allocation and 998 (a varint) in every instruction."""
    shutil.copytree(PROTO_ONLY, root)
    if extra:
        (pb,) = root.glob("*after_optimizations.hlo.pb")
        proto = hlo_pb2.HloProto()
        proto.ParseFromString(pb.read_bytes())
        proto.buffer_assignment.buffer_allocations[0].MergeFromString(_field(999, b"numa=1"))
        for comp in proto.hlo_module.computations:
            for ins in comp.instructions:
                ins.MergeFromString(wire.encode_varint(998 << 3) + wire.encode_varint(7))
        pb.write_bytes(proto.SerializeToString())
    return root


def _ingest(root: Path, db: Path, **kw):
    return bufferhouse.ingest([str(root)], db=str(db), jobs=1, **kw)


def test_a_newer_xlas_fields_load_with_a_warning_each(tmp_path):
    plain, new = _tree(tmp_path / "plain", False), _tree(tmp_path / "new", True)
    assert _ingest(plain, tmp_path / "p.duckdb").ok
    report = _ingest(new, tmp_path / "n.duckdb")
    assert report.ok and len(report.loaded) == 1
    with duckdb.connect(str(tmp_path / "n.duckdb"), read_only=True) as con:
        rows = con.execute("SELECT severity, path, message, text FROM diagnostics").fetchall()
        figures = con.execute(FIGURES).fetchall()
    with duckdb.connect(str(tmp_path / "p.duckdb"), read_only=True) as con:
        assert figures == con.execute(FIGURES).fetchall()  # nothing read from the new fields
    # one warning per field, however many instructions carry it
    (pb,) = new.glob("*after_optimizations.hlo.pb")
    assert sorted((r[0], r[1]) for r in rows) == [("warning", str(pb))] * 2
    by_number = {("998" if "field 998" in r[2] else "999"): r for r in rows}
    assert "buffer_assignment.buffer_allocations[0]" in by_number["999"][2]
    assert by_number["999"][3] == "6 bytes: " + b"numa=1".hex(" ")
    assert ".instructions[0]" in by_number["998"][2] and by_number["998"][3] == "7"


def test_strict_refuses_a_newer_xlas_field(tmp_path):
    report = _ingest(_tree(tmp_path / "new", True), tmp_path / "s.duckdb", strict=True)
    (failed,) = report.failed
    assert isinstance(failed.error, UnknownInput)
    assert "--strict" in failed.error.message and "unknown field" in failed.error.message


@pytest.mark.parametrize("number", [XLA_LAST["BufferAllocationProto"], 4])
def test_todays_fields_that_we_do_not_read_give_no_warning(number):
    """Field 13 (the last today's XLA declares) and 4 (one of its fields, not in our
    hlo.proto) in an allocation: known to XLA, no warning."""
    (pb,) = PROTO_ONLY.glob("*after_optimizations.hlo.pb")
    proto = hlo_pb2.HloProto()
    proto.ParseFromString(pb.read_bytes())
    proto.buffer_assignment.buffer_allocations[0].MergeFromString(
        wire.encode_varint(number << 3) + wire.encode_varint(1)
    )
    assert unknown_field_warnings(proto, "x") == []


def test_no_committed_proto_warns():
    """Every real HloProto of tests/data (jax 0.5 to 0.12, CPU, GPU, TPU) is today's."""
    for pb in DATA.rglob("*.hlo.pb"):
        proto = hlo_pb2.HloProto()
        try:
            proto.ParseFromString(pb.read_bytes())
        except Exception:  # the damaged fixtures of other tests
            continue
        assert unknown_field_warnings(proto, str(pb)) == [], pb


def test_text_and_proto_keep_the_protos_warning(tmp_path):
    """Beside its text dump, the proto's new field still gives its warning."""
    root = tmp_path / "both"
    shutil.copytree(DATA / "proto" / "both" / "while_newton", root)
    (pb,) = root.glob("*after_optimizations.hlo.pb")
    proto = hlo_pb2.HloProto()
    proto.ParseFromString(pb.read_bytes())
    proto.buffer_assignment.buffer_allocations[0].MergeFromString(_field(999, b"numa=1"))
    pb.write_bytes(proto.SerializeToString())
    report = _ingest(root, tmp_path / "b.duckdb")
    assert report.ok and len(report.loaded) == 1
    with duckdb.connect(str(tmp_path / "b.duckdb"), read_only=True) as con:
        ((form,),) = con.execute("SELECT source_kind FROM modules").fetchall()
        messages = [m for (m,) in con.execute("SELECT message FROM diagnostics").fetchall()]
    assert form == "text+proto", form
    assert [m for m in messages if "unknown field 999" in m], messages
