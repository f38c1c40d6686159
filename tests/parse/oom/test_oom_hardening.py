"""The OOM-log reader against what an attack on it found (issue 31): absurd and negative
sizes, markers repeated on one line, CR-only logs, unreadable and corrupt files,
excerpts cut at the top, a message printed twice, a log that grew mid-message.

Every input is made here from the fixtures under tests/data/oom; numbers are checked
against the fixture's text (what XLA printed), lines against a search of the file.
"""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

import duckdb
import pytest

import bufferhouse
from bufferhouse.parse import parse_log
from bufferhouse.parse.discover import LogFile
from bufferhouse.parse.oom import scan, scan_file
from bufferhouse.parse.oom.sizes import SizeError, parse_size
from bufferhouse.parse.results import Failed, ParsedEvents
from tests.conftest import DATA

OOM = DATA / "oom"
GPU = (OOM / "gpu-peak-buffers.log").read_text()
TPU = (OOM / "tpu-compile.log").read_text()
RUNTIME = (OOM / "tpu-runtime.log").read_text()
G, M, K = 1 << 30, 1 << 20, 1 << 10
GPU_SIZES = [6 * G, 3 * G, 768 * M, 1536]  # Size: lines of gpu-peak-buffers.log
TPU_SIZES = [8 * G, 32 * M, G]  # N. Size: lines of tpu-compile.log


def line_of(text: str, needle: str, after: int = 0) -> int:
    """1-based line of the first `needle` in `text` at or after character `after`."""
    return text.count("\n", 0, text.index(needle, after)) + 1


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def sizes(event) -> list[int | None]:
    return [b.get("size_bytes") for b in event.buffers]


# --- item 3: an absurd figure loses that figure, not the log ----------------------------


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("allocate 6442450944 bytes", "allocate 1000000000000000000000000000000 bytes", "2^63"),
        ("Size: 6.00GiB", "Size: 8.00EiB", "2^63"),
        ("Size: 6.00GiB", "Size: " + "9" * 400 + "B", "2^63"),
        ("Size: 6.00GiB", "Size: " + "9" * 5000 + "B", "2^63"),
        ("Size: 6.00GiB", "Size: 6.00GiB (,,, bytes)", "expected a number of bytes"),
        ("Buffer 2:", "Buffer 99999999999:", "too large"),
        ("1.0KiB (0.00%)", "1.0KiB (0.0.0%)", "expected a number"),
        ("source_line=201", "source_line=" + "9" * 5000, "expected a line number"),
        ("Shape: f32[16,32,2048,1536]", "Shape: f32[4000000000000,4000000000000]", "2^63-1"),
    ],
)
def test_an_absurd_figure_loses_that_figure_not_the_log(tmp_path, old, new, expected):
    bad = GPU.replace(old, new, 1)
    text = GPU + bad + GPU
    result = parse_log(LogFile(str(write(tmp_path, "train.log", text))))
    assert isinstance(result, ParsedEvents), result
    assert result.events.events.num_rows == 3
    problems = [p for event in result.events.problems for p in event]
    assert [p.line for p in problems] == [line_of(text, new, len(GPU))]
    assert expected in problems[0].message and len(problems[0].message) < 300
    events = scan_file(str(tmp_path / "train.log")).events
    assert sizes(events[0]) == sizes(events[2]) == GPU_SIZES
    assert events[0].problems == events[2].problems == []


def test_an_absurd_exact_aside_in_a_tpu_figure(tmp_path):
    text = RUNTIME.replace("(  16,911,433,728 bytes)", "(,,, bytes)") + GPU
    events = scan_file(str(write(tmp_path, "t.log", text))).events
    assert [e.form for e in events] == ["tpu_runtime", "buffer_assignment"]
    assert "capacity" not in events[0].figures
    assert [p.line for p in events[0].problems] == [line_of(text, "(,,, bytes)")]
    assert events[0].figures["hbm_capacity/currently_allocated"] == 13_958_643_712


@pytest.mark.parametrize("text", ["8.00EiB", "9" * 20, "1" + "0" * 400 + "K", "9" * 5000 + "B"])
def test_sizes_beyond_a_bigint_do_not_parse(text):
    with pytest.raises(SizeError, match=r"2\^63"):
        parse_size(text)
    assert parse_size("7.99EiB")[0] < 1 << 63


# --- item 7: a negative size of memory is flagged, a negative difference is not ------------


