"""OOM messages in logs: every number parsed from the fixtures under tests/data/oom,
line numbers and byte offsets against an independent search of the file, the
scanner's chunking, bad input, and the warehouse round trip (idempotency, labels)."""

from __future__ import annotations

import gzip
import html
import shutil
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bufferhouse
from bufferhouse.parse.discover import discover_logs
from bufferhouse.parse.oom import parse_event, scan_file
from bufferhouse.parse.oom.sizes import SizeError, parse_size
from tests.conftest import DATA

OOM = DATA / "oom"
G, M, K = 1 << 30, 1 << 20, 1 << 10


def one(name: str):
    scan = scan_file(str(OOM / name))
    assert scan.problems == []
    assert len(scan.events) == 1, [e.form for e in scan.events]
    return scan.events[0]


def first_line_of(name: str, needle: bytes) -> tuple[int, int]:
    """(1-based line, byte offset of that line) of the first line holding `needle`."""
    data = (OOM / name).read_bytes()
    if name.endswith(".gz"):
        data = gzip.decompress(data)
    at = data.index(needle)
    start = data.rfind(b"\n", 0, at) + 1
    return data.count(b"\n", 0, start) + 1, start


# --- sizes ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("16B", (16, True)),
        ("0B", (0, True)),
        ("1.5KiB", (1536, False)),
        ("768.00MiB", (768 * M, False)),
        ("3.00GiB", (3 * G, False)),
        ("15.25GiB", (int(15.25 * G), False)),
        ("48.0K", (48 * K, False)),
        ("2.23G", (round(2.23 * G), False)),
        ("-2.02G", (-round(2.02 * G), False)),
        ("1.00T", (1 << 40, False)),
        ("12345", (12345, True)),
    ],
)
def test_sizes(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["2.00QiB", "about a gigabyte", "", "G"])
def test_sizes_that_do_not_parse_say_what_was_expected(text):
    with pytest.raises(SizeError, match=r"expected|unknown unit"):
        parse_size(text)


# --- each form, every number ---------------------------------------------------------


def test_xla_peak_buffers_gpu():
    e = one("gpu-peak-buffers.log")
    line, offset = first_line_of("gpu-peak-buffers.log", b"RESOURCE_EXHAUSTED")
    assert (e.line, e.byte_offset, e.end_line) == (line, offset, 40)
    assert (e.family, e.form, e.truncated, e.problems) == ("xla", "buffer_assignment", False, [])
    assert e.fields["error_type"] == "jaxlib.xla_extension.XlaRuntimeError"
    assert e.fields["program_name"] == "jit_update_fn"
    assert e.figures == {
        "requested": 6442450944,
        "parameter_allocation": 3 * G,
        "constant_allocation": 272,
        "maybe_live_out_allocation": 3 * G,
        "preallocated_temp_allocation": int(9.25 * G),
        "preallocated_temp_fragmentation": 1024,
        "total_allocation": int(15.25 * G),
        "total_fragmentation": 1024,
    }
    assert sorted(e.exact) == ["constant_allocation", "requested"]
    assert e.fields["total_fragmentation_percent"] == 0.0
    b1, b2, b3, b4 = e.buffers
    assert b1 | {} == {
        **b1,
        "rank": 1,
        "line": 17,
        "size_bytes": 6 * G,
        "size_exact": False,
        "size_text": "6.00GiB",
        "op_name": "jit(update_fn)/jit(main)/transformer/attn/dot_general",
        "source_file": "model/attn.py",
        "source_line": 201,
        "xla_label": "fusion",
        "opcode": "fusion",
        "shape": "f32[16,32,2048,1536]",
        "element_type": "f32",
        "dims": [16, 32, 2048, 1536],
        "logical_bytes": 6 * G,
        "is_entry_parameter": False,
    }
    assert (b2["rank"], b2["size_bytes"], b2["is_entry_parameter"], b2["shape"]) == (
        2,
        3 * G,
        True,
        "bf16[49152,32768]",
    )
    assert b2["logical_bytes"] == b2["size_bytes"]  # the shape's bytes: an independent check
    assert (b3["op_type"], b3["source_line"], b3["minor_to_major"], b3["size_bytes"]) == (
        "transpose",
        88,
        [0, 1],
        768 * M,
    )
    assert b3["logical_bytes"] == 768 * M
    assert (b4["size_bytes"], b4["size_text"], b4["opcode"], b4["logical_bytes"]) == (
        1536,
        "1.5KiB",
        "constant",
        1536,
    )
    assert e.text.startswith("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED")
    assert e.text.endswith("\t\t==========================")


