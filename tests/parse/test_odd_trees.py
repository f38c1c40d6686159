"""Trees an attack found (issue 31): every odd file or directory is a located failure of
its own, never a traceback, a hang or a silent skip, and the rest of the batch lands."""

from __future__ import annotations

import builtins
import gzip
import os
import shutil
import threading

import duckdb
import pytest

import bufferhouse
from bufferhouse.parse import reader
from bufferhouse.parse.discover import discover
from bufferhouse.parse.proto import hlo_pb2
from tests.conftest import DATA, SAMPLES

ONE_SAMPLE = sorted(SAMPLES.glob("*.txt"))[0]
BOTH = DATA / "proto" / "both" / "donate_sgd"


def _errors(report) -> dict[str, str]:
    """Failed path -> its message."""
    return {o.error.path: o.error.message for o in report.failed}


def _corrupt_gz() -> bytes:
    data = gzip.compress(b"hello world\n" * 1000)
    return data[:20] + b"\xff" * 30 + data[50:]


def test_a_corrupt_gz_fails_alone(tmp_path):
    """zlib.error in the sniffer took the whole ingest down, no warehouse written."""
    tree = tmp_path / "t"
    shutil.copytree(SAMPLES, tree)
    for name in ("run.log.gz", "notes.txt.gz"):
        (tree / name).write_bytes(_corrupt_gz())
    db = tmp_path / "w.duckdb"
    report = bufferhouse.ingest([tree], db=db, jobs=1)
    assert len(report.loaded) == 5
    errors = _errors(report)
    assert sorted(errors) == [str(tree / "notes.txt.gz"), str(tree / "run.log.gz")]
    for message in errors.values():
        assert message.startswith("cannot read file: corrupt gzip data"), message
    with duckdb.connect(str(db), read_only=True) as con:
        paths = {p for (p,) in con.execute("SELECT path FROM diagnostics").fetchall()}
    assert set(errors) <= paths


def test_a_tree_1100_directories_deep_is_walked(tmp_path):
    """Recursion in the walk gave RecursionError."""
    deep = tmp_path / "deep"
    path = str(deep)
    os.mkdir(path)
    for _ in range(1100):  # os.makedirs recurses too
        path = os.path.join(path, "d")
        os.mkdir(path)
    shutil.copy(ONE_SAMPLE, path)
    try:
        report = bufferhouse.ingest([deep], db=tmp_path / "w.duckdb", jobs=1)
        assert report.ok and len(report.loaded) == 1
    finally:
        _remove_deep(str(deep))


def _remove_deep(top: str) -> None:
    """Remove a tree too deep for shutil.rmtree (it recurses: pytest's own clean-up of
    old temporary folders would raise RecursionError on it, in a later run too)."""
    dirs, stack = [], [top]
    while stack:
        d = stack.pop()
        dirs.append(d)
        with os.scandir(d) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    os.unlink(entry.path)
    for d in reversed(dirs):
        os.rmdir(d)


def _call_chain(depth: int) -> bytes:
    """The committed proto with a chain of `depth` computations, each calling the next,
    called first thing by the entry and scheduled: a valid module."""
    src = next(BOTH.glob("*.hlo.pb"))
    proto = hlo_pb2.HloProto()
    proto.ParseFromString(src.read_bytes())
    module = proto.hlo_module
    entry = next(c for c in module.computations if c.id == module.entry_computation_id)
    shape = entry.instructions[0].shape
    next_id = max(i.id for c in module.computations for i in c.instructions) + 1
    first = max(c.id for c in module.computations) + 1
    for k in range(depth):
        comp = module.computations.add(id=first + k, name=f"chain.{k}")
        ins = comp.instructions.add(id=next_id + k, name=f"chain_call.{k}")
        ins.shape.CopyFrom(shape)
        ins.opcode = "call" if k + 1 < depth else "constant"
        if k + 1 < depth:
            ins.called_computation_ids.append(first + k + 1)
        comp.root_id = ins.id
        module.schedule.sequences[comp.id].instruction_ids.append(ins.id)
    start = entry.instructions.add(id=next_id + depth, name="chain_start", opcode="call")
    start.shape.CopyFrom(shape)
    start.called_computation_ids.append(first)
    module.schedule.sequences[entry.id].instruction_ids.insert(0, start.id)
    return proto.SerializeToString()


def test_a_call_chain_3000_deep_loads(tmp_path):
    """The schedule was flattened by recursion: "internal error (please report):
    RecursionError". Every instruction of the chain is in the program order."""
    tree = tmp_path / "t"
    tree.mkdir()
    (tree / next(BOTH.glob("*.hlo.pb")).name).write_bytes(_call_chain(3000))
    db = tmp_path / "w.duckdb"
    report = bufferhouse.ingest([tree], db=db, jobs=1)
    assert report.ok and len(report.loaded) == 1, _errors(report)
    with duckdb.connect(str(db), read_only=True) as con:
        (chained,) = con.execute(
            "SELECT count(*) FROM sequence WHERE instruction LIKE 'chain%'"
        ).fetchall()[0]
    assert chained == 3001


