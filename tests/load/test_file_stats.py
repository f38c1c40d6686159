"""Re-ingest at stat speed (load/file_stats.py): files that look as they did are not read;
anything else is read and hashed, and content identity decides."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

import bufferhouse
import bufferhouse.parse as parse
from bufferhouse.cli import main as cli_main
from bufferhouse.load import file_stats
from tests.conftest import DATA

SAMPLES = DATA / "samples"


def _age(root: Path, seconds: int = 3600) -> None:
    """Date every file under root `seconds` back (a file just written is never recorded)."""
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            p = os.path.join(dirpath, name)
            st = os.stat(p)
            os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns - seconds * 1_000_000_000))


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    target = tmp_path / "dumps"
    shutil.copytree(SAMPLES, target)
    _age(target)
    return target


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every module identity the ingest computes (each is a read of the module's files)."""
    calls: list[list[str]] = []
    real = parse.module_identity

    def counting(paths, *args, **kwargs):
        calls.append(list(paths))
        return real(paths, *args, **kwargs)

    monkeypatch.setattr(parse, "module_identity", counting)
    return calls


def _count(db: Path, sql: str) -> int:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).fetchall()[0][0]


def test_unchanged_files_are_not_read(tree: Path, tmp_path: Path, reads: list) -> None:
    db = tmp_path / "w.duckdb"
    first = bufferhouse.ingest(tree, db, jobs=1)
    loaded = sum(o.status == "loaded" for o in first.outcomes)
    assert loaded > 3 and len(reads) == len(first.outcomes)
    assert _count(db, "SELECT count(*) FROM file_stats") == loaded
    reads.clear()
    again = bufferhouse.ingest(tree, db, jobs=1)
    assert reads == []  # not one module's files read
    assert [o.status for o in again.outcomes] == ["present"] * len(first.outcomes)
    assert {o.module_id for o in again.outcomes} == {o.module_id for o in first.outcomes}
    assert _count(db, "SELECT count(*) FROM modules") == loaded
    assert _count(db, "SELECT count(*) FROM runs") == 1  # a run that adds nothing leaves none


def test_rehash_reads_everything(tree: Path, tmp_path: Path, reads: list) -> None:
    db = tmp_path / "w.duckdb"
    first = bufferhouse.ingest(tree, db, jobs=1)
    reads.clear()
    again = bufferhouse.ingest(tree, db, jobs=1, rehash=True)
    assert len(reads) == len(first.outcomes)
    assert all(o.status == "present" for o in again.outcomes)
    result = CliRunner().invoke(cli_main, ["ingest", str(tree), "--db", str(db), "--rehash", "-q"])
    assert result.exit_code == 0, result.output
    assert len(reads) == 2 * len(first.outcomes)


def test_touched_file_is_read_and_adds_nothing(tree: Path, tmp_path: Path, reads: list) -> None:
    db = tmp_path / "w.duckdb"
    bufferhouse.ingest(tree, db, jobs=1)
    before = _count(db, "SELECT count(*) FROM modules")
    touched = sorted(tree.glob("*.txt"))[0]
    st = os.stat(touched)
    os.utime(touched, ns=(st.st_atime_ns, st.st_mtime_ns + 60 * 1_000_000_000))
    reads.clear()
    again = bufferhouse.ingest(tree, db, jobs=1)
    assert [p for paths in reads for p in paths] == [str(touched)]  # that module alone
    assert all(o.status == "present" for o in again.outcomes)
    assert _count(db, "SELECT count(*) FROM modules") == before
    # the new mtime is recorded: the next ingest reads nothing
    row = _count(
        db, f"SELECT mtimes_ns[1] FROM file_stats WHERE path = '{os.path.abspath(touched)}'"
    )
    assert row == os.stat(touched).st_mtime_ns
    reads.clear()
    bufferhouse.ingest(tree, db, jobs=1)
    assert reads == []