def test_tpu_compile_time():
    e = one("tpu-compile.log")
    line, offset = first_line_of("tpu-compile.log", b"RESOURCE_EXHAUSTED")
    assert (e.line, e.byte_offset, e.end_line) == (line, offset, 44)
    assert (e.family, e.form, e.truncated, e.problems) == ("tpu", "tpu_compile", False, [])
    assert e.fields["memory_space"] == "hbm"
    assert e.fields["program_name"] == "jit_loss_fn"
    assert e.fields["hlo_temp_utilization"] == 62.5
    r = round
    assert e.figures == {
        "used": r(20.5 * G),
        "capacity": r(15.75 * G),
        "exceeded": r(4.75 * G),
        "total_usage": r(21.02 * G),
        "total_usage/reserved": 532 * M,
        "total_usage/program": r(18.5 * G),
        "total_usage/arguments": 2 * G,
        "output": 2 * G,
        "output_shared": 2 * G,
        "program_requirement": r(18.5 * G),
        "program_requirement/global": 48 * K,
        "program_requirement/scoped": 16 * M,
        "program_requirement/hlo_temp": r(18.48 * G),
        "program_requirement/hlo_temp/unpadded": r(11.55 * G),
        "program_requirement/hlo_temp/padded": r(18.48 * G),
        "program_requirement/hlo_temp/fragmentation": 4 * M,
    }
    assert e.exact == []
    b1, b2, b3 = e.buffers
    assert (b1["size_bytes"], b1["unpadded_bytes"], b1["padding_bytes"]) == (8 * G, 8 * G, 0)
    assert (b1["tiles"], b1["dims"], b1["logical_bytes"]) == ("(8,128)", [32, 2048, 32768], 8 * G)
    assert (b1["instruction"], b1["opcode"], b1["allocation_type"]) == (
        "fusion.41",
        "fusion",
        "HLO temp",
    )
    assert b1["source_file"] == "model/decoder.py" and b1["source_line"] == 342
    # 2: the padding as printed (29.50M, 12.8x), and the tiling that explains it
    assert (b2["size_bytes"], b2["unpadded_bytes"]) == (32 * M, r(2.5 * M))
    assert (b2["padding_bytes"], b2["padding_expansion"]) == (r(29.5 * M), 12.8)
    assert b2["logical_bytes"] == 65536 * 10 * 4 == b2["unpadded_bytes"]
    assert b2["size_bytes"] == 65536 * 128 * 4  # the minor dim padded to the 128 tile
    assert (b2["op_type"], b2["instruction"], b2["opcode"]) == ("OneHot", "iota.3", "iota")
    # 3: a label over two lines, a scoped allocation, padding computed (not printed)
    assert b3["xla_label"].endswith('metadata={op_name="jit(loss_fn)/jit(main)/transpose"}')
    assert "\n" in b3["xla_label"]
    assert (b3["instruction"], b3["opcode"], b3["allocation_type"]) == ("copy.12", "copy", "scoped")
    assert (b3["tiles"], b3["padding_bytes"], b3["padding_expansion"]) == ("(8,128)(2,1)", 0, 1.0)


