"""Several processes on one warehouse: real processes, real DuckDB locks.

DuckDB lets one process write a file, or any number read it. A writer that
meets a holder waits `--wait` seconds and then names the holder; readers open
read-only and share; two ingests at once serialize and lose nothing.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

import bufferhouse
from bufferhouse.check import check_warehouse
from bufferhouse.parse.discover import discover
from tests.conftest import CORPUS, SAMPLES

pytestmark = pytest.mark.slow  # real processes holding the warehouse

HOLD = """
import sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=sys.argv[2] == "ro")
con.execute("SELECT count(*) FROM modules").fetchall()
print("holding", flush=True)
sys.stdin.read()
"""

#: A real ingest that stops after its first module, holding the write lock,
#: until its standard input closes.
PAUSED_INGEST = """
import sys
import bufferhouse
paused = []
def progress(outcome, done, total):
    if not paused:
        paused.append(1)
        print("paused", flush=True)
        sys.stdin.read()
report = bufferhouse.ingest(sys.argv[2:], db=sys.argv[1], jobs=1, progress=progress)
print(len(report.loaded), len(report.present), len(report.failed), flush=True)
"""


def _cli(*args) -> list[str]:
    return [sys.executable, "-m", "bufferhouse.cli", *map(str, args)]


def _run(*args) -> subprocess.CompletedProcess:
    return subprocess.run(_cli(*args), capture_output=True, text=True, timeout=120)


@contextlib.contextmanager
def _holding(db: Path, mode: str) -> Iterator[subprocess.Popen]:
    """A Python process with a DuckDB connection open on `db` until the block ends."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(db), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "holding"
        yield proc
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
        proc.stdout.close()


@pytest.fixture
def warehouse(tmp_path) -> Path:
    db = tmp_path / "w.duckdb"
    assert bufferhouse.ingest(SAMPLES, db=db, jobs=1).ok
    return db


def _modules(db: Path) -> int:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("SELECT count(*) FROM modules").fetchone()[0]


