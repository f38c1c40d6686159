"""The forms of one compile side by side (issue 36 item 3, issue 41 item 1).

In a text+proto tree one form failing never takes the other down, either way round:
the form that reads lands, with the other's error (file, line, what was expected) as
its warning. The oracle is the same compile read from that form alone, in a tree of
its own: the same figures.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb

import bufferhouse

PROTO = Path(__file__).parent / "data" / "proto"
SRC = PROTO / "both" / "donate_sgd"
STEM = "module_0000.jit_donate_sgd.cpu_after_optimizations"
FIGURES = "SELECT total_bytes, heap_peak_bytes, xla_peak_bytes FROM modules"


def _figures(db: Path) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(FIGURES).fetchall()


def test_a_failing_text_leaves_the_proto_loaded(tmp_path: Path) -> None:
    tree = tmp_path / "t"
    shutil.copytree(SRC, tree)
    ba = tree / f"{STEM}-buffer-assignment.txt"
    lines = ba.read_text().split("\n")
    lines[1] = "allocation 0: size banana"
    ba.write_text("\n".join(lines))
    report = bufferhouse.ingest([tree], db=tmp_path / "w.duckdb", jobs=1)
    assert report.ok and len(report.loaded) == 1
    (warning,) = [w for w in report.loaded[0].warnings if w.path == str(ba)]
    assert warning.line == 2 and "the proto beside it is loaded without it" in warning.message
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(SRC / f"{STEM}.hlo.pb", alone)
    bufferhouse.ingest([alone], db=tmp_path / "a.duckdb", jobs=1)
    assert _figures(tmp_path / "w.duckdb") == _figures(tmp_path / "a.duckdb")
    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as con:
        assert con.execute("SELECT source_kind FROM modules").fetchall() == [("proto",)]
        rows = con.execute("SELECT severity, line FROM diagnostics WHERE path = ?", [str(ba)])
        assert rows.fetchall() == [("warning", 2)]


def test_a_failing_proto_leaves_the_text_loaded(tmp_path: Path) -> None:
    tree = tmp_path / "t"
    shutil.copytree(SRC, tree)
    pb = tree / f"{STEM}.hlo.pb"
    pb.write_bytes(pb.read_bytes()[:-40])
    report = bufferhouse.ingest([tree], db=tmp_path / "w.duckdb", jobs=1)
    assert report.ok and len(report.loaded) == 1
    assert any(w.path == str(pb) for w in report.loaded[0].warnings)