def test_tpu_run_time_exact_bytes():
    e = one("tpu-runtime.log")
    line, offset = first_line_of("tpu-runtime.log", b"RESOURCE_EXHAUSTED")
    assert (e.line, e.byte_offset, e.end_line) == (line, offset, 13)
    assert (e.family, e.form, e.truncated, e.problems) == ("tpu", "tpu_runtime", False, [])
    assert e.fields["program_name"] == "jit_train_step"
    assert e.fields["memory_space"] == "hbm"
    assert e.figures == {
        "requested": round(4.25 * G),
        "free": round(2.23 * G),
        "free_reserved": 0,
        "reservable": round(2.23 * G),
        "capacity": 16_911_433_728,
        "hbm_capacity/top-of-memory_reserved": 557_842_432,
        "hbm_capacity/currently_allocated": 13_958_643_712,
        "hbm_capacity/program_requirement": 4_563_402_752,
        "hbm_capacity/available_after_request": -2_168_455_168,
        "heap_allocator_status/heap_allocations_(without_fragmentation)": 13_690_208_256,
        "heap_allocator_status/fragmentation": 268_435_456,
        "persistent_allocations/arguments": 6_442_450_944,
        "persistent_allocations/output": 2_147_483_648,
    }
    # exact where the text gives bytes in parentheses; the reserve request is rounded
    assert set(e.exact) == set(e.figures) - {"requested", "free", "reservable"}
    f = e.figures
    assert (
        f["capacity"]
        - f["hbm_capacity/top-of-memory_reserved"]
        - f["hbm_capacity/currently_allocated"]
        - f["hbm_capacity/program_requirement"]
        == f["hbm_capacity/available_after_request"]
    )
    assert e.fields["output_utilization"] == 87.5
    assert e.buffers == []


def test_one_line_form():
    e = one("one-line.txt")
    assert (e.line, e.end_line, e.form, e.family) == (2, 2, "allocation", "tpu")
    assert e.figures == {"requested": 68719476736, "capacity": 17179869184}
    assert sorted(e.exact) == ["capacity", "requested"]
    assert e.fields["memory_space"] == "hbm"
    (b,) = e.buffers
    assert (b["size_bytes"], b["size_exact"], b["size_text"]) == (
        68719476736,
        True,
        "0xffffffffffffffff",
    )
    assert b["logical_bytes"] == b["size_bytes"]  # f32[131072,131072]: the request itself
    assert (b["tag"], b["instruction"], b["tiles"]) == (
        "output of multiply_add_fusion.3@{}",
        "multiply_add_fusion.3",
        "(8,128)",
    )


def test_cut_short_keeps_what_it_has():
    e = one("cut-short.txt")
    assert (e.form, e.truncated, e.line, e.end_line) == ("tpu_compile", True, 3, 24)
    assert e.fields["memory_space"] == "vmem"
    assert e.figures["used"] == 130 * M and e.figures["capacity"] == 128 * M
    assert e.figures["exceeded"] == 2 * M and e.figures["total_usage/arguments"] == 0
    assert "total_usage/arguments" in e.exact
    b1, b2 = e.buffers
    assert (b1["size_bytes"], b1["allocation_type"]) == (64 * M, "scoped")
    assert (b2["size_bytes"], b2["shape"], b2["tiles"]) == (
        48 * M,
        "bf16[96,262144]{1,0:T(16,128)(2,1)}",
        "(16,128)(2,1)",
    )
    assert e.fields["program_name"] == "jit_kernel"
    assert [(p.line, p.message) for p in e.problems] == [
        (24, "allocation 2 is cut short (no ===== line)")
    ]


def test_cut_short_without_first_line():
    e = one("gpu-cut-mid-stats.txt")
    assert (e.form, e.truncated, e.line, e.end_line) == ("buffer_assignment", True, 2, 4)
    assert e.figures == {"parameter_allocation": 4 * G}
    assert [p.line for p in e.problems] == [2, 4]


@pytest.mark.parametrize(
    ("name", "line", "figures", "buffers"),
    [
        (
            "glog-every-line.log",
            2,
            {
                "requested": 3 * G,
                "parameter_allocation": G,
                "constant_allocation": 8,
                "maybe_live_out_allocation": G,
                "preallocated_temp_allocation": 3 * G,
                "preallocated_temp_fragmentation": 96 * K,
                "total_allocation": 5 * G,
                "total_fragmentation": 96 * K,
            },
            [(1, 3 * G, "bf16[16,8192,12288]", False), (2, G, "s8[1073741824]", True)],
        ),
        (
            "prefixed-rank.out",
            2,
            {
                "requested": 2 * G,
                "parameter_allocation": 512 * M,
                "constant_allocation": 0,
                "maybe_live_out_allocation": 512 * M,
                "preallocated_temp_allocation": 2 * G,
                "total_allocation": int(2.5 * G),
            },
            [(1, 2 * G, "f32[8,4096,16384]", False)],
        ),
        (
            "prefixed-iso.err",
            2,
            {
                "requested": G,
                "parameter_allocation": 256 * M,
                "constant_allocation": 64,
                "maybe_live_out_allocation": 256 * M,
                "preallocated_temp_allocation": int(1.25 * G),
                "total_allocation": int(1.5 * G),
                "total_fragmentation": 256 * M,
            },
            [(1, G, "f32[1024,262144]", False)],
        ),
    ],
)
def test_log_prefixes_are_stripped(name, line, figures, buffers):
    e = one(name)
    assert (e.line, e.truncated, e.problems) == (line, False, [])
    assert e.figures == figures
    got = [(b["rank"], b["size_bytes"], b["shape"], b["is_entry_parameter"]) for b in e.buffers]
    assert got == buffers
    for b in e.buffers:
        assert b["logical_bytes"] == b["size_bytes"]


