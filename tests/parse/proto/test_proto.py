"""Protobuf forms: `.hlo.pb` dumps, proto-only trees, XProf profiles, the heap trace.

Oracles: the text dump of the same compile (every fact both carry, compared
with SQL after a real ingest), memory_analysis() recorded by gen.py
(manifest.json: categories and peak_memory_in_bytes), the byte offsets of the
assignments (the trace's bytes in use), and the dump of the same process that
wrote the profile.
"""

from __future__ import annotations

import filecmp
import gzip
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bufferhouse
from bufferhouse.parse.proto import hlo_pb2, regen, xplane_pb2
from bufferhouse.parse.proto.wire import encode_varint
from bufferhouse.parse.results import Failed, ParsedModule
from bufferhouse.schema.invariants import violations
from tests.conftest import DATA, pip_target

PROTO = DATA / "proto"
MANIFEST = json.loads((PROTO / "manifest.json").read_text())["entries"]
PROGRAMS = sorted(p.name for p in (PROTO / "both").iterdir())
XPLANE = PROTO / "profile" / "plugins" / "profile" / "run1" / "host.xplane.pb.gz"


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: list) -> list[tuple]:
    return sorted(con.execute(sql, params).fetchall(), key=repr)


@pytest.fixture(scope="module")
def proto_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every fixture tree (text+proto, proto-only, profile, profile dump) in one warehouse."""
    db = tmp_path_factory.mktemp("proto") / "proto.duckdb"
    report = bufferhouse.ingest([PROTO], db=db, jobs=1)
    assert report.ok, [o.error for o in report.failed]
    assert len(report.skipped) == 1  # before_optimizations.hlo.pb: no buffer assignment
    return db


@pytest.fixture(scope="module")
def split_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The text files and the .hlo.pb of each `both/` compile in separate trees: two modules
    per compile, one read from text only, one from the proto only."""
    root = tmp_path_factory.mktemp("split")
    for program in PROGRAMS:
        for f in (PROTO / "both" / program).iterdir():
            kind = "proto" if f.name.endswith((".hlo.pb", ".pb.gz")) else "text"
            (root / kind / program).mkdir(parents=True, exist_ok=True)
            shutil.copy(f, root / kind / program / f.name)
    db = root / "split.duckdb"
    report = bufferhouse.ingest([root / "text", root / "proto"], db=db, jobs=1)
    assert report.ok, [o.error for o in report.failed]
    assert len(report.loaded) == 2 * len(PROGRAMS)
    return db


# --------------------------------------------------------------------------- generated code


def test_generated_modules_are_reproducible(tmp_path: Path) -> None:
    """The committed *_pb2.py are exactly what regen.py makes from the .proto files with
    its protoc (grpcio-tools 1.49.1, installed once into the test cache: it caps protobuf
    below 5, so it is no dependency of the project)."""
    protoc = pip_target(list(regen.PROTOC), regen.PROTOC[0].replace("==", "-"), no_deps=True)
    root = Path(bufferhouse.__file__).parents[1]
    proc = subprocess.run(
        [sys.executable, "-W", "ignore", "-m", "bufferhouse.parse.proto.regen", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(protoc), str(root)])},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    generated = [Path(line) for line in proc.stdout.splitlines()]
    assert [p.name for p in generated] == ["hlo_pb2.py", "xplane_pb2.py", "profile_pb2.py"]
    for path in generated:
        committed = Path(regen.HERE) / path.name
        assert filecmp.cmp(path, committed, shallow=False), f"{committed} is stale: run regen"


