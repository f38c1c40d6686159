"""Faults during ingest: kill -9 at random moments, a full disk, hostile parameters.

Every ingest here is a real `bufferhouse ingest` process; after each fault the
warehouse must pass `bufferhouse check`, hold only whole modules, and a re-run
must complete it with exactly the rows of a clean ingest.
"""

from __future__ import annotations

import contextlib
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

import bufferhouse
from bufferhouse.check import check_warehouse
from tests.conftest import CORPUS, SAMPLES

pytestmark = pytest.mark.slow  # kill trials of real ingests

KILL_TRIALS = 20
#: Half the kill trials commit every module (instead of the default large
#: batches), so the kills also land between and inside many small commits.
SMALL_BATCHES = (
    "import functools, sys\n"
    "import bufferhouse.load.pipeline as ingest\n"
    "ingest.ModuleWriter = functools.partial(ingest.ModuleWriter, max_modules=1)\n"
    "from bufferhouse.cli import main\n"
    "sys.argv[0] = 'bufferhouse'\n"
    "main()\n"
)

#: An ingest that commits every module and kills itself (SIGKILL, with its parser
#: workers) right after its N-th commit: a kill that lands between two commits.
KILL_AFTER_COMMITS = (
    "import functools, os, signal, sys\n"
    "import bufferhouse.load.pipeline as pipeline\n"
    "from bufferhouse.load.writer import ModuleWriter\n"
    "commits = int(sys.argv.pop(1))\n"
    "class KilledWriter(ModuleWriter):\n"
    "    done = 0\n"
    "    def write(self, batch):\n"
    "        written = super().write(batch)\n"
    "        KilledWriter.done += written > 0\n"
    "        if KilledWriter.done == commits:\n"
    "            os.kill(os.getpid(), signal.SIGKILL)\n"
    "        return written\n"
    "pipeline.ModuleWriter = functools.partial(KilledWriter, max_modules=1)\n"
    "from bufferhouse.cli import main\n"
    "sys.argv[0] = 'bufferhouse'\n"
    "main()\n"
)


def _cli(*args: str | os.PathLike[str]) -> list[str]:
    return [sys.executable, "-m", "bufferhouse.cli", *map(str, args)]


def _fleet(root: Path) -> Path:
    """A small fleet: the samples and half of one corpus release (split layout, .gz)."""
    shutil.copytree(SAMPLES, root / "samples")
    releases = sorted(p for p in (CORPUS / "jax-0.10.2").iterdir() if p.is_dir())
    for program in releases[::2]:
        shutil.copytree(program, root / "jax-0.10.2" / program.name)
    return root