def test_another_ranks_lines_are_not_part_of_the_message():
    e = one("prefixed-rank.out")
    assert "[rank5]" not in e.text and "step 88 loss 1.95" not in e.text
    assert e.fields["program_name"] == "pmap_step"
    assert e.end_line == 17


def test_first_line_only_prefix_and_tf_wrapper():
    e = one("prefixed-iso.err")
    assert e.end_line == 17 and e.fields["total_fragmentation_percent"] == 16.67
    assert e.fields["program_name"] == "jit_serve"
    assert e.buffers[0]["op_type"] == "MatMul" and e.buffers[0]["opcode"] == "custom-call"


@pytest.mark.slow
def test_several_per_file_gzip_and_every_chunk_size():
    scan = scan_file(str(OOM / "several.log.gz"))
    assert scan.problems == []
    forms = [(e.form, e.line, e.byte_offset, len(e.buffers)) for e in scan.events]
    marks = [
        first_line_of("several.log.gz", b"allocate 6442450944"),
        first_line_of("several.log.gz", b"XLA:TPU compile"),
        first_line_of("several.log.gz", b"would exceed"),
    ]
    assert forms == [
        ("buffer_assignment", *marks[0], 4),
        ("tpu_compile", *marks[1], 3),
        ("allocation", *marks[2], 1),
    ]
    # the same events as the plain files, number for number
    plain = [one("gpu-peak-buffers.log"), one("tpu-compile.log"), one("one-line.txt")]
    for got, want in zip(scan.events, plain, strict=True):
        shift = got.line - want.line
        assert [b["line"] - shift for b in got.buffers] == [b["line"] for b in want.buffers]
        strip = [{k: v for k, v in b.items() if k != "line"} for b in got.buffers]
        assert strip == [{k: v for k, v in b.items() if k != "line"} for b in want.buffers]
        assert (got.figures, got.text, got.raw) == (want.figures, want.text, want.raw)
    key = [(e.line, e.byte_offset, e.figures, e.buffers, e.raw) for e in scan.events]
    for chunk in (1, 7, 64, 333, 4096):
        again = scan_file(str(OOM / "several.log.gz"), chunk=chunk)
        assert [(e.line, e.byte_offset, e.figures, e.buffers, e.raw) for e in again.events] == key


def test_crlf_reads_as_lf():
    crlf, lf = one("crlf.txt"), one("tpu-compile.log")
    assert (crlf.figures, crlf.buffers, crlf.text, crlf.line) == (
        lf.figures,
        lf.buffers,
        lf.text,
        lf.line,
    )
    assert crlf.byte_offset == lf.byte_offset + (lf.line - 1)  # one CR more per line before


def test_non_utf8_bytes_are_replaced_and_reported():
    e = one("non-utf8.log")
    base = one("gpu-peak-buffers.log")
    assert e.figures == base.figures
    assert e.buffers[2]["op_name"] == "jit(update_fn)/jit(main)/transformer/ml\ufffdp/transpose"
    assert [(p.line, p.message) for p in e.problems] == [
        (31, "bytes that are not UTF-8 at byte 81 of the line; read as U+FFFD")
    ]