@pytest.mark.parametrize(
    ("old", "new", "figure"),
    [
        ("Size: 6.00GiB", "Size: -6.00GiB", None),
        (
            "parameter allocation:    3.00GiB",
            "parameter allocation:    -3.00GiB",
            "parameter_allocation",
        ),
        ("allocate 6442450944 bytes", "allocate -6442450944 bytes", "requested"),
    ],
)
def test_negative_sizes_are_flagged_where_they_are(tmp_path, old, new, figure):
    text = GPU.replace(old, new, 1)
    (event,) = scan_file(str(write(tmp_path, "n.log", text))).events
    assert [p.line for p in event.problems] == [line_of(text, new)]
    assert "expected a size of 0 or more" in event.problems[0].message
    if figure is None:
        assert sizes(event) == [None, *GPU_SIZES[1:]]
    else:
        assert figure not in event.figures


def test_available_after_request_may_be_negative(tmp_path):
    (event,) = scan_file(str(OOM / "tpu-runtime.log")).events
    assert event.figures["hbm_capacity/available_after_request"] == -2_168_455_168
    assert event.problems == []


# --- item 5: markers repeated on one line cost one parse, not one per marker ---------------


def test_markers_repeated_on_one_line_are_parsed_once(tmp_path, monkeypatch):
    """20,000 markers on one line took 299 s: each was parsed from the line's start.
    The work is counted: one parse for the line, and the byte search's RE2 calls (a
    compile each) bounded by the line's length, not by its markers."""
    line = "x RESOURCE_EXHAUSTED Unpadded size: " * 20_000
    path = write(tmp_path, "noise.log", f"start\n{line}\n{GPU}")
    parses, searches = [], []
    parse_at, find = scan._parse_at, scan.pc.find_substring_regex

    def counted_parse(*args, **kwargs):
        parses.append(1)
        if len(parses) > 10:
            raise AssertionError("a parse per marker")
        return parse_at(*args, **kwargs)

    def counted_find(*args, **kwargs):
        searches.append(1)
        if len(searches) > 100:
            raise AssertionError("a search per marker")
        return find(*args, **kwargs)

    monkeypatch.setattr(scan, "_parse_at", counted_parse)
    monkeypatch.setattr(scan.pc, "find_substring_regex", counted_find)
    result = scan_file(str(path), jobs=1)
    assert result.problems == []
    assert [e.line for e in result.events] == [line_of(f"start\n{line}\n{GPU}", "jaxlib")]
    assert sizes(result.events[0]) == GPU_SIZES
    assert len(parses) <= 3  # the noise line, the message (and a retry with more bytes)
    assert len(searches) <= len(line) // scan.NEAR_HIT + 4


# --- item 10: CR-only logs, corrupt and unreadable files --------------------------------


def test_a_cr_only_log_is_read_like_its_lf_twin(tmp_path):
    text = "step 1\n" + GPU + TPU
    lf = scan_file(str(write(tmp_path, "lf.log", text))).events
    cr = scan_file(str(write(tmp_path, "cr.log", text.replace("\n", "\r")))).events
    assert [e.form for e in lf] == [e.form for e in cr] == ["buffer_assignment", "tpu_compile"]
    assert [sizes(e) for e in cr] == [GPU_SIZES, TPU_SIZES]
    assert [(e.line, e.end_line, e.byte_offset) for e in cr] == [
        (e.line, e.end_line, e.byte_offset) for e in lf
    ]
    assert [e.figures for e in cr] == [e.figures for e in lf]


@pytest.mark.parametrize(
    "data",
    [
        b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + b"\xff" * 64,  # a gzip header, then junk
        b"\x1f\x8b" + b"no gzip stream here",
        gzip.compress(GPU.encode())[:12],  # cut before any of its bytes came out
    ],
)
def test_a_corrupt_gz_with_nothing_readable_is_an_error_naming_it(tmp_path, data):
    path = write(tmp_path, "train.log.gz", data)
    result = parse_log(LogFile(str(path)))
    assert isinstance(result, Failed)
    assert result.error.path == str(path)
    assert "gz" in result.error.message and "read up to byte" in result.error.message


@pytest.mark.parametrize(
    "junk", [b"\x1f\x8bjunk", b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + b"\xff" * 64]
)
def test_a_corrupt_gz_in_a_directory_is_a_diagnostic(tmp_path, junk):
    (tmp_path / "logs").mkdir()
    write(tmp_path / "logs", "a.log.gz", junk)
    shutil.copy(OOM / "one-line.txt", tmp_path / "logs" / "b.log")
    db = tmp_path / "w.duckdb"
    report = bufferhouse.ingest([tmp_path / "logs"], db=db, jobs=1)
    assert report.events_loaded == 1
    assert [Path(o.error.path).name for o in report.failed] == ["a.log.gz"]
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT path, line, severity FROM diagnostics").fetchall()
    assert rows == [(str(tmp_path / "logs" / "a.log.gz"), 0, "error")]