def test_changed_content_loads(tree: Path, tmp_path: Path, reads: list) -> None:
    db = tmp_path / "w.duckdb"
    first = bufferhouse.ingest(tree, db, jobs=1)
    before = _count(db, "SELECT count(*) FROM modules")
    a, b = sorted(tree.glob("*.txt"))[:2]
    st = os.stat(a)
    # a's file now holds b's dump, written in place: the same mtime and inode, only the
    # size differs
    with open(a, "r+b") as f:
        f.truncate(0)
        f.write(b.read_bytes())
    os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns))
    reads.clear()
    again = bufferhouse.ingest(tree, db, jobs=1)
    statuses = {o.files.display: o.status for o in again.outcomes}
    assert a.stat().st_size != st.st_size
    assert [p for paths in reads for p in paths] == [str(a)]
    # b's dump under a's name: a new module by identity (names are part of it)
    assert statuses[str(a)] == "loaded"
    assert _count(db, "SELECT count(*) FROM modules") == before + 1
    assert len(first.outcomes) == len(again.outcomes)


def test_changed_content_same_stat_size_is_read_when_mtime_differs(
    tree: Path, tmp_path: Path, reads: list
) -> None:
    """Content rewritten to the same size, a new mtime: read, and the new content loads."""
    db = tmp_path / "w.duckdb"
    bufferhouse.ingest(tree, db, jobs=1)
    before = _count(db, "SELECT count(*) FROM modules")
    target = sorted(tree.glob("*.txt"))[0]
    text = target.read_bytes()
    changed = text.replace(b"allocation 0: size ", b"allocation 0: size 9", 1)
    changed = changed[: len(text)] if len(changed) > len(text) else changed
    assert changed != text
    st = os.stat(target)
    target.write_bytes(changed)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    reads.clear()
    again = bufferhouse.ingest(tree, db, jobs=1)
    assert [p for paths in reads for p in paths] == [str(target)]
    outcome = next(o for o in again.outcomes if o.files.display == str(target))
    assert outcome.status in ("loaded", "failed")  # the new content was read, not trusted
    if outcome.status == "loaded":
        assert _count(db, "SELECT count(*) FROM modules") == before + 1


def test_a_file_written_just_now_is_not_recorded(tmp_path: Path) -> None:
    target = tmp_path / "dumps"
    shutil.copytree(SAMPLES, target, copy_function=shutil.copy)  # mtimes: now
    db = tmp_path / "w.duckdb"
    bufferhouse.ingest(target, db, jobs=1)
    assert _count(db, "SELECT count(*) FROM file_stats") == 0


def test_recognise_needs_every_file_as_recorded(tree: Path) -> None:
    from bufferhouse.parse.discover import discover

    groups = list(discover([str(tree)]))
    looks = [file_stats.look(g) for g in groups]
    seen = {
        lk.key: file_stats.Seen(lk.paths, lk.stats, f"hash{i}", 10) for i, lk in enumerate(looks)
    }
    held = {f"hash{i}": i for i in range(len(groups))}
    known, rest, _ = file_stats.recognise(groups, seen, held)
    assert len(known) == len(groups) and not rest
    # a module the warehouse no longer holds, one whose inode differs, one over max_bytes
    first = looks[0]
    seen[first.key] = file_stats.Seen(
        first.paths, ((first.stats[0][0], first.stats[0][1], -1), *first.stats[1:]), "hash0", 10
    )
    del held[f"hash{1}"]
    known, rest, looked = file_stats.recognise(groups, seen, held)
    assert {id(g) for g in rest} == {id(groups[0]), id(groups[1])} == set(looked)
    known, rest, _ = file_stats.recognise(groups, seen, held, max_bytes=5)
    assert not known


def test_the_run_is_planned_once_from_the_groups_left_to_read(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One plan a run, made after the stat check: of the one module touched, not of every
    group discovery found (ingest_paths planned them all, then run_batches again)."""
    from bufferhouse.load import pipeline

    db = tmp_path / "w.duckdb"
    planned: list[int] = []
    real = pipeline.plan

    def counting(groups, jobs):
        planned.append(len(groups))
        return real(groups, jobs)

    monkeypatch.setattr(pipeline, "plan", counting)
    from bufferhouse.parse.sources import discover_all

    first = bufferhouse.ingest(tree, db, jobs=1)
    groups = len(discover_all([str(tree)]))
    loaded = sum(o.status == "loaded" for o in first.outcomes)
    assert planned == [groups] and loaded > 3
    touched = sorted(tree.glob("*.txt"))[0]
    st = os.stat(touched)
    os.utime(touched, ns=(st.st_atime_ns, st.st_mtime_ns + 60 * 1_000_000_000))
    planned.clear()
    bufferhouse.ingest(tree, db, jobs=1)
    assert planned == [groups - loaded + 1]  # the touched module, and the logs (scanned)