def test_bad_input_loads_what_was_readable():
    e = one("bad-input.log")
    assert (e.line, e.end_line, e.truncated) == (2, 25, False)
    assert "parameter_allocation" not in e.figures
    assert e.figures["total_allocation"] == 7 * G and e.figures["requested"] == 4 * G
    b1, b2 = e.buffers
    # the Operator line a terminal wrapped is joined again
    assert b1["op_name"] == (
        "jit(step)/jit(main)/very/long/name/scope/that/the/terminal/wrapped/at/eighty/columns/dot_general"
    )
    assert (b1["source_file"], b1["source_line"], b1["size_bytes"]) == ("/w/m.py", 9, 4 * G)
    assert (b2["size_text"], b2["opcode"], b2["shape"]) == (
        "about a gigabyte",
        "copy",
        "f32[1024,x]",
    )
    assert b2.get("size_bytes") is None and b2.get("element_type") is None
    assert [(p.line, p.message.split(":")[0]) for p in e.problems] == [
        (5, "parameter_allocation"),
        (14, "line joined to the one before (wrapped by a terminal?)"),
        (19, "expected a `Buffer N"),
        (22, "buffer 2 size"),
        (24, "shape"),
    ]
    assert "unknown unit 'QiB'" in e.problems[0].message
    assert e.problems[2].text == "[worker-2] heartbeat ok"


def test_a_log_without_messages_has_no_events():
    assert scan_file(str(OOM / "no-oom.log")).events == []


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(st.text(max_size=80), max_size=30), st.booleans())
def test_arbitrary_lines_never_raise(lines, eof):
    from bufferhouse.parse.oom.messages import NeedMore

    seeded = ["RESOURCE_EXHAUSTED: Out of memory while trying to allocate 12 bytes.", *lines]
    try:
        parse_event(seeded, 1, at_eof=True)
        parse_event(lines or [""], 1, at_eof=True)
        parse_event(["Peak buffers:", *lines], 1, at_eof=eof)
    except NeedMore:
        assert not eof


def test_a_gz_of_several_members_reads_whole(tmp_path):
    two = tmp_path / "two.log.gz"
    two.write_bytes(
        gzip.compress((OOM / "gpu-peak-buffers.log").read_bytes())
        + gzip.compress((OOM / "one-line.txt").read_bytes())
    )
    scan = scan_file(str(two))
    assert scan.problems == []
    assert [(e.form, e.line) for e in scan.events] == [("buffer_assignment", 6), ("allocation", 45)]


def test_a_truncated_gz_keeps_the_events_before_the_cut(tmp_path):
    data = (OOM / "several.log.gz").read_bytes()
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(data[: len(data) - 40])
    scan = scan_file(str(cut))
    assert [e.form for e in scan.events][:2] == ["buffer_assignment", "tpu_compile"]
    assert scan.problems and "truncated .gz" in scan.problems[0].message


# --- discovery and the warehouse -------------------------------------------------------


def test_discover_logs_skips_xla_dump_names(tmp_path):
    (tmp_path / "job.log").write_text("x")
    (tmp_path / "job.err.gz").write_bytes(gzip.compress(b"x"))
    (tmp_path / "notes.md").write_text("x")
    (tmp_path / "module_0001.jit_f.cpu_after_optimizations.txt").write_text("x")
    (tmp_path / "module_0001.jit_f.cpu_after_optimizations-buffer-assignment.txt").write_text("x")
    found = [Path(log.path).name for log in discover_logs([tmp_path])]
    assert found == ["job.err.gz", "job.log"]


def test_a_dump_file_given_by_name_is_read_once_as_a_module(tmp_path):
    """XLA's dump files hold no OOM message: given by name they are modules, not logs too
    (a large one was read twice and kept from the threads of a module parsed alone)."""
    dump = tmp_path / "module_0001.jit_f.cpu_after_optimizations-buffer-assignment.txt"
    dump.write_text("x")
    log = tmp_path / "job.log"
    log.write_text("x")
    renamed = tmp_path / "dump-copy.txt"
    renamed.write_text("x")
    found = [Path(entry.path).name for entry in discover_logs([dump, log, renamed])]
    assert found == ["dump-copy.txt", "job.log"]


@pytest.fixture
def forms_db(tmp_path):
    db = tmp_path / "oom.duckdb"
    report = bufferhouse.ingest([OOM], db=db, labels={"team": "infra"}, jobs=1)
    assert report.ok and not report.loaded
    return db, report