def test_an_unreadable_log_is_an_error_naming_it(tmp_path, monkeypatch):
    path = write(tmp_path, "train.log", GPU)

    def denied(name):
        raise PermissionError(13, "Permission denied", name)

    monkeypatch.setattr(scan, "open_log", denied)
    result = parse_log(LogFile(str(path)))
    assert isinstance(result, Failed) and result.error.path == str(path)
    assert "cannot read file: Permission denied" in result.error.message


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file of mode 000")
def test_an_unreadable_log_by_its_mode(tmp_path):
    path = write(tmp_path, "train.log", GPU)
    path.chmod(0)
    try:
        result = parse_log(LogFile(str(path)))
    finally:
        path.chmod(0o644)
    assert isinstance(result, Failed) and "Permission denied" in result.error.message


# --- a message cut at the top is still a message -------------------------------------------


@pytest.mark.parametrize(
    ("start", "first_rank", "want"),
    [
        ("  2. Size: 32.00M", 2, [32 * M, G]),
        ("     Shape: s32[65536,10]", 2, [None, G]),
        ("     Unpadded size: 2.50M", 2, [None, G]),
        ("  3. Size: 1.00G", 3, [G]),
    ],
)
def test_a_tpu_excerpt_cut_inside_its_list_keeps_its_buffers(tmp_path, start, first_rank, want):
    text = "rotated: 2026-11-21\n" + TPU[TPU.index(start) :]
    (event,) = scan_file(str(write(tmp_path, "x.log", text))).events
    assert (event.family, event.fragment, event.truncated) == ("tpu", True, False)
    assert event.line == 2 and event.end_line == line_of(text, "==========", text.index("3. Size"))
    assert sizes(event) == want
    assert [b["rank"] for b in event.buffers] == list(range(first_rank, 4))
    assert event.buffers[-1]["shape"] == "bf16[4096,131072]{1,0:T(8,128)(2,1)}"
    assert event.buffers[-1]["allocation_type"] == "scoped"
    assert "without its first line" in event.problems[0].message


def test_an_xla_excerpt_cut_inside_its_list_keeps_its_buffers(tmp_path):
    text = "pasted:\n" + GPU[GPU.index("\t\tSize: 3.00GiB") :]
    (event,) = scan_file(str(write(tmp_path, "x.log", text))).events
    assert (event.family, event.fragment, event.line) == ("xla", True, 2)
    assert sizes(event) == GPU_SIZES[1:] and [b["rank"] for b in event.buffers] == [2, 3, 4]
    assert event.buffers[0]["is_entry_parameter"] is True


def test_a_fragment_is_stored_marked_so(tmp_path):
    write(tmp_path, "rotated.log", TPU[TPU.index("     Shape: s32") :])
    db = tmp_path / "w.duckdb"
    assert bufferhouse.ingest([tmp_path / "rotated.log"], db=db, jobs=1).events_loaded == 1
    with duckdb.connect(str(db), read_only=True) as con:
        event = con.execute("SELECT is_fragment, buffer_count FROM oom_events").fetchone()
        ranks = con.execute("SELECT rank, size_bytes FROM oom_buffers ORDER BY rank").fetchall()
    assert event == (True, 2) and ranks == [(2, None), (3, G)]


# --- an OOM printed twice is one OOM --------------------------------------------------------

STATUS = (
    "E1120 09:14:02.200000  4242 pjrt_stream_executor_client.cc:2985] Execution of replica 0"
    " failed: RESOURCE_EXHAUSTED: Out of memory while trying to allocate {} bytes.\n"
)


def test_a_status_line_and_the_report_that_repeats_it_are_one_event(tmp_path):
    at = GPU.index("Traceback")
    text = GPU[:at] + STATUS.format(6442450944) + GPU[at:]
    path = write(tmp_path, "twice.log", text)
    (event,) = scan_file(str(path)).events
    assert (event.line, event.end_line) == (line_of(text, "Execution of replica"), 41)
    assert event.byte_offset == text.index("E1120")
    assert sizes(event) == GPU_SIZES and event.figures["requested"] == 6442450944
    assert event.fields["error_type"] == "jaxlib.xla_extension.XlaRuntimeError"
    db = tmp_path / "w.duckdb"
    bufferhouse.ingest([path], db=db, jobs=1)
    rows = bufferhouse.query("oom-events", db=db).to_pylist()
    assert len(rows) == 1


def test_a_status_line_of_another_request_stays_its_own_event(tmp_path):
    at = GPU.index("Traceback")
    text = GPU[:at] + STATUS.format(1024) + GPU[at:]
    events = scan_file(str(write(tmp_path, "two.log", text))).events
    assert [len(e.buffers) for e in events] == [0, 4]
    assert events[0].figures == {"requested": 1024}


# --- item 8: a log that grew stores each message once ---------------------------------------