def _snapshot(db: Path) -> dict:
    """Everything a re-ingest must reproduce: rows per table and each module's identity."""
    with duckdb.connect(str(db), read_only=True) as con:
        tables = [
            r[0]
            for r in con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE table_name <> 'runs'"
            ).fetchall()
        ]
        counts = {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
        modules = sorted(
            con.execute(
                "SELECT content_hash, file_stem, map_entries(row_counts)::VARCHAR FROM modules"
            ).fetchall()
        )
    return {"counts": counts, "modules": modules}


def _modules_in(db: Path) -> int | None:
    if not db.exists():
        return None
    with duckdb.connect(str(db), read_only=True) as con:
        try:
            return con.execute("SELECT count(*) FROM modules").fetchone()[0]
        except duckdb.CatalogException:
            return None  # killed before the tables were created


def test_kill_minus_nine_at_random_moments(tmp_path):
    fleet = _fleet(tmp_path / "fleet")
    # Two ways to run the ingest: the plain CLI with parser workers (default
    # batches), and one process committing every module. Each is timed once
    # cleanly, so the kills spread over its run on any machine (the second
    # mostly over its commits, which come after about a third of its time).
    configs = [
        _cli("ingest", fleet, "-q", "-j", "2"),
        [sys.executable, "-c", SMALL_BATCHES, "ingest", str(fleet), "-q", "-j", "1"],
    ]
    windows = [(0.1, 1.0), (0.4, 1.0)]
    seconds, want = [], None
    for i, command in enumerate(configs):
        reference = tmp_path / f"reference{i}.duckdb"
        started = time.monotonic()
        subprocess.run([*command, "--db", str(reference)], check=True)
        seconds.append(time.monotonic() - started)
        snapshot = _snapshot(reference)
        assert want is None or snapshot == want
        want = snapshot
    total = len(want["modules"])
    assert total > 20

    rng = random.Random(20261122)
    landed: list[int | None] = []
    for trial in range(KILL_TRIALS):
        db = tmp_path / f"trial{trial}.duckdb"
        config = trial % len(configs)
        proc = subprocess.Popen(
            [*configs[config], "--db", str(db)],
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        time.sleep(rng.uniform(*windows[config]) * seconds[config])
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the ingest and its parser workers
        _, stderr = proc.communicate()
        assert proc.returncode in (-signal.SIGKILL, 0), stderr

        landed.append(_modules_in(db))
        if db.exists():
            check = subprocess.run(_cli("check", "--db", db), capture_output=True, text=True)
            assert check.returncode == 0, (trial, check.stdout, check.stderr)
        again = bufferhouse.ingest(fleet, db=db, jobs=1)
        assert again.ok, [o.error for o in again.failed]
        assert len(again.loaded) + len(again.present) == total
        assert _snapshot(db) == want, trial
        assert check_warehouse(db).ok
    partial = sum(1 for n in landed if n is not None and 0 < n < total)
    print(
        f"\nkill trials: {KILL_TRIALS} (clean runs {seconds[0]:.1f}s, {seconds[1]:.1f}s); "
        f"modules present after each kill: {landed}"
    )
    # The kills must actually land mid-ingest, not only before or after it.
    assert partial >= 3, landed


@pytest.mark.parametrize(("jobs", "commits"), [(1, 3), (2, 17)])
def test_a_kill_between_two_commits_is_completed_by_the_rerun(tmp_path, jobs, commits):
    """Killed right after its N-th commit (one module each), an ingest leaves exactly
    N whole modules; `check` passes, and the re-run loads exactly the missing ones:
    no duplicate, the rows of a clean ingest."""
    fleet = _fleet(tmp_path / "fleet")
    clean = tmp_path / "clean.duckdb"
    assert bufferhouse.ingest(fleet, db=clean, jobs=1).ok
    want = _snapshot(clean)
    total = len(want["modules"])
    assert commits < total

    db = tmp_path / "killed.duckdb"
    command = ["ingest", str(fleet), "-q", "-j", str(jobs), "--db", str(db)]
    killed = subprocess.run(
        [sys.executable, "-c", KILL_AFTER_COMMITS, str(commits), *command],
        capture_output=True,
        text=True,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    with duckdb.connect(str(db), read_only=True) as con:
        held = {r[0] for r in con.execute("SELECT content_hash FROM modules").fetchall()}
    assert len(held) == commits
    check = subprocess.run(_cli("check", "--db", db), capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr

    again = bufferhouse.ingest(fleet, db=db, jobs=1)
    assert again.ok, [o.error for o in again.failed]
    assert len(again.present) == commits and len(again.loaded) == total - commits
    with duckdb.connect(str(db), read_only=True) as con:
        loaded = {
            r[0]
            for r in con.execute(
                "SELECT content_hash FROM modules WHERE run_id = ?", [again.run_id]
            ).fetchall()
        }
        hashes = con.execute("SELECT count(*), count(DISTINCT content_hash) FROM modules")
        assert hashes.fetchone() == (total, total)
    assert loaded == {m[0] for m in want["modules"]} - held  # exactly the missing ones
    assert _snapshot(db) == want
    assert check_warehouse(db).ok


def _free_space_left(directory: Path, keep_kib: int) -> Path:
    """Fill the file system of `directory` until about `keep_kib` KiB are free."""
    st = os.statvfs(directory)
    free = st.f_bavail * st.f_frsize
    filler = directory / "filler"
    with open(filler, "wb") as f:
        f.truncate(0)
        chunk = b"\0" * (1 << 20)
        remaining = max(free - keep_kib * 1024, 0)
        while remaining > 0:
            n = f.write(chunk[: min(len(chunk), remaining)])
            remaining -= n
    return filler


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MiB tmpfs (root can mount one here), unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({result.stderr.strip()}); see the ulimit test")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _assert_clean_failure(result: subprocess.CompletedProcess, reason: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("bufferhouse: error: "), result.stderr
    assert reason in result.stderr
    assert "Traceback" not in result.stderr


def test_disk_full_during_ingest_leaves_the_warehouse_unchanged(small_disk):
    db = small_disk / "w.duckdb"
    assert bufferhouse.ingest(SAMPLES, db=db, jobs=1).ok
    before = _snapshot(db)
    filler = _free_space_left(small_disk, 256)  # room for the macros, not the modules
    more = subprocess.run(
        _cli("ingest", CORPUS / "jax-0.7.2", "--db", db, "-q", "-j", "1"),
        capture_output=True,
        text=True,
    )
    _assert_clean_failure(more, "No space left on device")
    assert "Nothing of them was written" in more.stderr
    filler.unlink()
    filler = _free_space_left(small_disk, 64)  # a new warehouse's tables do not fit
    new = subprocess.run(
        _cli("ingest", SAMPLES, "--db", small_disk / "new.duckdb", "-q"),
        capture_output=True,
        text=True,
    )
    _assert_clean_failure(new, "No space left on device")
    filler.unlink()
    assert _snapshot(db) == before
    assert check_warehouse(db).ok
    # The new file the full disk left behind (empty or with bare tables) is usable.
    assert check_warehouse(small_disk / "new.duckdb").ok
    assert bufferhouse.ingest(SAMPLES, db=small_disk / "new.duckdb", jobs=1).ok
    assert bufferhouse.ingest(CORPUS / "jax-0.7.2", db=db, jobs=1).ok
    assert check_warehouse(db).ok


def _file_size_limit(limit: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG)

    return apply


def test_write_error_from_file_size_limit(tmp_path):
    """The same without a tmpfs: `ulimit -f` makes every write past 64 KiB fail."""
    db = tmp_path / "w.duckdb"
    assert bufferhouse.ingest(SAMPLES, db=db, jobs=1).ok
    before = _snapshot(db)
    result = subprocess.run(
        _cli("ingest", CORPUS / "jax-0.7.2", "--db", db, "-q", "-j", "1"),
        capture_output=True,
        text=True,
        preexec_fn=_file_size_limit(64 * 1024),
    )
    _assert_clean_failure(result, "File too large")
    assert _snapshot(db) == before
    assert check_warehouse(db).ok


def test_output_file_on_a_full_disk(small_disk, samples_db):
    filler = _free_space_left(small_disk, 0)
    result = subprocess.run(
        _cli("query", "modules", "--db", samples_db, "-f", "csv", "-o", small_disk / "out.csv"),
        capture_output=True,
        text=True,
    )
    filler.unlink()
    _assert_clean_failure(result, "No space left on device")
    assert not (small_disk / "out.csv").exists()  # no half-written output left behind


def test_hostile_parameter_is_data_on_the_command_line(tmp_path):
    db = tmp_path / "w.duckdb"
    assert bufferhouse.ingest(SAMPLES, db=db, jobs=1).ok
    before = _snapshot(db)
    for hostile in ("x'); DROP TABLE modules; --", "1; DELETE FROM modules", "' OR 1=1 --"):
        result = subprocess.run(
            _cli("query", "modules", "--db", db, "--param", f"module={hostile}", "-f", "csv"),
            capture_output=True,
            text=True,
        )
        # Taken as a module name, whole: no module has it (an error, exit 1), nothing ran.
        assert result.returncode == 1, result.stderr
        assert f"no module matches {hostile!r}" in result.stderr
        assert result.stdout == ""
    assert _snapshot(db) == before
    label = subprocess.run(
        _cli("ingest", SAMPLES, "--db", db, "-q", "--label", "x=y'); DROP TABLE labels; --"),
        capture_output=True,
        text=True,
    )
    assert label.returncode == 0, label.stderr
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT DISTINCT value FROM labels").fetchall() == [
            ("y'); DROP TABLE labels; --",)
        ]