def test_ingest_loads_every_event_whole(forms_db):
    db, report = forms_db
    assert report.events_loaded == 15
    con = duckdb.connect(str(db), read_only=True)
    try:
        events = con.execute(
            "SELECT count(*), sum(buffer_count), sum(problem_count) FROM oom_events"
        ).fetchone()
        buffers = con.execute("SELECT count(*) FROM oom_buffers").fetchone()[0]
        orphans = con.execute(
            "SELECT count(*) FROM oom_buffers WHERE event_id NOT IN (SELECT event_id FROM oom_events)"
        ).fetchone()[0]
        diags = con.execute(
            "SELECT count(*) FROM diagnostics WHERE event_id IS NOT NULL AND severity = 'warning'"
        ).fetchone()[0]
        req = con.execute(
            "SELECT requested_bytes, capacity_bytes, exact_figures FROM oom_events "
            "WHERE path LIKE '%one-line.txt'"
        ).fetchone()
    finally:
        con.close()
    assert events[0] == 15 and events[1] == buffers and orphans == 0
    assert diags == events[2]  # each problem of an event is a diagnostics row
    assert req == (68719476736, 17179869184, ["capacity", "requested"])


def test_ingest_twice_adds_nothing_and_labels_the_events(forms_db, tmp_path):
    db, _ = forms_db
    again = bufferhouse.ingest([OOM], db=db, labels={"run": "2"}, jobs=1)
    assert (again.events_loaded, again.events_present) == (0, 15)
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM oom_events").fetchone()[0] == 15
        labels = con.execute(
            "SELECT key, value, count(DISTINCT event_id) FROM oom_labels GROUP BY ALL ORDER BY 1"
        ).fetchall()
    finally:
        con.close()
    assert labels == [("run", "2", 15), ("team", "infra", 15)]


def test_a_log_that_grew_adds_only_its_new_events(tmp_path):
    log = tmp_path / "train.log"
    shutil.copy(OOM / "gpu-peak-buffers.log", log)
    db = tmp_path / "w.duckdb"
    assert bufferhouse.ingest([log], db=db, jobs=1).events_loaded == 1
    with open(log, "ab") as f:
        f.write((OOM / "one-line.txt").read_bytes())
    grown = bufferhouse.ingest([log], db=db, jobs=1)
    assert (grown.events_loaded, grown.events_present) == (1, 1)
    # gzipped, the same log is the same events
    with gzip.open(tmp_path / "train.log.gz", "wb") as f:
        f.write(log.read_bytes())
    log.unlink()
    again = bufferhouse.ingest([tmp_path / "train.log.gz"], db=db, jobs=1)
    assert (again.events_loaded, again.events_present) == (0, 2)


def test_a_named_file_without_a_message_fails_with_what_was_expected(tmp_path):
    db = tmp_path / "w.duckdb"
    report = bufferhouse.ingest([OOM / "no-oom.log"], db=db, jobs=1)
    assert len(report.failed) == 1
    assert "RESOURCE_EXHAUSTED" in report.failed[0].error.message
    quiet = bufferhouse.ingest([OOM], db=db, jobs=1)
    assert not quiet.failed  # in a directory, the same file is skipped quietly


# --- the join: a real JAX module's dump beside the OOM message rendered from it -------------

JOIN = DATA / "oom-join"


