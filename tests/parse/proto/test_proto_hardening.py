"""Issue 31, the protobuf readers: what an attack on `.hlo.pb` and `.xplane.pb` found.

Every input is made here from the committed fixtures (tests/data/proto): a proto
edited through hlo_pb2, or bytes cut and patched where the wire format is the
point. Each case ends in a located error for that one file (the field path or
byte offset, and what was expected), the rest of the batch landing, within a
bound on time and bytes read.
"""

from __future__ import annotations

import contextlib
import gzip
import shutil
import signal
import zlib
from pathlib import Path

import duckdb
import pytest

import bufferhouse
from bufferhouse.check import check_warehouse
from bufferhouse.errors import DumpError
from bufferhouse.parse import proto as proto_pkg
from bufferhouse.parse.proto import decode, hlo_pb2, wire, xplane, xplane_pb2
from bufferhouse.parse.proto.wire import encode_varint
from tests.conftest import DATA

PROTO = DATA / "proto"
GOOD = PROTO / "proto_only" / "while_newton"


def _pb(program: str = "donate_sgd") -> bytes:
    return next((PROTO / "proto_only" / program).glob("*after_optimizations.hlo.pb")).read_bytes()


def _proto(program: str = "donate_sgd") -> hlo_pb2.HloProto:
    proto = hlo_pb2.HloProto()
    proto.ParseFromString(_pb(program))
    return proto


@contextlib.contextmanager
def _within(seconds: float):
    """Fail (TimeoutError) instead of hanging when the body runs past `seconds`."""

    def expire(*_):
        raise TimeoutError(f"still running after {seconds} s: a hang")

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _error(proto: hlo_pb2.HloProto) -> str:
    """The ParseError message of decoding and parsing `proto` (it must fail)."""
    where = "bad.hlo.pb"
    with _within(20), pytest.raises(DumpError) as info:
        decode.parse_hlo_proto(decode.decode_hlo_proto(proto.SerializeToString(), where), where)
    assert info.value.path == where
    return info.value.message


def _ingest_one_bad(tmp_path: Path, name: str, data: bytes):
    """A good module beside one bad file: the good one lands, the bad one fails alone,
    and what landed passes `check`."""
    tree = tmp_path / "t"
    shutil.copytree(GOOD, tree / "good")
    (tree / "bad").mkdir()
    (tree / "bad" / name).write_bytes(data)
    db = tmp_path / "w.duckdb"
    with _within(60):
        report = bufferhouse.ingest([tree], db=db, jobs=1)
    assert len(report.loaded) == 1 and len(report.failed) == 1, report.failed
    assert check_warehouse(db).ok
    return report.failed[0].error


def _cycle(proto: hlo_pb2.HloProto) -> tuple[int, int]:
    """Make trace 0 say SHARE_WITH b -> b, then FREE b, after b's ALLOC; (b, event index)."""
    events = proto.buffer_assignment.heap_simulator_traces[0].events
    b = events[0].buffer_id
    share, free = hlo_pb2.HeapSimulatorTrace.Event(), hlo_pb2.HeapSimulatorTrace.Event()
    share.CopyFrom(events[0])
    share.kind, share.share_with_canonical_id = 2, b
    free.CopyFrom(events[0])
    free.kind = 1
    kept = list(events)
    del events[:]
    events.extend([kept[0], share, free, *kept[1:]])
    return b, 1


# ---------------------------------------------------------------- item 1: SHARE_WITH cycles


def test_a_share_with_cycle_is_a_located_error_not_a_hang() -> None:
    proto = _proto()
    b, k = _cycle(proto)
    message = _error(proto)
    assert message.startswith(
        f"buffer_assignment.heap_simulator_traces[0].events[{k}]: SHARE_WITH of buffer {b} "
        f"with {b}, whose canonical buffer is {b} itself: a cycle"
    )
    assert "expected" in message


