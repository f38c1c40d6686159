"""Parser processes hand their tables over through shared-memory files, not the pipe.

The files must come back identical, vanish once read (or when the run ends), and a
run killed before it could clean up must not leave them behind for good.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pyarrow as pa
import pytest

import bufferhouse
from bufferhouse.load import handoff
from bufferhouse.parse import parse_files
from bufferhouse.parse.discover import discover
from tests.conftest import CORPUS

pytestmark = pytest.mark.slow  # parallel ingests through worker processes


@pytest.fixture
def shared(tmp_path, monkeypatch):
    """Hand-off directories under tmp_path instead of /dev/shm."""
    monkeypatch.setattr(handoff, "_SHARED", tmp_path)
    return tmp_path


def _module_tables() -> dict[str, pa.Table]:
    result = parse_files(discover([str(CORPUS / "jax-0.7.2")])[0])
    assert result.tables is not None
    return result.tables


def test_tables_come_back_identical_and_the_file_goes(shared):
    tables = _module_tables()
    directory = handoff.make_directory()
    assert directory is not None and directory.startswith(str(shared))
    shipped = handoff.ship(tables, directory)
    assert isinstance(shipped, handoff.Shipped) and os.path.exists(shipped.path)
    back = handoff.receive(shipped)
    assert not os.path.exists(shipped.path)  # unlinked at once; the mapping lives on
    assert list(back) == list(tables)
    for name, table in tables.items():
        assert back[name].equals(table), name
        assert back[name].schema == table.schema, name
    handoff.remove_directory(directory)
    assert not os.path.exists(directory)


def test_tables_larger_than_the_write_buffer_come_back_identical(shared):
    big = pa.table({"text": [f"fusion.{i} = f32[8,128] add(a, b)" for i in range(200_000)]})
    assert big.nbytes > 4 * handoff._BUFFER
    tables = {"small": pa.table({"x": [1, 2, 3]}), "big": big, "after": pa.table({"y": ["z"]})}
    directory = handoff.make_directory()
    back = handoff.receive(handoff.ship(tables, directory))
    assert list(back) == list(tables)
    for name, table in tables.items():
        assert back[name].equals(table), name
    handoff.remove_directory(directory)


def test_without_a_directory_the_tables_travel_in_band(shared):
    tables = _module_tables()
    assert handoff.ship(tables, None) is tables
    missing = str(shared / "gone")  # removed under a worker at the end of a run
    assert handoff.ship(tables, missing) is tables
    assert handoff.receive(tables) is tables


def test_directories_of_dead_runs_are_swept_and_live_ones_kept(shared):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    stale = shared / f"bufferhouse-ingest-{int(dead.stdout)}-abc"
    stale.mkdir()
    (stale / "1-0.arrow").write_bytes(b"x" * 100)
    live = shared / f"bufferhouse-ingest-{os.getpid()}-def"
    live.mkdir()
    other = shared / "unrelated"
    other.mkdir()
    # The dead run's pool semaphores, which it listed; another's, which it did not.
    (stale / "semaphores").write_text("sem.mp-dead1\nsem.mp-dead2\n/etc/passwd\n")
    for name in ("sem.mp-dead1", "sem.mp-dead2", "sem.mp-other"):
        (shared / name).write_bytes(b"\0" * 32)
    (live / "semaphores").write_text("sem.mp-other\n")
    removed = handoff.remove_leftovers()
    assert not stale.exists() and live.exists() and other.exists()
    assert sorted(p.name for p in shared.glob("sem.*")) == ["sem.mp-other"]
    assert sorted(removed) == sorted(
        [str(stale), str(shared / "sem.mp-dead1"), str(shared / "sem.mp-dead2")]
    )


def test_a_parallel_ingest_hands_off_through_files_and_leaves_none(shared, tmp_path, monkeypatch):
    received = []
    real = handoff.receive

    def receive(tables):
        received.append(type(tables))
        return real(tables)

    monkeypatch.setattr(handoff, "receive", receive)
    db = tmp_path / "w.duckdb"
    report = bufferhouse.ingest([CORPUS / "jax-0.7.2"], db=db, jobs=2)
    assert report.ok and len(report.loaded) > 10
    assert len(received) == len(report.loaded) and set(received) == {handoff.Shipped}
    assert not list(shared.glob("bufferhouse-ingest-*"))