def test_an_oom_joins_the_dump_of_its_module(oom_db):
    """tests/data/oom-join: train_step compiled by JAX on CPU (dump/), and train.log whose
    message make_fixture.py rendered from that dump. Each listed buffer must meet, in the
    dump, the value the message was rendered from: the printed peak list, largest first."""
    import json
    import re

    manifest = json.loads((JOIN / "manifest.json").read_text())
    live = (JOIN / "dump" / f"{manifest['module']}-live-range.txt").read_text()
    listed = re.search(r"Live ranges at \d+ \(peak\):\n((?:    .*\n)+)", live).group(1)
    peak = [
        (int(m.group(2)), m.group(1)) for m in re.finditer(r"    (\S+?)\{\}: (\d+) bytes", listed)
    ]
    peak.sort(key=lambda p: -p[0])  # stable, as the renderer sorted

    rows = bufferhouse.query("oom-vs-peak", db=oom_db).to_pylist()
    assert [r["rank"] for r in rows] == list(range(1, len(peak) + 1))
    assert {r["module_name"] for r in rows} == {"jit_train_step"}
    for row, (size, instruction) in zip(rows, peak, strict=True):
        assert row["instruction"] == instruction, row
        assert row["peak_size"] == size == row["oom_size_bytes"]  # powers of two: exact
        assert row["in_logical_peak"] is True
        # the message printed no source line: op_name, shape and size, or shape and size
        want = "shape+size" if row["oom_op_name"] is None else "op_name+shape+size"
        assert row["matched_by"] == want

    events = bufferhouse.query("oom-events", db=oom_db, program="jit_train_step").to_pylist()
    # the run-time fixture names a program jit_train_step too; it lists no buffer
    assert sorted((e["path"].split("data/")[-1], e["line"]) for e in events) == [
        ("oom-join/train.log", 6),
        ("oom/tpu-runtime.log", 2),
    ]
    con = duckdb.connect(str(oom_db), read_only=True)
    try:
        stats = con.execute(
            "SELECT parameter_bytes, maybe_live_out_bytes, temp_bytes, exact_figures "
            "FROM oom_events WHERE program_name = 'jit_train_step' AND path LIKE '%train.log'"
        ).fetchone()
    finally:
        con.close()
    # against memory_analysis() of the same compile: rounded to the printed two decimals
    for got, want in zip(stats[:3], ("argument", "output", "temp"), strict=True):
        assert abs(got - manifest[f"{want}_size_in_bytes"]) <= 0.005 * (1 << 20), want
    assert stats[2] == manifest["temp_size_in_bytes"]


def test_oom_queries_filter_by_label(tmp_path):
    db = tmp_path / "w.duckdb"
    bufferhouse.ingest([OOM / "tpu-compile.log"], db=db, labels={"team": "a"}, jobs=1)
    bufferhouse.ingest([OOM / "one-line.txt"], db=db, labels={"team": "b"}, jobs=1)
    got = bufferhouse.query("oom-events", db=db, label="team=a").to_pylist()
    assert [(r["form"], r["labels"]) for r in got] == [("tpu_compile", "team=a")]
    culprits = bufferhouse.query("oom-culprits", db=db, label="team=b").to_pylist()
    assert culprits == []  # the one-line form lists no op_name
    assert len(bufferhouse.query("oom-padding", db=db, label="team=a")) == 1


# --- check, export, attach, upgrade ------------------------------------------------------


def test_check_passes_and_finds_a_half_event(oom_db, tmp_path):
    from bufferhouse.check import check_warehouse

    report = check_warehouse(oom_db)
    assert report.ok and report.checks["oom events"] == 0
    damaged = tmp_path / "damaged.duckdb"
    shutil.copy(oom_db, damaged)
    with duckdb.connect(str(damaged)) as con:
        con.execute("DELETE FROM oom_buffers WHERE rank = 2 AND line = 24")  # gpu fixture
        con.execute("DELETE FROM diagnostics WHERE line = 22 AND event_id IS NOT NULL")
    report = check_warehouse(damaged)
    messages = [p.message for p in report.problems if p.check == "oom events"]
    assert any("lists 4 buffers, 3 are stored" in m for m in messages), messages
    assert any("had 5 problems, 4 diagnostics name it" in m for m in messages), messages


def test_export_and_attach_keep_the_events(oom_db, tmp_path):
    from bufferhouse.export import attach, export_warehouse, read_table

    export_warehouse(tmp_path / "ds", db=oom_db)
    with duckdb.connect(str(oom_db), read_only=True) as con:
        for name in ("oom_events", "oom_buffers", "oom_labels"):
            want = con.sql(f"SELECT * FROM {name}").to_arrow_table()
            got = read_table(tmp_path / "ds", name, dedup=True)
            key = [("event_id", "ascending")] + (
                [("rank", "ascending")] if name == "oom_buffers" else []
            )
            assert got.sort_by(key).to_pylist() == want.sort_by(key).to_pylist(), name
    attach(tmp_path / "ds", db=tmp_path / "views.duckdb")
    for name in ("oom-events", "oom-culprits", "oom-padding", "oom-vs-peak"):
        assert (
            bufferhouse.query(name, db=tmp_path / "views.duckdb").to_pylist()
            == bufferhouse.query(name, db=oom_db).to_pylist()
        ), name


