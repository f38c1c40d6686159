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
from bufferhouse.check import check_warehouse
from bufferhouse.parse.results import ParsedModule
from tests.conftest import DATA

PROTO = DATA / "proto"
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


def _mixed_tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    """donate_sgd's text files beside while_newton's .hlo.pb renamed to donate_sgd's stem."""
    tree = tmp_path / "mixed"
    shutil.copytree(SRC, tree)
    other = next((PROTO / "both" / "while_newton").glob("*.hlo.pb"))
    pb = tree / f"{STEM}.hlo.pb"
    pb.write_bytes(other.read_bytes())
    return tree, tree / f"{STEM}-buffer-assignment.txt", pb


def _alone(tmp_path: Path, files: list[Path], name: str) -> list[tuple]:
    d = tmp_path / name
    d.mkdir()
    for f in files:
        shutil.copy(f, d)
    db = tmp_path / f"{name}.duckdb"
    assert bufferhouse.ingest([d], db=db, jobs=1).ok
    return _figures(db)


def test_forms_of_two_programs_are_two_modules(tmp_path: Path) -> None:
    """Their assignments differ: two modules, each equal to its form read alone, a warning
    naming both files on each, and check passes (the merge made it fail)."""
    tree, ba, pb = _mixed_tree(tmp_path)
    db = tmp_path / "w.duckdb"
    report = bufferhouse.ingest([tree], db=db, jobs=1)
    assert report.ok and len(report.loaded) == 2
    for outcome in report.loaded:
        notes = [w.message for w in outcome.warnings if "not one compile" in w.message]
        assert len(notes) == 1 and str(ba) in notes[0] and str(pb) in notes[0]
    with duckdb.connect(str(db), read_only=True) as con:
        kinds = con.execute("SELECT source_kind FROM modules ORDER BY 1").fetchall()
    assert kinds == [("proto",), ("text",)]
    text_files = [f for f in tree.iterdir() if not f.name.endswith(".hlo.pb")]
    expected = sorted(_alone(tmp_path, text_files, "t") + _alone(tmp_path, [pb], "p"))
    assert sorted(_figures(db)) == expected
    checked = check_warehouse(db)
    assert checked.ok, checked.problems[:3]
    again = bufferhouse.ingest([tree], db=db, jobs=1)
    assert len(again.loaded) == 0 and len(again.present) == 2


def test_forms_of_two_programs_in_worker_processes(tmp_path: Path) -> None:
    tree, _, _ = _mixed_tree(tmp_path)
    good = tmp_path / "good"
    shutil.copytree(PROTO / "both" / "scan_rnn", good)
    report = bufferhouse.ingest([tree, good], db=tmp_path / "w.duckdb", jobs=2)
    assert report.ok and len(report.loaded) == 3


def test_one_resized_allocation_is_still_one_module(tmp_path: Path) -> None:
    """The same compile with one size changed: one module and the disagreement warning."""
    from bufferhouse.parse.proto import hlo_pb2

    tree = tmp_path / "t"
    shutil.copytree(SRC, tree)
    pb = tree / f"{STEM}.hlo.pb"
    message = hlo_pb2.HloProto()
    message.ParseFromString(pb.read_bytes())
    message.buffer_assignment.buffer_allocations[0].size += 64
    pb.write_bytes(message.SerializeToString())
    report = bufferhouse.ingest([tree], db=tmp_path / "w.duckdb", jobs=1)
    assert len(report.loaded) == 1
    assert any("text and proto disagree" in w.message for w in report.loaded[0].warnings)


# --- found by bench/fuzz_pairing.py ------------------------------------------------------


def _cut_tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    """donate_sgd with its buffer-assignment text cut inside its first allocation: no value
    is placed, but the values file's Used values name values."""
    tree = tmp_path / "t"
    shutil.copytree(SRC, tree)
    ba = tree / f"{STEM}-buffer-assignment.txt"
    ba.write_text("\n".join(ba.read_text().split("\n")[:2]) + "\n ")
    return tree, ba, tree / f"{STEM}.hlo.pb"


def test_a_text_cut_before_its_first_value_is_a_located_error(tmp_path: Path) -> None:
    """It was `internal error ... ArrowIndexError: Index 0 out of bounds` (the Used values
    rule took placed names from an empty table), and the proto beside it failed too."""
    tree, _, pb = _cut_tree(tmp_path)
    report = bufferhouse.ingest([tree], db=tmp_path / "w.duckdb", jobs=1)
    assert report.ok and len(report.loaded) == 1
    (warning,) = [
        w
        for w in report.loaded[0].warnings
        if "Used values" in w.message or "used value" in w.message
    ]
    assert warning.path.endswith("-buffer-assignment-values.txt") and warning.line > 0
    assert "is not placed in any allocation" in warning.message
    assert "internal error" not in warning.message
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(pb, alone)
    bufferhouse.ingest([alone], db=tmp_path / "a.duckdb", jobs=1)
    assert _figures(tmp_path / "w.duckdb") == _figures(tmp_path / "a.duckdb")


def test_a_bug_of_the_text_reader_leaves_the_proto_loaded(tmp_path: Path, monkeypatch) -> None:
    """One form failing never takes the other down, whatever the failure: an exception of
    the text reader that is no DumpError is the text's internal error, the proto lands."""
    import bufferhouse.parse as parse

    def broken(*_args, **_kwargs):
        raise IndexError("a bug")

    monkeypatch.setattr(parse, "parse_module", broken)
    tree = tmp_path / "t"
    shutil.copytree(SRC, tree)
    (group,) = parse.discover.discover([tree])
    result = parse.parse_files(group)
    assert isinstance(result, ParsedModule) and result.row["source_kind"] == "proto"
    (warning,) = [w for w in result.warnings if "internal error" in w.message]
    assert warning.path == str(tree / f"{STEM}-buffer-assignment.txt")
    assert "IndexError: a bug" in warning.message and "loaded without it" in warning.message
