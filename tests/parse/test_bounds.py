"""One decompression bound for every gzip reader (issue 41 item 3).

A .gz may inflate to reader.RATIO times its size (or reader.FLOOR bytes): the text
dump reader, the HloProto and profile readers and the device memory profile (pprof)
reader all stop there with a located error, and none of them holds more than that.
The oracle for memory is the peak RSS of a fresh process (ru_maxrss).
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

import bufferhouse
from bufferhouse.errors import DumpError, ParseError
from bufferhouse.parse import reader
from bufferhouse.parse.pprof import read_file
from bufferhouse.parse.proto.wire import encode_varint
from tests.conftest import DATA, ROOT

RUN = DATA / "runtime" / "run"


def gz_with_long_field(head: bytes, number: int, length: int, fill: bytes = b"\0") -> bytes:
    """gzip of `head`, then one length-delimited field `number` of `length` bytes of
    `fill`, compressed a block at a time (never held whole)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = [z.compress(head + encode_varint(number << 3 | 2) + encode_varint(length))]
    block = fill * (1 << 20)
    for _ in range(length >> 20):
        out.append(z.compress(block))
    out.append(z.flush())
    return b"".join(out)


def bomb_profile(path: Path, field_mib: int) -> Path:
    """A real device memory profile with one more string_table entry of `field_mib`
    MiB: a valid profile, which the reader used to inflate and decode whole."""
    message = gzip.decompress((RUN / "after.prof").read_bytes())
    path.write_bytes(gz_with_long_field(message, 6, field_mib << 20))
    return path


_RSS = """
import json, sys
from bufferhouse.parse.pprof import read_file
try:
    read_file(sys.argv[1])
    outcome = "read"
except Exception as exc:
    outcome = f"{type(exc).__name__}: {exc}"
# VmHWM, this process's own peak: ru_maxrss keeps the pre-exec peak of the forked parent
hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"rss_mb": int(hwm.split()[1]) / 1024, "outcome": outcome}))
"""


def test_a_pprof_bomb_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    """A 256 KB profile holding one 256 MiB field: refused as a gzip bomb, located, and
    the process never holds the field (it used to take ~3 times the field in RSS)."""
    path = bomb_profile(tmp_path / "bomb.prof", 256)
    assert path.stat().st_size * reader.RATIO < 256 << 20
    proc = subprocess.run(
        [sys.executable, "-c", _RSS, str(path)], capture_output=True, text=True, cwd=ROOT
    )
    got = json.loads(proc.stdout)
    assert "gzip bomb" in got["outcome"] and str(path) in got["outcome"], got
    assert got["rss_mb"] < 200, got


def test_a_pprof_bomb_error_names_the_bound(tmp_path: Path) -> None:
    path = bomb_profile(tmp_path / "bomb.prof", 64)
    with pytest.raises(ParseError) as info:
        read_file(str(path))
    bound = reader.inflation_bound(path.stat().st_size)
    assert info.value.path == str(path)
    assert f"inflates past {bound} bytes" in info.value.message


def test_a_profile_within_the_bound_still_reads(tmp_path: Path) -> None:
    """The real profile and one with a 4 MiB extra string (within FLOOR) read."""
    assert read_file(str(RUN / "after.prof")).samples
    assert read_file(str(bomb_profile(tmp_path / "ok.prof", 4))).samples


def test_a_text_dump_bomb_is_refused_located(tmp_path: Path) -> None:
    """A -buffer-assignment.txt.gz that inflates past the bound (a first line, then
    blank lines) fails alone with the gzip-bomb error naming it."""
    dump = tmp_path / "module_0001.jit_bomb.cpu_after_optimizations-buffer-assignment.txt.gz"
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [z.compress(b"BufferAssignment:\n")]
    block = b"\n" * (1 << 20)
    parts += [z.compress(block) for _ in range(64)]
    dump.write_bytes(b"".join([*parts, z.flush()]))
    assert dump.stat().st_size * reader.RATIO < 64 << 20
    report = bufferhouse.ingest([tmp_path], db=tmp_path / "w.duckdb", jobs=1)
    assert len(report.failed) == 1
    error = report.failed[0].error
    assert error.path == str(dump) and "gzip bomb" in error.message


def test_open_dump_is_bounded_for_every_gz(tmp_path: Path) -> None:
    """The bound lives in open_dump: whatever reads a .gz through it stops there."""
    path = tmp_path / "x.txt.gz"
    path.write_bytes(gzip.compress(bytes(40 << 20), 9))
    with reader.open_dump(str(path)) as f, pytest.raises(reader.Inflated):
        while f.read(1 << 20):
            pass
    with pytest.raises(DumpError) as info:
        list(reader.read_lines(str(path)))
    assert "gzip bomb" in info.value.message