def test_share_with_chains_cost_time_by_the_trace_not_its_square() -> None:
    """x0 -> x1 -> ... -> x5000 by SHARE_WITH of each root, then 20,000 SHARE_WITHs with
    x0: each walked the whole chain (10^8 steps, minutes); now the walk has a budget per
    event, and spending it is an error at the event that did."""
    proto = _proto()
    ba = proto.buffer_assignment
    first = max(lb.id for lb in ba.logical_buffers) + 1
    n, m = 5000, 20000
    for b in range(first, first + n + 2):
        lb = ba.logical_buffers.add()
        lb.CopyFrom(ba.logical_buffers[0])
        lb.id, lb.size = b, 8
    x, y = list(range(first, first + n + 1)), first + n + 1
    events = ba.heap_simulator_traces[0].events
    at = len(events)
    events.add(kind=0, buffer_id=x[0])
    for i in range(1, n + 1):
        events.add(kind=0, buffer_id=x[i])
        events.add(kind=2, buffer_id=x[i - 1], share_with_canonical_id=x[i])
    for _ in range(m):
        events.add(kind=2, buffer_id=y, share_with_canonical_id=x[0])
    message = _error(proto)
    assert message.startswith("buffer_assignment.heap_simulator_traces[0].events[")
    k = int(message.split("events[")[1].split("]")[0])
    assert k > at + 2 * n  # in the lookups, not the chain's making
    assert "SHARE_WITH chains longer than 64 links per event" in message


def _profile(programs: list[bytes]) -> bytes:
    """An XSpace whose metadata plane holds these HloProtos, one program each."""
    meta = xplane_pb2.XPlane(id=0, name="/host:metadata")
    meta.stat_metadata[1].id, meta.stat_metadata[1].name = 1, "Hlo Proto"
    for k, data in enumerate(programs):
        em = meta.event_metadata[k + 1]
        em.id, em.name = k + 1, f"jit_p{k}({k})"
        em.stats.add(metadata_id=1, bytes_value=data)
    plane = meta.SerializeToString()
    return encode_varint(1 << 3 | 2) + encode_varint(len(plane)) + plane


def test_one_cycle_in_an_8_program_profile_stops_only_its_program(tmp_path: Path) -> None:
    fixtures = sorted(PROTO.glob("proto_only/*/*after_optimizations.hlo.pb"))
    programs = [fixtures[k % len(fixtures)].read_bytes() for k in range(8)]
    bad = _proto(fixtures[5].parent.name)
    _cycle(bad)
    programs[5] = bad.SerializeToString()
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "host.xplane.pb").write_bytes(_profile(programs))
    db = tmp_path / "w.duckdb"
    with _within(60):
        report = bufferhouse.ingest([tmp_path / "p"], db=db, jobs=1)
    assert len(report.loaded) == 7
    [failed] = report.failed
    assert failed.error.path.endswith("host.xplane.pb#jit_p5(5)")
    assert "SHARE_WITH of buffer" in failed.error.message and "a cycle" in failed.error.message
    assert check_warehouse(db).ok


# ---------------------------------------------------------------- items 2, 5: the xplane walk


def _plain_field(number: int, length: int) -> bytes:
    return encode_varint(number << 3 | wire.LEN) + encode_varint(length)


def _plane_of(fields: bytes) -> bytes:
    return _plain_field(1, len(fields)) + fields


@pytest.mark.parametrize(
    ("what", "data", "field"),
    [
        ("hostnames", _plain_field(4, 1 << 63) + b"x" * 64, "XSpace field 4"),
        ("a plane", _plain_field(1, (1 << 64) - 1) + b"x" * 64, "XSpace field 1"),
        ("a plane's lines", _plane_of(b"\x08\x01" + _plain_field(3, 1 << 63)), "XPlane field 3"),
    ],
    ids=["hostnames", "plane", "lines"],
)
def test_an_xplane_length_past_2_63_is_a_located_error(
    tmp_path: Path, what: str, data: bytes, field: str
) -> None:
    """A length no file holds fails that profile alone, at the field's byte offset."""
    error = _ingest_one_bad(tmp_path, "huge.xplane.pb", data)
    assert error.path.endswith("huge.xplane.pb")
    assert "not a readable XProf profile" in error.message
    assert field in error.message and "at byte" in error.message, error.message


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x0a" + b"\xff" * 9 + b"\x7f", "at byte 1: varint"),  # 2^70 - 1
        (b"\x0a" + b"\xff" * 11, "at byte 1: varint longer than 10 bytes"),
        (b"\x0f\x00", "at byte 0: field 1 has wire type 7"),
        (encode_varint(1 << 32 | wire.LEN) + b"\x00", "at byte 0: field number 536870912"),
    ],
    ids=["varint-past-2^64", "varint-11-bytes", "wire-type-7", "field-past-2^29"],
)
def test_impossible_wire_input_is_refused_where_it_is(data: bytes, message: str) -> None:
    with pytest.raises(wire.WireError) as info:
        list(wire.fields(data))
    assert message in str(info.value)