@pytest.mark.parametrize("eighth", range(1, 9))
def test_a_log_that_grew_mid_message_keeps_one_copy(tmp_path, eighth):
    at = GPU.index("Traceback")
    full = (GPU[:at] + STATUS.format(6442450944) + GPU[at:]).encode()
    start, end = full.index(b"E1120"), full.index(b"2026-11-20 09:14:03")
    cut = start + (end - start) * eighth // 9
    log, db = tmp_path / "train.log", tmp_path / "w.duckdb"
    log.write_bytes(full[:cut])
    first = bufferhouse.ingest([log], db=db, labels={"seen": "cut"}, jobs=1)
    assert first.events_loaded == 1
    log.write_bytes(full)
    grown = bufferhouse.ingest([log], db=db, labels={"seen": "full"}, jobs=1)
    assert (grown.events_loaded, grown.events_present) == (1, 0)
    again = bufferhouse.ingest([log], db=db, jobs=1)
    assert (again.events_loaded, again.events_present) == (0, 1)
    fresh = tmp_path / "fresh.duckdb"
    bufferhouse.ingest([log], db=fresh, jobs=1)
    columns = (
        "event_hash, line, end_line, byte_offset, byte_length, buffer_count, problem_count, text"
    )
    with duckdb.connect(str(db), read_only=True) as con:
        got = con.execute(f"SELECT {columns} FROM oom_events").fetchall()
        buffers = con.execute("SELECT count(*) FROM oom_buffers").fetchone()[0]
        labels = con.execute("SELECT key, value FROM oom_labels ORDER BY value").fetchall()
        stale = con.execute(
            "SELECT count(*) FROM diagnostics WHERE event_id IS NOT NULL"
        ).fetchone()
    with duckdb.connect(str(fresh), read_only=True) as con:
        want = con.execute(f"SELECT {columns} FROM oom_events").fetchall()
    assert got == want and buffers == len(GPU_SIZES) and stale == (0,)
    assert labels == [("seen", "cut"), ("seen", "full")]


# --- the schema step that adds is_fragment and byte_length ----------------------------------


def test_a_version_6_warehouse_gains_is_fragment_from_its_diagnostics(tmp_path):
    from bufferhouse.schema import SCHEMA_VERSION
    from bufferhouse.schema.warehouse import connect, schema_version

    write(tmp_path, "cut.txt", (OOM / "gpu-cut-mid-stats.txt").read_text())
    write(tmp_path, "whole.log", GPU)
    db = tmp_path / "old.duckdb"
    bufferhouse.ingest([tmp_path], db=db, jobs=1)
    with duckdb.connect(str(db)) as con:  # what schema 6 had: neither column
        con.execute("ALTER TABLE oom_events DROP COLUMN is_fragment")
        con.execute("ALTER TABLE oom_events DROP COLUMN byte_length")
        con.execute("UPDATE schema_info SET value = '6' WHERE key = 'schema_version'")
    bufferhouse.ingest([tmp_path / "whole.log"], db=db, jobs=1)
    con = connect(db)
    try:
        assert schema_version(con) == SCHEMA_VERSION
        rows = con.execute(
            "SELECT path, is_fragment, byte_length FROM oom_events ORDER BY path"
        ).fetchall()
    finally:
        con.close()
    assert [(Path(p).name, f, n) for p, f, n in rows] == [
        ("cut.txt", True, None),
        ("whole.log", False, None),
    ]


def test_check_finds_a_negative_size_that_ingest_would_refuse(tmp_path):
    from bufferhouse.check import check_warehouse

    db = tmp_path / "w.duckdb"
    bufferhouse.ingest([OOM / "tpu-runtime.log", OOM / "gpu-peak-buffers.log"], db=db, jobs=1)
    assert check_warehouse(db).ok  # `Available after request -2.02G` is a difference
    with duckdb.connect(str(db)) as con:  # what a loader without the rule stored
        con.execute("UPDATE oom_buffers SET size_bytes = -size_bytes WHERE rank = 2")
    report = check_warehouse(db)
    messages = [p.message for p in report.problems if p.check == "oom events"]
    assert len(messages) == 1 and "buffer 2 size_bytes is -3221225472 bytes" in messages[0]


def test_an_unpadded_size_above_the_size_derives_no_negative_padding(tmp_path):
    """Found by bench/oom_fuzz.py: padding was size - unpadded, negative here."""
    text = TPU.replace("     Unpadded size: 1.00G", "     Unpadded size: 2.00G")
    (event,) = scan_file(str(write(tmp_path, "p.log", text))).events
    third = event.buffers[2]
    assert (third["size_bytes"], third["unpadded_bytes"]) == (G, 2 * G)
    assert "padding_bytes" not in third and "padding_expansion" not in third
    assert [p.line for p in event.problems] == [line_of(text, "  3. Size")]