def test_parquet_writers_add_an_event_once(tmp_path):
    from bufferhouse.export import attach, ingest_to_parquet, read_table

    first = ingest_to_parquet([OOM], tmp_path / "ds", labels={"a": "1"}, jobs=1)
    again = ingest_to_parquet([OOM], tmp_path / "ds", labels={"b": "2"}, jobs=1)
    assert (first.events_loaded, again.events_loaded, again.events_present) == (15, 0, 15)
    assert read_table(tmp_path / "ds", "oom_events", dedup=True).num_rows == 15
    labels = read_table(tmp_path / "ds", "oom_labels", dedup=True)
    assert sorted({(r["key"], r["value"]) for r in labels.to_pylist()}) == [("a", "1"), ("b", "2")]
    attach(tmp_path / "ds", db=tmp_path / "v.duckdb")
    rows = bufferhouse.query("oom-events", db=tmp_path / "v.duckdb", label="b=2").to_pylist()
    assert len(rows) == 15 and {r["labels"] for r in rows} == {"a=1,b=2"}


def test_a_version_5_warehouse_gains_the_oom_tables(tmp_path):
    from bufferhouse.schema import SCHEMA_VERSION
    from bufferhouse.schema.warehouse import connect, schema_version

    db = tmp_path / "old.duckdb"
    bufferhouse.ingest([OOM / "one-line.txt"], db=db, jobs=1)
    with duckdb.connect(str(db)) as con:  # what schema 5 had: no OOM tables, no event_id
        for name in ("oom_events", "oom_buffers", "oom_labels"):
            con.execute(f"DROP TABLE {name}")
        con.execute("ALTER TABLE diagnostics DROP COLUMN event_id")
        con.execute("UPDATE schema_info SET value = '5' WHERE key = 'schema_version'")
    report = bufferhouse.ingest([OOM / "one-line.txt"], db=db, jobs=1)
    assert report.events_loaded == 1
    con = connect(db)
    try:
        assert schema_version(con) == SCHEMA_VERSION  # 5 -> 6, then on to the latest
        assert con.execute("SELECT count(*) FROM oom_events").fetchone()[0] == 1
    finally:
        con.close()


@pytest.mark.slow
def test_a_large_log_searched_by_several_processes_reads_the_same(tmp_path, monkeypatch):
    """The parallel search (large plain logs) splits the file anywhere, even inside a
    message or a marker: the events are those of the one-process scan."""
    from bufferhouse.parse.oom import scan as oom_scan

    log = tmp_path / "big.log"
    log.write_bytes(gzip.decompress((OOM / "several.log.gz").read_bytes()) * 3)
    one = scan_file(str(log), jobs=1)
    monkeypatch.setattr(oom_scan, "PARALLEL_MIN_BYTES", 1)
    for jobs in (2, 7):
        many = scan_file(str(log), jobs=jobs)
        assert [(e.line, e.byte_offset, e.raw, e.buffers) for e in many.events] == [
            (e.line, e.byte_offset, e.raw, e.buffers) for e in one.events
        ]
    assert len(one.events) == 9


@pytest.mark.slow
def test_the_report_has_an_oom_section_when_there_are_events(oom_db, tmp_path, samples_db):
    pytest.importorskip("matplotlib")
    from bufferhouse import visual

    written = visual.write_report(tmp_path / "r.html", db=oom_db, rows=5)
    data = written.data
    events = bufferhouse.query("oom-events", db=oom_db).to_pylist()
    assert data.oom_event_count == len(events) == 16
    newest = sorted(events, key=lambda r: -r["event_id"])[:5]
    assert [r["event_id"] for r in data.oom_events] == [r["event_id"] for r in newest]
    culprits = bufferhouse.query("oom-culprits", db=oom_db, top=5).to_pylist()
    assert data.oom_culprits == culprits
    page = written.path.read_text()
    assert '<section id="oom">' in page and 'href="#oom"' in page
    assert 'data-table="oom-culprits"' in page
    shown = page.replace("<wbr>", "")  # names may break after '/', '_' or '.'
    for r in culprits:
        assert html.escape(r["op_name"], quote=True) in shown
    # without events, no section
    plain = visual.write_report(tmp_path / "p.html", db=samples_db)
    assert plain.data.oom_events == [] and '<section id="oom">' not in plain.path.read_text()