class _Counted:
    """open_dump, counting the bytes the reader pulls."""

    def __init__(self, real) -> None:
        self.real, self.read = real, 0

    def __call__(self, path):
        f = self.real(path)
        counter, read = self, f.read

        def counted(n=-1):
            data = read(n)
            counter.read += len(data)
            return data

        f.read = counted
        return f


def test_an_xplane_of_zeros_is_refused_at_its_first_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """256 MiB of zeros (a sparse file): field number 0 at byte 0, nothing more read."""
    path = tmp_path / "zeros.xplane.pb"
    with open(path, "wb") as f:
        f.truncate(256 << 20)
    counted = _Counted(xplane.open_dump)
    monkeypatch.setattr(xplane, "open_dump", counted)
    with _within(30), pytest.raises(DumpError) as info:
        xplane.list_programs(str(path))
    assert info.value.message == (
        "not a readable XProf profile (XSpace): at byte 0: field number 0 (not a protobuf message)"
    )
    assert counted.read <= 1 << 20


# ---------------------------------------------------------------- item 4: gzip bombs


def _gz_of(head: bytes, zeros: int) -> bytes:
    """gzip of `head` then `zeros` zero bytes, compressed a block at a time."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = [z.compress(head)]
    block = bytes(1 << 20)
    for _ in range(zeros >> 20):
        out.append(z.compress(block))
    out.append(z.flush())
    return b"".join(out)


@pytest.mark.parametrize(
    ("head", "bound", "message"),
    [
        (b"", "one block", "at byte 0: field number 0"),
        (_plain_field(1, 64 << 20), "FLOOR", "inflates past"),
    ],
    ids=["zeros", "one-long-field"],
)
def test_a_gzip_bomb_is_refused_before_it_is_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, head: bytes, bound: str, message: str
) -> None:
    """64 MiB of zeros in a 64 KB .hlo.pb.gz: refused at its first block (zeros are no
    protobuf) or at RATIO times its size, never decompressed whole."""
    path = tmp_path / "module_0001.jit_bomb.cpu_after_optimizations.hlo.pb.gz"
    path.write_bytes(_gz_of(head, 64 << 20))
    assert path.stat().st_size * proto_pkg.RATIO < proto_pkg.FLOOR  # so FLOOR bounds it
    counted = _Counted(proto_pkg.open_dump)
    monkeypatch.setattr(proto_pkg, "open_dump", counted)
    with pytest.raises(DumpError) as info:
        proto_pkg.parse_proto_file(str(path))
    assert info.value.path == str(path)
    assert message in info.value.message
    assert counted.read <= (1 << 20) + (proto_pkg.FLOOR if bound == "FLOOR" else 0)


def test_a_profile_gzip_bomb_is_refused_before_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plane whose name claims 64 MiB (of zeros, 64 KB gzipped): more metadata than a
    .gz of that size can hold, refused at its header, not read into memory."""
    name = _plain_field(2, 64 << 20)
    path = tmp_path / "bomb.xplane.pb.gz"
    path.write_bytes(_gz_of(_plain_field(1, len(name) + (64 << 20)) + name, 64 << 20))
    counted = _Counted(xplane.open_dump)
    monkeypatch.setattr(xplane, "open_dump", counted)
    with pytest.raises(DumpError) as info:
        xplane.list_programs(str(path))
    assert "at byte" in info.value.message and "gzip bomb" in info.value.message
    assert counted.read <= 1 << 20


def test_a_gzip_bomb_fails_alone(tmp_path: Path) -> None:
    error = _ingest_one_bad(
        tmp_path, "module_0001.jit_bomb.cpu_after_optimizations.hlo.pb.gz", _gz_of(b"", 8 << 20)
    )
    assert "not a readable HloProto: at byte 0: field number 0" in error.message


# ---------------------------------------------------------------- items 6, 7: invariants


def _traced_buffer(ba) -> int:
    """Row in logical_buffers of the buffer of trace 0's first event."""
    b = ba.heap_simulator_traces[0].events[0].buffer_id
    return next(i for i, lb in enumerate(ba.logical_buffers) if lb.id == b)


def _slice_past(ba) -> str:
    alloc = max(ba.buffer_allocations, key=lambda a: len(a.assigned))
    i = list(ba.buffer_allocations).index(alloc)
    asg = alloc.assigned[1]
    asg.offset = alloc.size - asg.size + 8
    return (
        f"buffer_assignment.buffer_allocations[{i}].assigned[1]: value {asg.logical_buffer_id}: "
        f"offset {asg.offset} + size {asg.size} is past the size {alloc.size} "
        f"of allocation {alloc.index}"
    )


