"""Device memory profiles found by content, in any field order (issue 41 item 5).

protobuf allows a message's fields in any order; a valid profile whose first field
is not sample_type was passed over (or taken for another file kind) in silence. The
oracle for "the same profile" is the original file: the same samples (kind, device,
count, bytes, stack) from the reordered one.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import bufferhouse
from bufferhouse.cli import main
from bufferhouse.parse.discover import discover_profiles
from bufferhouse.parse.pprof import looks_like_profile, read_file
from bufferhouse.parse.proto import wire
from tests.conftest import DATA

RUN = DATA / "runtime" / "run"
MESSAGE = gzip.decompress((RUN / "after.prof").read_bytes())


def reordered(message: bytes, first: tuple[int, ...]) -> bytes:
    """The same Profile with the top-level fields numbered `first` moved to the front
    (in that order) and sample_type last: protobuf reads it as the same message."""
    pieces: dict[int, list[bytes]] = {}
    pos = 0
    for number, _, _, end in wire.fields(message):
        pieces.setdefault(number, []).append(message[pos:end])
        pos = end
    order = [*first, *(n for n in pieces if n not in first and n != 1), 1]
    return b"".join(b for n in order for b in pieces.get(n, []))


def _samples(path: Path) -> list[tuple]:
    snap = read_file(str(path))
    return sorted(
        (
            s.kind,
            s.device,
            s.count,
            s.bytes,
            tuple(map(repr, snap.stacks[s.stack])) if s.stack is not None else (),
        )
        for s in snap.samples
    )


@pytest.mark.parametrize("first", [(6,), (2, 6), (4, 5, 6)], ids=["strings", "samples", "locs"])
def test_a_reordered_profile_is_found_by_content_and_reads_the_same(
    tmp_path: Path, first: tuple[int, ...]
) -> None:
    message = reordered(MESSAGE, first)
    assert message[0] != 0x0A  # its first field is not sample_type
    path = tmp_path / "snapshot-9"  # no profile's name: found by content alone
    path.write_bytes(gzip.compress(message, mtime=0))
    assert [p.path for p in discover_profiles([tmp_path])] == [str(path)]
    assert _samples(path) == _samples(RUN / "after.prof")


def test_a_time_first_profile_loads(tmp_path: Path) -> None:
    """time_nanos (a varint field) first, as some writers put it."""
    message = wire.encode_varint(9 << 3) + wire.encode_varint(1_700_000_000 * 10**9) + MESSAGE
    (tmp_path / "mem").write_bytes(gzip.compress(message, mtime=0))
    report = bufferhouse.ingest([tmp_path], db=tmp_path / "w.duckdb", jobs=1)
    assert report.snapshots_loaded == 1 and report.ok


def test_other_gzip_files_are_not_profiles(tmp_path: Path) -> None:
    """An HloProto or a text file, gzipped under a neutral name: not taken for a profile."""
    from bufferhouse.parse.pprof import is_profile

    hlo = next((DATA / "proto" / "proto_only").glob("*/*after_optimizations.hlo.pb"))
    (tmp_path / "renamed.gz").write_bytes(gzip.compress(hlo.read_bytes()))
    (tmp_path / "notes.gz").write_bytes(gzip.compress(b"BufferAssignment:\nallocation 0\n"))
    (tmp_path / "zeros.gz").write_bytes(gzip.compress(bytes(4096)))
    assert discover_profiles([tmp_path]) == []
    for name in ("renamed.gz", "notes.gz", "zeros.gz"):
        with gzip.open(tmp_path / name) as f:
            assert not is_profile(f), name


def test_a_damaged_prof_in_a_tree_fails_located_not_in_silence(tmp_path: Path) -> None:
    """A .prof of gzip data that is no Profile (cut mid-field) is read and fails with
    where and what, instead of being passed over."""
    path = tmp_path / "step.prof"
    path.write_bytes(gzip.compress(reordered(MESSAGE, (6,))[:-7], mtime=0))
    assert looks_like_profile(str(path))
    report = bufferhouse.ingest([tmp_path], db=tmp_path / "w.duckdb", jobs=1)
    assert len(report.failed) == 1
    error = report.failed[0].error
    assert error.path == str(path) and "at byte" in error.message


def test_the_summary_says_what_each_skip_was(tmp_path: Path) -> None:
    """A pprof profile of another kind and an HloProto without buffer assignment, side by
    side: counted by reason, and the profile named with its message."""
    shutil.copy(DATA / "runtime-bad" / "cpu-profile.prof", tmp_path)
    before = next((DATA / "proto" / "proto_only").glob("*/*before_optimizations.hlo.pb"))
    shutil.copy(before, tmp_path)
    result = CliRunner().invoke(main, ["ingest", str(tmp_path), "--db", str(tmp_path / "w.db")])
    assert result.exit_code == 0, result.output
    assert (
        "2 skipped (1 HloProtos without buffer assignment, 1 pprof profiles of another kind)"
        in result.stderr
    )
    assert "skipped (not read as memory data):" in result.stderr
    assert f"{tmp_path / 'cpu-profile.prof'}: a pprof profile but not a device memory profile" in (
        result.stderr
    )