@pytest.fixture
def refused(monkeypatch):
    """Paths that open() and os.scandir() refuse as a permission bit would (tests run as
    root, whom permission bits do not stop)."""
    paths: set[str] = set()
    real_open, real_scandir = builtins.open, os.scandir

    def fake_open(file, *args, **kwargs):
        if os.fspath(file) in paths:
            raise PermissionError(13, "Permission denied", os.fspath(file))
        return real_open(file, *args, **kwargs)

    def fake_scandir(path="."):
        if os.fspath(path) in paths:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(os, "scandir", fake_scandir)
    return paths


def test_unreadable_files_and_directories_are_reported(tmp_path, refused):
    tree = tmp_path / "t"
    shutil.copytree(SAMPLES, tree)
    (tree / "run.log").write_text("E0000 RESOURCE_EXHAUSTED: somewhere in here\n")
    (tree / "notes.txt").write_text("BufferAssignment:\n")
    (tree / "locked").mkdir()
    shutil.copy(ONE_SAMPLE, tree / "locked")
    refused.update({str(tree / "run.log"), str(tree / "notes.txt"), str(tree / "locked")})
    report = bufferhouse.ingest([tree], db=tmp_path / "w.duckdb", jobs=1)
    assert len(report.loaded) == 5
    assert _errors(report) == {
        str(tree / "locked"): "cannot list directory: permission denied",
        str(tree / "notes.txt"): "cannot read file: permission denied",
        str(tree / "run.log"): "cannot read file: permission denied",
    }


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_behind_a_link_is_reported_not_opened(tmp_path):
    """Discovery opened it and waited for a writer forever."""
    tree = tmp_path / "t"
    tree.mkdir()
    shutil.copy(ONE_SAMPLE, tree)
    os.mkfifo(tmp_path / "pipe")
    (tree / "train.log").symlink_to(tmp_path / "pipe")
    (tree / "given.txt").symlink_to(tmp_path / "pipe")
    done: list = []
    walker = threading.Thread(target=lambda: done.append(discover([tree])), daemon=True)
    walker.start()
    walker.join(timeout=30)
    if walker.is_alive():  # blocked in open(): a writer lets it go, then fail
        os.close(os.open(tmp_path / "pipe", os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("discovery opened the FIFO and waited for a writer")
    problems = {p.path: p.message for g in done[0] for p in g.problems}
    assert problems == {
        str(tree / "given.txt"): "cannot read file: not a regular file (a FIFO); not read",
        str(tree / "train.log"): "cannot read file: not a regular file (a FIFO); not read",
    }
    report = bufferhouse.ingest([tree, tree / "given.txt"], db=tmp_path / "w.duckdb", jobs=1)
    assert len(report.loaded) == 1 and len(report.failed) == 2


@pytest.mark.parametrize(
    "damage",
    ["truncated", "corrupt .gz"],
)
def test_a_damaged_proto_leaves_the_text_beside_it_to_load(tmp_path, damage):
    """A damaged `.hlo.pb` failed the good text dump of the same stem too."""
    tree = tmp_path / "t"
    shutil.copytree(BOTH, tree)
    proto = next(tree.glob("*.hlo.pb"))
    if damage == "truncated":
        proto.write_bytes(proto.read_bytes()[: proto.stat().st_size // 2])
        bad = proto
    else:
        bad = proto.with_name(proto.name + ".gz")
        proto.unlink()
        bad.write_bytes(_corrupt_gz())
    db = tmp_path / "w.duckdb"
    report = bufferhouse.ingest([tree], db=db, jobs=1)
    assert report.ok and len(report.loaded) == 1
    (warning,) = report.loaded[0].warnings
    assert warning.path == str(bad)
    assert warning.message.endswith("(the text dump beside it is loaded without it)")
    assert ("truncated" if damage == "truncated" else "corrupt gzip data") in warning.message
    with duckdb.connect(str(db), read_only=True) as con:
        kinds = con.execute("SELECT source_kind FROM modules").fetchall()
        warned = con.execute("SELECT path FROM diagnostics WHERE severity = 'warning'").fetchall()
    assert kinds == [("text",)] and warned == [(str(bad),)]


def test_only_logs_without_messages_write_no_warehouse(tmp_path):
    """ "no dumps found" still left a warehouse when a log had been scanned."""
    tree = tmp_path / "t"
    tree.mkdir()
    (tree / "train.log").write_text("step 1 loss 0.5\nstep 2 loss 0.4\n")
    (tree / "eval.txt").write_text("accuracy 0.9\n")
    db = tmp_path / "w.duckdb"
    report = bufferhouse.ingest([tree], db=db, jobs=1)
    assert not report.outcomes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t"]
    # An existing warehouse is left as it is.
    shutil.copy(ONE_SAMPLE, tree)
    assert bufferhouse.ingest([tree], db=db, jobs=1).ok
    (tree / ONE_SAMPLE.name).unlink()
    assert not bufferhouse.ingest([tree], db=db, jobs=1).outcomes
    assert db.exists()


def test_reader_refuses_what_is_not_a_regular_file(tmp_path):
    with pytest.raises(OSError, match="not a regular file \\(a directory\\)"):
        reader.require_regular(str(tmp_path))