def _index_twice(ba) -> str:
    ba.buffer_allocations[3].index = ba.buffer_allocations[1].index
    return (
        "buffer_assignment.buffer_allocations[3].index: allocation index "
        f"{ba.buffer_allocations[1].index} is listed 2 times"
    )


def _id_twice(ba) -> str:
    ba.logical_buffers[4].id = ba.logical_buffers[2].id
    return (
        f"buffer_assignment.logical_buffers[4].id: value id {ba.logical_buffers[2].id} "
        "is listed 2 times"
    )


def _negative_logical_size(ba) -> str:
    i = _traced_buffer(ba)
    ba.logical_buffers[i].size = -8
    lb = ba.logical_buffers[i]
    return (
        "buffer_assignment.heap_simulator_traces[0].events[0]: trace 0 event 0: "
        f"buffer {lb.id} has size {lb.size}, which is negative"
    )


def _negative_shape_index(ba) -> str:
    ba.logical_buffers[2].defined_at.shape_index.append(-1)
    lb = ba.logical_buffers[2]
    index = "{" + ",".join(str(x) for x in lb.defined_at.shape_index) + "}"
    return (
        "buffer_assignment.logical_buffers[2].defined_at.shape_index: "
        f"value {lb.id} has ShapeIndex {index}, with a negative element"
    )


def _trace_of_two_colors(ba) -> str:
    """A buffer of another memory space in a trace (XLA simulates each color apart)."""
    events = ba.heap_simulator_traces[0].events
    first = events[0].buffer_id
    k, other = next((k, e.buffer_id) for k, e in enumerate(events) if e.buffer_id != first)
    row = next(i for i, lb in enumerate(ba.logical_buffers) if lb.id == other)
    ba.logical_buffers[row].color = 3
    return (
        f"buffer_assignment.heap_simulator_traces[0].events[{k}]: "
        "trace 0 holds buffers of colors 0 and 3, where a trace is of one memory space"
    )


def _negative_allocation_size(ba) -> str:
    ba.buffer_allocations[2].size = -64
    return (
        "buffer_assignment.buffer_allocations[2].size: "
        f"allocation {ba.buffer_allocations[2].index} has size -64, which is negative"
    )


def _assigned_twice(ba) -> str:
    src = ba.buffer_allocations[3].assigned[0]
    ba.buffer_allocations[2].assigned.add().CopyFrom(src)
    # the second time is the later one in file order, under allocation 3
    return (
        f"buffer_assignment.buffer_allocations[3].assigned[0]: value {src.logical_buffer_id} "
        "is assigned 2 times"
    )


def _color_past_int32(ba) -> str:
    ba.logical_buffers[2].color = 1 << 40
    return (
        f"buffer_assignment.logical_buffers[2].color {1 << 40}: "
        "does not fit the warehouse's INTEGER column"
    )


MUTANTS = [
    _color_past_int32,
    _slice_past,
    _index_twice,
    _id_twice,
    _negative_logical_size,
    _negative_shape_index,
    _trace_of_two_colors,
    _negative_allocation_size,
    _assigned_twice,
]


@pytest.mark.parametrize("mutate", MUTANTS, ids=[m.__name__.lstrip("_") for m in MUTANTS])
def test_a_broken_invariant_is_refused_with_its_field(mutate) -> None:
    proto = _proto()
    expected = mutate(proto.buffer_assignment)
    assert _error(proto) == expected


def test_a_module_number_past_its_column_is_a_located_error(tmp_path: Path) -> None:
    """An int64 of the module (an entry parameter's number) that its INTEGER column
    cannot hold: an error naming the file and the column, not an Arrow traceback."""
    proto = _proto()
    entry = next(
        c for c in proto.hlo_module.computations if c.id == proto.hlo_module.entry_computation_id
    )
    next(i for i in entry.instructions if i.opcode == "parameter").parameter_number = 1 << 40
    path = tmp_path / "module_0001.jit_wide.cpu_after_optimizations.hlo.pb"
    path.write_bytes(proto.SerializeToString())
    with pytest.raises(DumpError) as info:
        proto_pkg.parse_proto_file(str(path))
    assert info.value.path == str(path)
    assert info.value.message.startswith(
        "a number does not fit its warehouse column: instructions.parameter_number (int32)"
    )