def test_regen_refuses_another_protoc(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Another grpcio-tools would write other code (newer: a runtime check that refuses
    older protobuf), so regen names the one it needs instead of running it."""
    monkeypatch.setattr(regen.metadata, "version", lambda name: "1.85.1")
    with pytest.raises(RuntimeError, match=r"needs grpcio-tools 1\.49\.1 \(found 1\.85\.1\)"):
        regen.regenerate(tmp_path)
    assert not list(tmp_path.iterdir())


def test_unknown_fields_are_ignored() -> None:
    """A newer XLA's fields (here: a made-up field 99 in HloProto and in an instruction)
    parse: only the declared fields are read."""
    data = (PROTO / "proto_only" / "while_newton").glob("*after_optimizations.hlo.pb")
    raw = next(iter(data)).read_bytes()
    extra = encode_varint(99 << 3 | 2) + encode_varint(5) + b"hello"
    proto = hlo_pb2.HloProto()
    proto.ParseFromString(raw + extra)
    assert proto.buffer_assignment.buffer_allocations


# --------------------------------------------------------------------------- proto == text

#: table -> columns both forms carry (the proto leaves the others NULL or empty).
SHARED = {
    "allocations": (
        "allocation_index, size, color, parameter_number, parameter_shape,"
        " parameter_shape_index, output_shape, is_parameter, is_constant, is_thread_local,"
        " is_maybe_live_out, is_preallocated_temp, category"
    ),
    "hlo_values": (
        "value_id, instruction, shape_index, color, shape, element_type, dims, is_dynamic,"
        " minor_to_major, tiles, memory_space, logical_bytes, is_tuple"
    ),
    "assignments": "value_id, allocation_index, byte_offset, size, reused_cross_color",
    "instructions": (
        "instruction, opcode, shape, operands, parameter_number, fusion_kind,"
        " custom_call_target, op_name, op_type, source_file, source_line, source_function,"
        " stack_frame_id"
    ),
    "sequence": "time, instruction",
    "heap_peaks": "color, total_bytes, indefinite_bytes, temp_allocation_bytes",
}
MODULE_FACTS = (
    "module_name, module_number, file_stem, backend, target, stage, total_bytes,"
    " allocation_count, value_count, schedule_length, assignment_fingerprint"
)


def _module_ids(con, program: str) -> tuple[int, int]:
    rows = con.execute(
        "SELECT source_kind, module_id FROM modules WHERE paths[1] LIKE ?", [f"%/{program}/%"]
    ).fetchall()
    kinds = dict(rows)
    return kinds["text"], kinds["proto"]


@pytest.mark.parametrize("program", PROGRAMS)
def test_proto_only_equals_text(split_db: Path, program: str) -> None:
    con = duckdb.connect(str(split_db), read_only=True)
    text_id, proto_id = _module_ids(con, program)
    for table, columns in SHARED.items():
        sql = f"SELECT {columns} FROM {table} WHERE module_id = ?"
        text, proto = _rows(con, sql, [text_id]), _rows(con, sql, [proto_id])
        assert text, (program, table)
        assert proto == text, (program, table)
    sql = f"SELECT {MODULE_FACTS} FROM modules WHERE module_id = ?"
    assert _rows(con, sql, [proto_id]) == _rows(con, sql, [text_id])
    # What the proto cannot give stays NULL (documented per column), not made up.
    nulls = con.execute(
        "SELECT count(*) FILTER (WHERE is_phi IS NOT NULL), count(*) FILTER (WHERE line IS NOT NULL)"
        " FROM hlo_values WHERE module_id = ?",
        [proto_id],
    ).fetchone()
    assert nulls == (0, 0)
    assert con.execute("SELECT count(*) FROM uses WHERE module_id = ?", [proto_id]).fetchone() == (
        0,
    )
    con.close()


def test_text_and_proto_side_by_side_are_one_module(proto_db: Path) -> None:
    """A stem with text and proto is one module: the text's tables, the proto's trace and
    peak, no disagreement warnings, and a content hash over both files."""
    con = duckdb.connect(str(proto_db), read_only=True)
    rows = con.execute(
        "SELECT module_id, paths FROM modules WHERE source_kind = 'text+proto'"
    ).fetchall()
    assert len(rows) == len(PROGRAMS)
    for module_id, paths in rows:
        assert any(p.endswith(".hlo.pb") for p in paths)
        assert any(p.endswith("-buffer-assignment.txt") for p in paths)
        events = con.execute(
            "SELECT count(*) FROM heap_events WHERE module_id = ?", [module_id]
        ).fetchone()[0]
        uses = con.execute("SELECT count(*) FROM uses WHERE module_id = ?", [module_id]).fetchone()
        assert events > 0 and uses[0] > 0
    warnings = con.execute(
        "SELECT count(*) FROM diagnostics WHERE message LIKE 'text and proto disagree%'"
    ).fetchone()
    assert warnings == (0,)
    con.close()


def test_content_hash_covers_the_proto(tmp_path: Path) -> None:
    """Changing only the .hlo.pb beside the text makes a different module."""
    src = PROTO / "both" / "while_newton"
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(src, a)
    shutil.copytree(src, b)
    pb = next(b.glob("*.hlo.pb"))
    proto = hlo_pb2.HloProto()
    proto.ParseFromString(pb.read_bytes())
    proto.hlo_module.computations[0].instructions[0].metadata.op_name = "edited"
    pb.write_bytes(proto.SerializeToString())
    db = tmp_path / "w.duckdb"
    first = bufferhouse.ingest([a], db=db, jobs=1)
    second = bufferhouse.ingest([b], db=db, jobs=1)
    assert len(first.loaded) == 1 and len(second.loaded) == 1


def test_disagreement_is_a_warning(tmp_path: Path) -> None:
    """A proto that does not match its text (an allocation resized) still loads, with
    a diagnostic naming the proto file and the first difference."""
    tree = tmp_path / "t"
    shutil.copytree(PROTO / "both" / "donate_sgd", tree)
    pb = next(tree.glob("*.hlo.pb"))
    proto = hlo_pb2.HloProto()
    proto.ParseFromString(pb.read_bytes())
    proto.buffer_assignment.buffer_allocations[0].size += 64
    pb.write_bytes(proto.SerializeToString())
    db = tmp_path / "w.duckdb"
    report = bufferhouse.ingest([tree], db=db, jobs=1)
    assert len(report.loaded) == 1
    messages = [w.message for w in report.loaded[0].warnings]
    assert all(w.path == str(pb) for w in report.loaded[0].warnings)
    assert messages == [
        "text and proto disagree on allocations: size at allocation_index=0: "
        f"{proto.buffer_assignment.buffer_allocations[0].size - 64} in the text, "
        f"{proto.buffer_assignment.buffer_allocations[0].size} in the proto",
    ]


def report_total(tree: Path) -> int:
    text = next(tree.glob("*-buffer-assignment-values.txt")).read_text()
    return int(text.split("Total bytes used: ")[1].split()[0])


# --------------------------------------------------------------------------- oracles


def _manifest_module(con, key: str) -> tuple | None:
    if "#" in key:
        _path, name = key.split("#")
        return con.execute(
            "SELECT module_id, xla_peak_bytes FROM modules WHERE source_kind = 'xplane'"
            " AND module_name = ?",
            [name],
        ).fetchone()
    return con.execute(
        "SELECT module_id, xla_peak_bytes FROM modules WHERE list_contains(paths, ?)",
        [str((PROTO / key).resolve())],
    ).fetchone()


def test_xla_peak_and_categories_equal_memory_analysis(proto_db: Path) -> None:
    con = duckdb.connect(str(proto_db), read_only=True)
    checked = 0
    for key, entry in MANIFEST.items():
        ma = entry["memory_analysis"]
        found = _manifest_module(con, key)
        assert found is not None, key
        module_id, xla_peak = found
        assert xla_peak == ma["peak_memory_in_bytes"], key
        totals = con.execute(
            "SELECT parameter_bytes, output_bytes, alias_bytes, temp_bytes FROM space_totals"
            " WHERE module_id = ? AND color = 0",
            [module_id],
        ).fetchone()
        assert totals == (
            ma["argument_size_in_bytes"],
            ma["output_size_in_bytes"],
            ma["alias_size_in_bytes"],
            ma["temp_size_in_bytes"],
        ), key
        checked += 1
    assert checked == len(MANIFEST) and checked >= 16
    con.close()


def test_trace_replay_matches_the_assigned_bytes(proto_db: Path) -> None:
    """The trace replayed (heap_events.heap_bytes) against an independent count: after
    each event, the bytes covered by the assigned slices (assignments: offset, size) of
    the buffers then between their ALLOC/SHARE_WITH and their FREE. And the trace's
    peak plus XLA's static buffers is trace_peak_bytes."""
    con = duckdb.connect(str(proto_db), read_only=True)
    modules = con.execute(
        "SELECT module_id, trace_peak_bytes, xla_peak_bytes FROM modules"
        " WHERE trace_peak_bytes IS NOT NULL"
    ).fetchall()
    assert len(modules) >= 14
    for module_id, trace_peak, static in modules:
        slices = dict(
            (v, (o, s))
            for v, o, s in con.execute(
                "SELECT a.value_id, a.byte_offset, a.size FROM assignments a"
                " JOIN allocations l USING (module_id, allocation_index)"
                " WHERE module_id = ? AND l.category = 'temp'",
                [module_id],
            ).fetchall()
        )
        events = con.execute(
            "SELECT trace_index, kind, value_id, heap_bytes FROM heap_events"
            " WHERE module_id = ? ORDER BY trace_index, event_index",
            [module_id],
        ).fetchall()
        live: set[int] = set()
        worst = 0
        for _, kind, value, heap_bytes in events:
            if kind in ("ALLOC", "SHARE_WITH"):
                live.add(value)
            else:
                live.discard(value)
            covered = _union([slices[v] for v in live])
            assert heap_bytes == covered, (module_id, kind, value)
            worst = max(worst, heap_bytes)
        assert static + worst == trace_peak
    con.close()


def _union(ranges: list[tuple[int, int]]) -> int:
    total, end = 0, -1
    for offset, size in sorted(ranges):
        lo, hi = max(offset, end), offset + size
        if hi > lo:
            total += hi - lo
        end = max(end, hi)
    return total


def test_profile_equals_dump_of_the_same_program(proto_db: Path) -> None:
    """The profile's programs and the protos the same process dumped: same fingerprint,
    same tables (instruction ids aside, which the profile renumbers)."""
    con = duckdb.connect(str(proto_db), read_only=True)
    pairs = con.execute(
        "SELECT x.module_id, d.module_id FROM modules x JOIN modules d"
        " USING (assignment_fingerprint)"
        " WHERE x.source_kind = 'xplane' AND d.source_kind = 'proto'"
        " AND d.paths[1] LIKE '%/profile_dump/%'"
    ).fetchall()
    assert len(pairs) == 2
    for xplane_id, dump_id in pairs:
        for table, columns in {
            **SHARED,
            "heap_events": "trace_index, event_index, kind,"
            " value_id, instruction, share_with, size, heap_bytes",
        }.items():
            sql = f"SELECT {columns} FROM {table} WHERE module_id = ?"
            assert _rows(con, sql, [xplane_id]) == _rows(con, sql, [dump_id]), table
        sql = "SELECT module_name, xla_peak_bytes, trace_peak_bytes, total_bytes FROM modules WHERE module_id = ?"
        assert _rows(con, sql, [xplane_id]) == _rows(con, sql, [dump_id])
    con.close()


# --------------------------------------------------------------------------- bad input


def _ingest_one_bad(tmp_path: Path, name: str, data: bytes):
    """A good module beside one bad file: the good one lands, the bad one fails alone."""
    tree = tmp_path / "t"
    shutil.copytree(PROTO / "proto_only" / "while_newton", tree / "good")
    (tree / "bad").mkdir()
    (tree / "bad" / name).write_bytes(data)
    db = tmp_path / "w.duckdb"
    report = bufferhouse.ingest([tree], db=db, jobs=1)
    assert len(report.loaded) == 1
    assert len(report.failed) == 1
    con = duckdb.connect(str(db), read_only=True)
    modules = con.execute("SELECT count(*) FROM modules").fetchone()[0]
    orphans = sum(
        con.execute(
            f"SELECT count(*) FROM {t} WHERE module_id NOT IN (SELECT module_id FROM modules)"
        ).fetchone()[0]
        for t in ("allocations", "hlo_values", "assignments", "heap_events", "instructions")
    )
    con.close()
    assert modules == 1 and orphans == 0  # nothing half-loaded
    return report.failed[0].error


def _good_pb() -> bytes:
    return next(
        (PROTO / "proto_only" / "donate_sgd").glob("*after_optimizations.hlo.pb")
    ).read_bytes()


def test_truncated_hlo_pb(tmp_path: Path) -> None:
    data = _good_pb()
    name = "module_0001.jit_cut.cpu_after_optimizations.hlo.pb"
    error = _ingest_one_bad(tmp_path, name, data[: len(data) // 2])
    assert error.path.endswith(name)
    assert "not a readable HloProto: at byte 0: field 1 needs" in error.message
    assert "truncated" in error.message


def test_hlo_pb_of_another_message(tmp_path: Path) -> None:
    """compile_options.pb renamed: it parses as protobuf, but holds no HloModule."""
    other = (PROTO / "proto_only" / "scan_rnn" / "compile_options.pb").read_bytes()
    name = "module_0001.jit_other.cpu_after_optimizations.hlo.pb"
    error = _ingest_one_bad(tmp_path, name, other)
    assert error.path.endswith(name)
    assert "HloProto" in error.message


def test_buffer_assignment_names_a_missing_instruction(tmp_path: Path) -> None:
    proto = hlo_pb2.HloProto()
    proto.ParseFromString(_good_pb())
    proto.buffer_assignment.logical_buffers[3].defined_at.instruction_id = 987654321
    name = "module_0001.jit_dangling.cpu_after_optimizations.hlo.pb"
    error = _ingest_one_bad(tmp_path, name, proto.SerializeToString())
    assert error.message == (
        "buffer_assignment.logical_buffers[3].defined_at: instruction id 987654321"
        " is not in hlo_module"
    )


def test_trace_names_a_missing_buffer(tmp_path: Path) -> None:
    proto = hlo_pb2.HloProto()
    proto.ParseFromString(_good_pb())
    proto.buffer_assignment.heap_simulator_traces[0].events[2].buffer_id = 424242
    name = "module_0001.jit_trace.cpu_after_optimizations.hlo.pb"
    error = _ingest_one_bad(tmp_path, name, proto.SerializeToString())
    assert "heap_simulator_traces[0].events[2]: buffer 424242 is not in logical_buffers" in (
        error.message
    )


def _xspace(planes: list[bytes]) -> bytes:
    return b"".join(encode_varint(1 << 3 | 2) + encode_varint(len(p)) + p for p in planes)


def test_profile_without_hlo_protos(tmp_path: Path) -> None:
    plane = xplane_pb2.XPlane(id=1, name="/host:CPU").SerializeToString()
    error = _ingest_one_bad(tmp_path, "empty.xplane.pb", _xspace([plane]))
    assert error.path.endswith("empty.xplane.pb")
    assert "without HloProtos" in error.message


def test_corrupted_xplane(tmp_path: Path) -> None:
    data = gzip.decompress(XPLANE.read_bytes())
    cut = data[: len(data) - 1000]
    error = _ingest_one_bad(tmp_path, "cut.xplane.pb", cut)
    assert error.path.endswith("cut.xplane.pb")
    assert "not a readable XProf profile" in error.message and "at byte" in error.message


# --------------------------------------------------------------------------- profiles read once


def _profile_of(programs: int) -> tuple[bytes, list[str]]:
    """An XSpace of `programs` programs (the proto_only fixtures' HloProtos, in turn, each
    under a name of its own) in a metadata plane between two planes of trace events."""
    pbs = sorted((PROTO / "proto_only").glob("*/*after_optimizations.hlo.pb"))
    meta = xplane_pb2.XPlane(id=0, name="/host:metadata")
    meta.stat_metadata[1].id, meta.stat_metadata[1].name = 1, "Hlo Proto"
    names = []
    for k in range(programs):
        em = meta.event_metadata[k + 1]
        em.id, em.name = k + 1, f"jit_{pbs[k % len(pbs)].parent.name}({k})"
        em.stats.add(metadata_id=1, bytes_value=pbs[k % len(pbs)].read_bytes())
        names.append(em.name)
    event = bytes(64)
    line = encode_varint(3 << 3 | 2) + encode_varint(len(event)) + event
    planes = []
    for name in ("/host:CPU", None, "/device:CPU:0"):
        if name is None:
            planes.append(meta.SerializeToString())
        else:
            head = xplane_pb2.XPlane(id=1, name=name).SerializeToString()
            planes.append(head + line * 1000)
    return _xspace(planes), names


def _count_opens(monkeypatch: pytest.MonkeyPatch, path: Path) -> list[str]:
    """Every open of `path` in this process from now on (gzip.open opens with it too)."""
    import builtins

    opens: list[str] = []
    real, target = builtins.open, os.path.realpath(path)

    def counting(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and os.path.realpath(file) == target:
            opens.append(str(file))
        return real(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting)
    return opens


@pytest.mark.parametrize("programs", [3, 6])
@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gz"])
def test_a_profile_is_read_twice_whatever_its_programs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, programs: int, gz: bool
) -> None:
    """Discovery lists the programs (one pass), the ingest reads all their HloProtos in
    one more: not a pass per program (a .gz is decompressed from its start each time).
    Again into the same warehouse: the same two passes, every program present."""
    data, names = _profile_of(programs)
    path = tmp_path / "p" / ("host.xplane.pb.gz" if gz else "host.xplane.pb")
    path.parent.mkdir()
    path.write_bytes(gzip.compress(data) if gz else data)
    db = tmp_path / "w.duckdb"
    opens = _count_opens(monkeypatch, path)
    report = bufferhouse.ingest([path.parent], db=db, jobs=1)
    assert report.ok and len(report.loaded) == programs
    assert len(opens) == 2, f"{programs} programs: the profile was opened {len(opens)} times"
    con = duckdb.connect(str(db), read_only=True)
    loaded = con.execute("SELECT file_stem, content_hash FROM modules ORDER BY 1").fetchall()
    con.close()
    assert [stem for stem, _ in loaded] == sorted(f"{path.name}#{n}" for n in names)
    assert len({h for _, h in loaded}) == programs
    opens.clear()
    again = bufferhouse.ingest([path.parent], db=db, jobs=1)
    assert len(again.present) == programs and not again.loaded and not again.failed
    assert len(opens) == 2


def test_a_profile_that_changed_after_discovery_fails_each_program(tmp_path: Path) -> None:
    """The profile is read again after discovery: if it no longer reads, or lost a
    program, each program fails with the file, the byte offset or the program named."""
    from bufferhouse.parse import parse_files, with_programs
    from bufferhouse.parse.discover import discover

    data, names = _profile_of(3)
    path = tmp_path / "host.xplane.pb"
    path.write_bytes(data)
    groups = discover([path])
    assert [g.program for g in groups] == names
    path.write_bytes(data[: len(data) // 2])  # cut inside the metadata plane
    results = [parse_files(g, program=data) for g, data in with_programs(groups)]
    assert [type(r) for r in results] == [Failed] * 3
    for r in results:
        assert r.error is not None and r.error.path == str(path)
        assert "not a readable XProf profile" in r.error.message and "at byte" in r.error.message

    path.write_bytes(data)
    groups = discover([path])
    path.write_bytes(_profile_of(2)[0])  # the same planes, without the third program
    results = [parse_files(g, program=data) for g, data in with_programs(groups)]
    assert [type(r) for r in results[:2]] == [ParsedModule, ParsedModule]
    assert isinstance(results[2], Failed) and results[2].error is not None
    assert "not found in the profile (file changed?)" in results[2].error.message


def test_a_program_named_twice_in_a_profile_is_read_for_both(tmp_path: Path) -> None:
    """Two event metadata of one name (as before: the first one's HloProto for both):
    both groups get it from the one pass, the second is the same module, present."""
    from bufferhouse.parse import with_programs
    from bufferhouse.parse.discover import discover

    meta = xplane_pb2.XPlane(id=0, name="/host:metadata")
    meta.stat_metadata[1].id, meta.stat_metadata[1].name = 1, "Hlo Proto"
    for k in (1, 2):
        em = meta.event_metadata[k]
        em.id, em.name = k, "jit_twice(1)"
        em.stats.add(metadata_id=1, bytes_value=_good_pb())
    path = tmp_path / "twice.xplane.pb"
    path.write_bytes(_xspace([meta.SerializeToString()]))
    groups = list(with_programs(discover([path])))
    assert [g.program for g, _ in groups] == ["jit_twice(1)"] * 2
    assert [data for _, data in groups] == [_good_pb()] * 2
    report = bufferhouse.ingest([path], db=tmp_path / "w.duckdb", jobs=1)
    assert len(report.loaded) == 1 and len(report.present) == 1 and report.ok


def test_before_optimizations_is_skipped_and_counted(proto_db: Path) -> None:
    con = duckdb.connect(str(proto_db), read_only=True)
    paths = [p for (ps,) in con.execute("SELECT paths FROM modules").fetchall() for p in ps]
    con.close()
    assert not any("before_optimizations" in p or "compile_options" in p for p in paths)


# --------------------------------------------------------------------------- big profiles


@pytest.mark.slow
def test_large_profile_is_read_in_bounded_memory(tmp_path: Path) -> None:
    """A 300 MB xplane (a metadata plane between two planes of 150 MB of events each):
    listing and reading its programs holds far less than the file."""
    src = hlo_pb2.HloProto()
    src.ParseFromString(_good_pb())
    meta = xplane_pb2.XPlane(id=0, name="/host:metadata")
    meta.stat_metadata[1].id, meta.stat_metadata[1].name = 1, "Hlo Proto"
    em = meta.event_metadata[7]
    em.id, em.name = 7, "jit_donate_sgd(7)"
    em.stats.add(metadata_id=1, bytes_value=src.SerializeToString())
    event = bytes(64)  # opaque: never decoded
    line = encode_varint(3 << 3 | 2) + encode_varint(len(event)) + event
    path = tmp_path / "big.xplane.pb"
    per_plane = 150 << 20
    n_lines = per_plane // len(line)
    with open(path, "wb") as f:
        for name, with_meta in (("/host:CPU", False), ("", True), ("/device:CPU:0", False)):
            if with_meta:
                body = meta.SerializeToString()
                f.write(encode_varint(1 << 3 | 2) + encode_varint(len(body)) + body)
                continue
            head = xplane_pb2.XPlane(id=1, name=name).SerializeToString()
            size = len(head) + n_lines * len(line)
            f.write(encode_varint(1 << 3 | 2) + encode_varint(size) + head)
            block = line * 4096
            for _ in range(n_lines // 4096):
                f.write(block)
            f.write(line * (n_lines % 4096))
    assert path.stat().st_size > 300 << 20
    script = textwrap.dedent(
        f"""
        import resource
        from bufferhouse.parse.proto.xplane import list_programs, read_program
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        (p,) = list_programs({str(path)!r})
        data = read_program({str(path)!r}, p.name, p.offset)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(p.name, len(data), (after - before) // 1024)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(bufferhouse.__file__).parents[1])},
    ).stdout.split()
    assert out[0] == "jit_donate_sgd(7)"
    assert int(out[1]) == len(src.SerializeToString())
    assert int(out[2]) < 64, f"reading a 300 MB profile grew the process by {out[2]} MiB"


def test_a_version_4_warehouse_is_upgraded_in_place(tmp_path: Path) -> None:
    """4 -> 5 adds heap_events, the modules columns and a nullable is_phi; rows stay."""
    from bufferhouse.schema import SCHEMA_VERSION
    from bufferhouse.schema.warehouse import schema_version

    db = tmp_path / "w.duckdb"
    bufferhouse.ingest([PROTO / "both" / "while_newton"], db=db, jobs=1)
    with duckdb.connect(str(db)) as con:
        con.execute("DROP TABLE heap_events")
        for column in (
            "trace_peak_bytes",
            "assignment_fingerprint",
            "source_kind",
        ):
            con.execute(f"ALTER TABLE modules DROP COLUMN {column}")
        con.execute("ALTER TABLE hlo_values ALTER COLUMN is_phi SET NOT NULL")
        con.execute("UPDATE schema_info SET value = '4' WHERE key = 'schema_version'")
    report = bufferhouse.ingest([PROTO / "proto_only" / "while_newton"], db=db, jobs=1)
    assert len(report.loaded) == 1
    with duckdb.connect(str(db), read_only=True) as con:
        assert schema_version(con) == SCHEMA_VERSION  # 4 -> 5, then on to the latest
        kinds = con.execute("SELECT source_kind FROM modules ORDER BY source_kind").fetchall()
        assert kinds == [("proto",), (None,)]  # the module loaded before keeps NULL
        assert con.execute("SELECT count(*) FROM heap_events").fetchone()[0] > 0


def test_top_modules_ranks_by_xla_peak(proto_db: Path) -> None:
    """Each compile once (proto_db holds most twice: as a proto and beside its text;
    compile_modules links those)."""
    top = bufferhouse.query("top-modules", db=proto_db, top=3, peak="xla").to_pylist()
    want = [
        (r["module_id"], r["xla_peak_bytes"])
        for r in bufferhouse.sql(
            "SELECT module_id, xla_peak_bytes FROM modules"
            " WHERE module_id IN (SELECT primary_module_id FROM compile_modules)"
            " ORDER BY xla_peak_bytes DESC NULLS LAST, module_name, module_id LIMIT 3",
            db=proto_db,
        ).to_pylist()
    ]
    assert [(r["module_id"], r["peak_bytes"]) for r in top] == want
    assert want[0][1] == max(
        e["memory_analysis"]["peak_memory_in_bytes"] for e in MANIFEST.values()
    )


def test_heap_trace_query(proto_db: Path) -> None:
    """The trace as a query: its live_bytes peak is the module's heap_peak_bytes (the
    text dump's live-range figure for the same compile), its static part the space's
    indefinite allocations."""
    con = duckdb.connect(str(proto_db), read_only=True)
    module_id, heap_peak, indefinite = con.execute(
        "SELECT m.module_id, m.heap_peak_bytes, h.indefinite_bytes FROM modules m"
        " JOIN heap_peaks h ON h.module_id = m.module_id AND h.color = 0"
        " WHERE m.module_name = 'jit_while_newton' AND m.source_kind = 'proto'"
    ).fetchone()
    events = con.execute("SELECT count(*) FROM heap_events WHERE module_id = ?", [module_id])
    n_events = events.fetchone()[0]
    (text_peak,) = con.execute(
        "SELECT heap_peak_bytes FROM modules"
        " WHERE module_name = 'jit_while_newton' AND source_kind = 'text+proto'"
    ).fetchone()
    con.close()
    rows = bufferhouse.query("heap-trace", db=proto_db, module=str(module_id)).to_pylist()
    assert {r["module_id"] for r in rows} == {module_id}
    assert len(rows) == n_events > 0
    assert max(r["live_bytes"] for r in rows) == heap_peak == text_peak
    assert {r["static_bytes"] for r in rows} == {indefinite}
    (peak,) = [r for r in rows if r["is_peak"]]
    assert peak["live_bytes"] == heap_peak


def test_renamed_proto_loads_and_one_without_assignment_is_skipped(tmp_path: Path) -> None:
    """Names do not decide: a renamed .hlo.pb with a buffer assignment loads; one without
    (here: the before-optimizations proto renamed) is skipped by its content and counted."""
    src = PROTO / "proto_only" / "scan_rnn"
    (tmp_path / "t").mkdir()
    shutil.copy(next(src.glob("*after_optimizations.hlo.pb")), tmp_path / "t" / "renamed.hlo.pb")
    shutil.copy(next(src.glob("*before_optimizations.hlo.pb")), tmp_path / "t" / "other.hlo.pb")
    report = bufferhouse.ingest([tmp_path / "t"], db=tmp_path / "w.duckdb", jobs=1)
    assert len(report.loaded) == 1 and len(report.skipped) == 1 and report.ok
    (skipped,) = report.skipped
    assert skipped.error.path.endswith("other.hlo.pb")
    assert "without a buffer assignment" in skipped.error.message


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.data())
def test_damaged_protos_fail_with_a_located_error(data) -> None:
    """Any damage to an .hlo.pb (bytes flipped, cut, inserted) either still decodes into a
    consistent module or raises DumpError naming the file: never another exception.
    Consistent: the invariants `check` runs (schema/invariants) hold on its tables."""
    from bufferhouse.errors import DumpError
    from bufferhouse.parse.proto import decode

    raw = bytearray(_good_pb())
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(raw) - 1))
        how = data.draw(st.sampled_from(["bit", "flip", "cut", "insert"]))
        if how == "bit":  # keeps the wire format more often than not: a wrong number
            raw[at] ^= 1 << data.draw(st.integers(0, 7))
        elif how == "flip":
            raw[at] ^= data.draw(st.integers(1, 255))
        elif how == "cut":
            del raw[at : at + data.draw(st.integers(1, 64))]
        else:
            raw[at:at] = data.draw(st.binary(min_size=1, max_size=16))
    try:
        proto = decode.decode_hlo_proto(bytes(raw), "damaged.hlo.pb")
        parsed = decode.parse_hlo_proto(proto, "damaged.hlo.pb")
    except DumpError as exc:
        assert exc.path == "damaged.hlo.pb" and exc.message
        return
    assert violations(parsed.tables) == []


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.data())
def test_a_bit_flipped_in_the_buffer_assignment_is_refused_or_harmless(data) -> None:
    """One bit of the buffer assignment flipped keeps the wire format more often than not,
    and makes a wrong number: an offset, a size, an index, an id. The module either fails
    with a DumpError or keeps the invariants `check` runs (before issue 31, 2 flips in
    100 loaded a slice past its allocation)."""
    from bufferhouse.errors import DumpError
    from bufferhouse.parse.proto import decode, wire

    raw = bytearray(_good_pb())
    start, end = next((s, e) for n, _, s, e in wire.fields(raw) if n == 3)
    raw[data.draw(st.integers(start, end - 1))] ^= 1 << data.draw(st.integers(0, 7))
    try:
        parsed = decode.parse_hlo_proto(decode.decode_hlo_proto(bytes(raw), "bit"), "bit")
    except DumpError as exc:
        assert exc.path == "bit" and exc.message
        return
    assert violations(parsed.tables) == []


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.data())
def test_damaged_profiles_fail_with_a_located_error(tmp_path_factory, data) -> None:
    """A damaged XSpace either still lists its programs or raises DumpError naming it;
    a program read from it either parses into rows that keep the invariants `check`
    runs or fails with a DumpError naming the program."""
    from bufferhouse.errors import DumpError
    from bufferhouse.parse.proto import parse_xplane_program
    from bufferhouse.parse.proto.xplane import list_programs, read_program

    raw = bytearray(gzip.decompress(XPLANE.read_bytes()))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(raw) - 1))
        if data.draw(st.booleans()):
            raw[at] ^= data.draw(st.integers(1, 255))
        else:
            del raw[at : at + data.draw(st.integers(1, 4096))]
    path = tmp_path_factory.mktemp("xp") / "damaged.xplane.pb"
    path.write_bytes(bytes(raw))
    try:
        programs = [
            (p, read_program(str(path), p.name, p.offset)) for p in list_programs(str(path))
        ]
    except DumpError as exc:
        assert exc.path == str(path) and exc.message
        return
    for p, hlo in programs:
        try:
            parsed = parse_xplane_program(str(path), p.name, hlo)
        except DumpError as exc:
            assert exc.path == f"{path}#{p.name}" and exc.message
            continue
        assert violations(parsed.tables) == []


@pytest.mark.slow
def test_heap_timeline_and_peak_buffers_draw_the_trace(proto_db: Path) -> None:
    """Every module with a trace (proto alone, profile, or text beside its proto: the
    trace wins) is drawn from it: heap-timeline has one row per event, source 'trace',
    its peak is heap_peak_bytes; peak-buffers lists the buffers held at that event
    (replayed here from heap_events) and each indefinite allocation by its largest
    value; the indefinite allocations' sizes and the held slices add up to the peak."""
    con = duckdb.connect(str(proto_db), read_only=True)
    modules = con.execute(
        "SELECT m.module_id, m.source_kind, m.heap_peak_bytes, h.peak_time FROM modules m"
        " JOIN heap_peaks h ON h.module_id = m.module_id AND h.color = 0"
        " WHERE m.trace_peak_bytes IS NOT NULL ORDER BY m.module_id"
    ).fetchall()
    assert {kind for _, kind, _, _ in modules} == {"proto", "text+proto", "xplane"}
    facts = {}
    for module_id, _, _, _ in modules:
        events = con.execute(
            "SELECT kind, value_id FROM heap_events WHERE module_id = ?"
            " ORDER BY trace_index, event_index",
            [module_id],
        ).fetchall()
        slices = dict(
            (v, (o, s))
            for v, o, s in con.execute(
                "SELECT value_id, byte_offset, size FROM assignments WHERE module_id = ?",
                [module_id],
            ).fetchall()
        )
        indefinite = con.execute(
            "SELECT allocation_index, size FROM allocations WHERE module_id = ? AND color = 0"
            " AND (is_parameter OR is_constant OR is_maybe_live_out OR is_thread_local)",
            [module_id],
        ).fetchall()
        facts[module_id] = events, slices, dict(indefinite)
    con.close()
    fleet: dict[int, list[dict]] = {}
    for row in bufferhouse.query("peak-buffers", db=proto_db, top=100_000).to_pylist():
        fleet.setdefault(row["module_id"], []).append(row)
    for module_id, _, heap_peak, peak_time in modules:
        events, slices, indefinite = facts[module_id]
        key = str(module_id)
        rows = bufferhouse.query("heap-timeline", db=proto_db, module=key).to_pylist()
        assert {r["source"] for r in rows} == {"trace"}
        assert [r["time"] for r in rows] == list(range(len(events)))
        assert max(r["live_bytes"] for r in rows) == heap_peak
        (peak,) = [r for r in rows if r["is_peak"]]
        assert peak["live_bytes"] == heap_peak
        assert peak["time"] == min(r["time"] for r in rows if r["live_bytes"] == heap_peak)
        live: set[int] = set()
        for kind, value in events[: peak["time"] + 1]:
            (live.add if kind != "FREE" else live.discard)(value)
        listed = bufferhouse.query("peak-buffers", db=proto_db, module=key, top=100_000).to_pylist()
        assert {r["peak_source"] for r in listed} == {"trace"}
        assert {r["peak_time"] for r in listed} == {peak_time}
        temp = {r["value_id"] for r in listed if r["category"] == "temp"}
        assert temp == live
        shown = {r["allocation_index"] for r in listed if r["category"] != "temp"}
        assert shown == set(indefinite)
        assert sum(indefinite.values()) + _union([slices[v] for v in live]) == heap_peak
        assert sorted(map(repr, listed)) == sorted(map(repr, fleet[module_id]))


def test_text_only_timeline_sweeps_live_ranges(split_db: Path) -> None:
    """The same compiles read from text alone have no trace: heap-timeline and
    peak-buffers use the live ranges and say so; the peak is heap_peak_bytes."""
    con = duckdb.connect(str(split_db), read_only=True)
    text = con.execute(
        "SELECT m.module_id, h.heap_peak_bytes FROM modules m JOIN heap_peaks h"
        " USING (module_id) WHERE m.source_kind = 'text' AND h.color = 0"
    ).fetchall()
    con.close()
    assert len(text) == len(PROGRAMS)
    for module_id, heap_peak in text:
        rows = bufferhouse.query("heap-timeline", db=split_db, module=str(module_id)).to_pylist()
        assert {r["source"] for r in rows} == {"live_ranges"}
        assert max(r["live_bytes"] for r in rows) == heap_peak
        listed = bufferhouse.query("peak-buffers", db=split_db, module=str(module_id))
        assert set(listed["peak_source"].to_pylist()) == {"live_ranges"}


@pytest.mark.slow
def test_text_and_proto_draw_the_trace_like_the_proto_alone(proto_db: Path) -> None:
    """A text dump beside its proto: the trace wins, so heap-timeline and peak-buffers
    equal those of the same compile read from the proto alone (not the live-range sweep)."""
    con = duckdb.connect(str(proto_db), read_only=True)
    pairs = con.execute(
        "SELECT b.module_id, p.module_id FROM modules b JOIN modules p"
        " USING (assignment_fingerprint) WHERE b.source_kind = 'text+proto'"
        " AND p.source_kind = 'proto'"
    ).fetchall()
    con.close()
    assert len(pairs) >= len(PROGRAMS)
    for both, alone in pairs:
        for name in ("heap-timeline", "peak-buffers"):
            a, b = (
                bufferhouse.query(name, db=proto_db, module=str(m), top=1000)
                if name == "peak-buffers"
                else bufferhouse.query(name, db=proto_db, module=str(m))
                for m in (both, alone)
            )
            keep = [c for c in a.column_names if c != "module_id"]
            assert a.select(keep).to_pylist() == b.select(keep).to_pylist(), (name, both)


@pytest.mark.slow
def test_trace_queries_return_the_rows_of_the_trace_views(proto_db: Path) -> None:
    """heap-trace, heap-timeline and peak-buffers read heap_events scoped to the module
    (for speed); the heap_trace_steps and heap_peak_values views define the same rows
    for every module at once. Both forms agree on every module with a trace."""
    from bufferhouse import queries

    con = duckdb.connect(str(proto_db), read_only=True)
    queries.use_package_views(con)
    ids = [r[0] for r in con.execute("SELECT DISTINCT module_id FROM heap_events").fetchall()]
    steps = {
        m: con.execute(
            "SELECT step, trace_index, event_index, kind, instruction, value_id, size,"
            " heap_bytes, static_bytes, live_bytes, is_trace_peak, is_peak"
            " FROM heap_trace_steps WHERE module_id = ? AND color = 0 ORDER BY step",
            [m],
        ).fetchall()
        for m in ids
    }
    peak_values = {
        m: sorted(
            con.execute(
                "SELECT peak_time, value_id, allocation_index, category, size, logical_bytes,"
                " live_at_peak FROM heap_peak_values WHERE module_id = ? AND color = 0",
                [m],
            ).fetchall()
        )
        for m in ids
    }
    con.close()
    assert len(ids) >= 14
    for m in ids:
        key = str(m)
        trace = bufferhouse.query("heap-trace", db=proto_db, module=key).to_pylist()
        cols = ("trace_index", "event_index", "kind", "instruction", "value_id", "size")
        cols += ("heap_bytes", "static_bytes", "live_bytes", "is_peak")
        assert [_pick(r, cols) for r in trace] == [s[1:11] for s in steps[m]]
        timeline = bufferhouse.query("heap-timeline", db=proto_db, module=key).to_pylist()
        cols = ("time", "instruction", "indefinite_bytes", "temp_bytes", "live_bytes", "is_peak")
        assert [_pick(r, cols) for r in timeline] == [
            (s[0], s[4], s[8], s[7], s[9], s[11]) for s in steps[m]
        ]
        listed = bufferhouse.query("peak-buffers", db=proto_db, module=key, top=100_000)
        cols = ("peak_time", "value_id", "allocation_index", "category", "size")
        cols += ("logical_bytes", "live_at_peak")
        assert sorted(_pick(r, cols) for r in listed.to_pylist()) == peak_values[m]


def _pick(row: dict, columns: tuple[str, ...]) -> tuple:
    return tuple(row[c] for c in columns)


def test_the_summary_counts_skipped_protos_with_the_modules(tmp_path: Path) -> None:
    """The skipped count sits with the module counts, not after the OOM events'."""
    from click.testing import CliRunner

    from bufferhouse.cli import main

    result = CliRunner().invoke(
        main, ["ingest", str(PROTO / "proto_only"), "--db", str(tmp_path / "w.duckdb"), "-q"]
    )
    assert result.exit_code == 0, result.output
    assert "0 failed, 1 skipped (HloProtos without buffer assignment); " in result.stderr