def _assert_clean_error(result: subprocess.CompletedProcess, *parts: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    stderr = result.stderr
    first, _, rest = stderr.partition("\n")
    if "; waiting up to " in first:  # a writer says whom it waits for, then fails
        assert first.startswith("bufferhouse: warehouse ") and first.endswith("(--wait)"), first
        stderr = rest
    assert stderr.startswith("bufferhouse: error: "), result.stderr
    assert "Traceback" not in result.stderr
    for part in parts:
        assert part in result.stderr, result.stderr


def test_writer_holding_the_file_is_named(warehouse):
    with _holding(warehouse, "rw") as holder:
        ingest = _run("ingest", CORPUS / "jax-0.7.2", "--db", warehouse, "--wait", "1", "-q")
        # first, while it waits, whom it waits for and for how long at most (issue 21)
        notice, _, rest = ingest.stderr.partition("\n")
        assert notice.startswith(f"bufferhouse: warehouse {warehouse} is in use by "), notice
        assert notice.endswith(f"(PID {holder.pid}); waiting up to 1s for it (--wait)"), notice
        ingest.stderr = rest
        _assert_clean_error(
            ingest,
            f"warehouse {warehouse} is in use by ",
            f"(PID {holder.pid}); waited 1s",
            "or pass a longer --wait",
        )
        query = _run("query", "modules", "--db", warehouse, "-f", "csv")
        _assert_clean_error(query, "is open for writing by ", f"(PID {holder.pid})")
        check = _run("check", "--db", warehouse)
        _assert_clean_error(check, f"(PID {holder.pid})")
        export = _run("export", warehouse.with_name("out"), "--db", warehouse)
        _assert_clean_error(export, f"(PID {holder.pid})")
    assert _modules(warehouse) == 5
    assert check_warehouse(warehouse).ok


def test_duckdb_shell_holding_the_file_is_named(warehouse):
    beside = Path(sys.executable).with_name("duckdb")  # duckdb-cli from the test extras
    shell = str(beside) if beside.exists() else shutil.which("duckdb")
    if shell is None:
        pytest.skip("no duckdb shell (pip install duckdb-cli) on this machine")
    proc = subprocess.Popen(
        [shell, "-csv", str(warehouse)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # A statement, as a person would type; its answer means the file is open.
        # (Probing with a connection of our own could take the lock first.)
        proc.stdin.write("SELECT 'ready' AS status;\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "status", proc.stderr.read()
        assert proc.stdout.readline().strip() == "ready"
        ingest = _run("ingest", SAMPLES, "--db", warehouse, "--wait", "1", "-q")
        _assert_clean_error(ingest, "is in use by ", "duckdb (PID ", "waited 1s")
        pid = int(re.search(r"\(PID (\d+)\)", ingest.stderr).group(1))
        # The pip shell is a launcher that runs the real binary as its child.
        assert pid == proc.pid or _parent_of(pid) == proc.pid
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()
    again = _run("ingest", SAMPLES, "--db", warehouse, "--wait", "10", "-q")
    assert again.returncode == 0, again.stderr
    assert "0 loaded, 5 already present" in again.stderr


def _parent_of(pid: int) -> int | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    return int(re.search(r"^PPid:\s+(\d+)", status, re.M).group(1))


def test_readers_share_the_file(warehouse, tmp_path):
    with _holding(warehouse, "ro") as reader:
        query = _run("query", "modules", "--db", warehouse, "-f", "csv")
        assert query.returncode == 0, query.stderr
        assert len(query.stdout.splitlines()) == 1 + 5
        sql = _run("sql", "SELECT count(*) AS n FROM hlo_values", "--db", warehouse, "-f", "csv")
        assert sql.returncode == 0 and sql.stdout.splitlines()[1].isdigit()
        check = _run("check", "--db", warehouse)
        assert check.returncode == 0, check.stdout + check.stderr
        export = _run("export", tmp_path / "out", "--db", warehouse)
        assert export.returncode == 0, export.stderr
        assert (tmp_path / "out").is_dir()
        ingest = _run("ingest", CORPUS / "jax-0.7.2", "--db", warehouse, "--wait", "1", "-q")
        _assert_clean_error(ingest, f"(PID {reader.pid}); waited 1s")
    assert _modules(warehouse) == 5


def test_ingest_waits_for_the_holder_then_completes(warehouse):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(warehouse), "rw"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "holding"
    ingest = subprocess.Popen(
        _cli("ingest", CORPUS / "jax-0.7.2", "--db", warehouse, "--wait", "60", "-q"),
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.5)  # the ingest is now waiting for the lock
    assert ingest.poll() is None
    holder.stdin.close()
    holder.wait(timeout=30)
    holder.stdout.close()
    _, stderr = ingest.communicate(timeout=120)
    assert ingest.returncode == 0, stderr
    assert "63 loaded, 0 already present, 0 failed" in stderr
    assert _modules(warehouse) == 5 + 63


def test_two_ingests_at_once_lose_nothing(tmp_path):
    """A second ingest refuses cleanly (--wait 0) or waits (--wait 60) while the
    first holds the file mid-batch; afterwards every module is there exactly once."""
    db = tmp_path / "w.duckdb"
    first = subprocess.Popen(
        [sys.executable, "-c", PAUSED_INGEST, str(db), str(SAMPLES), str(CORPUS / "jax-0.6.2")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert first.stdout.readline().strip() == "paused"
    refused = _run("ingest", CORPUS / "jax-0.6.2", "--db", db, "--wait", "0", "-q")
    _assert_clean_error(refused, f"(PID {first.pid}); waited 0s")
    second = subprocess.Popen(
        _cli(
            "ingest",
            CORPUS / "jax-0.6.2",
            CORPUS / "jax-0.10.2",
            "--db",
            db,
            "--wait",
            "60",
            "-j",
            "1",
        ),
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.0)
    assert second.poll() is None  # waiting for the first
    first.stdin.close()
    loaded, present, failed = map(int, first.stdout.readline().split())
    assert first.wait(timeout=120) == 0
    first.stdout.close()
    _, stderr = second.communicate(timeout=120)
    assert second.returncode == 0, stderr
    n_062 = loaded - 5
    assert (present, failed, n_062 > 20) == (0, 0, True)
    assert f"already present ({n_062})" in stderr or f", {n_062} already present" in stderr
    with duckdb.connect(str(db), read_only=True) as con:
        total, distinct = con.execute(
            "SELECT count(*), count(DISTINCT content_hash) FROM modules"
        ).fetchone()
    want = len(discover([CORPUS / "jax-0.10.2"]))
    assert total == distinct == 5 + n_062 + want
    report = check_warehouse(db)
    assert report.ok, report.lines()