def test_a_slice_past_its_allocation_fails_ingest_not_check(tmp_path: Path) -> None:
    """Loaded, it made `check` report 'FAIL assignments in bounds'; now ingest refuses it
    and the warehouse it leaves passes check (in _ingest_one_bad)."""
    proto = _proto()
    expected = _slice_past(proto.buffer_assignment)
    error = _ingest_one_bad(
        tmp_path, "module_0001.jit_past.cpu_after_optimizations.hlo.pb", proto.SerializeToString()
    )
    assert error.message == expected


def test_ingest_and_check_run_the_same_statements(tmp_path: Path) -> None:
    """The fixture, loaded, then broken in the warehouse the way the mutant breaks the
    proto: check names it with the words ingest used."""
    db = tmp_path / "w.duckdb"
    assert bufferhouse.ingest([GOOD], db=db, jobs=1).ok
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE allocations SET size = -64 WHERE allocation_index = 2")
    report = check_warehouse(db)
    assert [p.message for p in report.problems if p.check == "allocations well formed"] == [
        "allocation 2 has size -64, which is negative"
    ]


# ---------------------------------------------------------------- item 11: the innermost field


def _instruction_path(proto: hlo_pb2.HloProto) -> tuple[int, int]:
    """(computation, instruction) of an instruction with a name of 12+ characters."""
    for c, comp in enumerate(proto.hlo_module.computations):
        for i, ins in enumerate(comp.instructions):
            if len(ins.name) >= 12:
                return c, i
    raise AssertionError("no instruction with a long name")


def test_bad_utf8_deep_inside_names_its_field_and_byte(tmp_path: Path) -> None:
    proto = _proto()
    c, i = _instruction_path(proto)
    placeholder = "Q" * 12
    proto.hlo_module.computations[c].instructions[i].name = placeholder
    data = proto.SerializeToString()
    at = data.index(placeholder.encode())
    assert data.count(placeholder.encode()) == 1
    data = data[:at] + b"\xff" * 12 + data[at + 12 :]
    error = _ingest_one_bad(tmp_path, "module_0001.jit_utf.cpu_after_optimizations.hlo.pb", data)
    assert error.message.startswith(
        f"not a readable HloProto: hlo_module.computations[{c}].instructions[{i}].name: "
        f"at byte {at}: a string that is not UTF-8"
    )


def _shape_key(proto: hlo_pb2.HloProto, data: bytes, number: int) -> tuple[int, int, int, int]:
    """(computation, instruction, byte offset of its `shape` key, bytes of the instruction
    after the shape's one-byte length) of an instruction with fewer than 127 such bytes."""
    for c, comp in enumerate(proto.hlo_module.computations):
        for i, ins in enumerate(comp.instructions):
            shape, ins_bytes = ins.shape.SerializeToString(), ins.SerializeToString()
            head = encode_varint(number << 3 | wire.LEN) + encode_varint(len(shape))
            if not 0 < len(shape) < 100 or data.count(ins_bytes) != 1:
                continue
            at = data.index(ins_bytes) + ins_bytes.index(head + shape)
            left = data.index(ins_bytes) + len(ins_bytes) - (at + len(head))
            if left < 127:
                return c, i, at, left
    raise AssertionError("no instruction to damage")


def test_a_nested_length_past_its_message_names_the_message() -> None:
    """An instruction's `shape` whose length runs past the instruction: the walk stops in
    the instruction, at the shape's key."""
    proto = _proto()
    data = proto.SerializeToString()
    number = hlo_pb2.HloInstructionProto.DESCRIPTOR.fields_by_name["shape"].number
    c, i, at, left = _shape_key(proto, data, number)
    data = data[: at + 1] + bytes([127]) + data[at + 2 :]  # the key is one byte, as is the length
    with pytest.raises(DumpError) as info:
        decode.decode_hlo_proto(data, "bad.hlo.pb")
    assert info.value.message.startswith(
        f"not a readable HloProto: hlo_module.computations[{c}].instructions[{i}]: "
        f"at byte {at}: field {number} needs 127 bytes but {left} remain"
    )


def test_gz_members_of_a_profile_read_too(tmp_path: Path) -> None:
    """The walk's checks hold through a .gz (a forward read, no seek)."""
    path = tmp_path / "huge.xplane.pb.gz"
    path.write_bytes(gzip.compress(_plain_field(4, 1 << 63) + b"x" * 64))
    with pytest.raises(DumpError) as info:
        xplane.list_programs(str(path))
    assert "at byte" in info.value.message
