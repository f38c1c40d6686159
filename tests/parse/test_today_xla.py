"""Today's XLA and the next one (issue 36): jax 0.12 prints `page N` on every
allocation line, and a newer XLA's well-formed but unknown attribute is kept and
warned about, never a lost module; `--strict` refuses it. Both text readers (the
line reader and the column reader) give the same rows, warnings and errors.
The figures are checked against jax 0.12's own memory_analysis() of the fixture."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

import bufferhouse
from bufferhouse.errors import DumpError, UnknownInput
from bufferhouse.parse import parse_module
from bufferhouse.parse.discover import ModuleFiles
from tests.conftest import DATA

FIXTURE = DATA / "jax012-page"
DUMP = FIXTURE / "dump"
STEM = "module_0006.jit_step.cpu_after_optimizations"
ASSIGNMENT = DUMP / f"{STEM}-buffer-assignment.txt"
READERS = {"lines": {"accelerate": False}, "columns": {"vector_min_bytes": 0}}


def _copy(tmp_path: Path, edit=None, proto: bool = True) -> Path:
    """The fixture's dump in a folder of its own, its allocation lines edited by `edit`."""
    root = tmp_path / "dump"
    root.mkdir()
    for f in DUMP.iterdir():
        if proto or not f.name.endswith(".hlo.pb"):
            shutil.copy(f, root)
    if edit is not None:
        target = root / ASSIGNMENT.name
        lines = target.read_text().splitlines(keepends=True)
        target.write_text(
            "".join(edit(line) if line.startswith("allocation ") else line for line in lines)
        )
    return root


def _read(root: Path, reader: str):
    files = ModuleFiles(
        str(root),
        STEM,
        buffer_assignment=str(root / ASSIGNMENT.name),
        values=str(root / f"{STEM}-buffer-assignment-values.txt"),
        live_range=str(root / f"{STEM}-live-range.txt"),
    )
    try:
        parsed = parse_module(files.dump_files(), None, **READERS[reader])
    except DumpError as exc:
        return ("error", type(exc).__name__, Path(exc.path).name, exc.line, exc.message)
    warnings = [
        (type(w).__name__, Path(w.path).name, w.line, w.message, w.text) for w in parsed.warnings
    ]
    return ("ok", parsed.rows(), warnings)


def _figures(db: Path) -> dict:
    """What the warehouse says of the one module: its categories (the canned query) and
    XLA's peak."""
    (row,) = bufferhouse.query("categories", db=str(db), module="jit_step").to_pylist()
    con = duckdb.connect(str(db), read_only=True)
    try:
        ((peak, kind),) = con.execute("SELECT xla_peak_bytes, source_kind FROM modules").fetchall()
        pages = con.execute("SELECT DISTINCT page FROM allocations").fetchall()
    finally:
        con.close()
    return {
        "argument_size_in_bytes": row["parameter_bytes"],
        "output_size_in_bytes": row["output_bytes"],
        "alias_size_in_bytes": row["alias_bytes"],
        "temp_size_in_bytes": row["temp_bytes"],
        "peak_memory_in_bytes": peak,
        "kind": kind,
        "pages": pages,
    }


def _without_unknown(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if k != "unknown_attributes"} for row in rows]


@pytest.mark.parametrize("proto", [False, True], ids=["text", "text+proto"])
def test_a_jax_0_12_dump_loads_with_memory_analysis_figures(tmp_path, proto):
    want = json.loads((FIXTURE / "memory_analysis.json").read_text())
    assert "page 0" in ASSIGNMENT.read_text()  # the fixture is of today's format
    report = bufferhouse.ingest(str(_copy(tmp_path, proto=proto)), db=str(tmp_path / "w.duckdb"))
    assert not report.failed and not [w for o in report.outcomes for w in o.warnings]
    got = _figures(tmp_path / "w.duckdb")
    for key in (
        "argument_size_in_bytes",
        "output_size_in_bytes",
        "alias_size_in_bytes",
        "temp_size_in_bytes",
        "peak_memory_in_bytes",
    ):
        assert got[key] == want[key], key
    assert got["kind"] == ("text+proto" if proto else "text")
    assert got["pages"] == [(0,)]


def test_page_is_read_alike_by_both_readers_after_a_color_too(tmp_path):
    root = _copy(tmp_path, lambda line: line.replace(", page 0,", ", color 0, page 3,", 1))
    lines, columns = _read(root, "lines"), _read(root, "columns")
    assert lines == columns and lines[0] == "ok"


@pytest.mark.parametrize(
    "attribute",
    ["frobnicated", "numa-node 1", "shard_group=2", "layout is |f32[2,3]{1,0}|"],
)
def test_an_unknown_attribute_loads_with_a_warning_naming_file_line_and_text(tmp_path, attribute):
    root = _copy(tmp_path, lambda line: line.replace(", page 0", f", page 0, {attribute}", 1))
    lines, columns = _read(root, "lines"), _read(root, "columns")
    assert lines == columns
    status, rows, warnings = lines
    assert status == "ok"
    ((kind, name, line, message, text),) = warnings
    assert (kind, name, line, text) == ("UnknownInput", ASSIGNMENT.name, 2, attribute)
    assert f"unknown allocation attribute '{attribute}'" in message
    # every figure the attribute does not touch is unchanged
    (tmp_path / "plain").mkdir()
    plain = _read(_copy(tmp_path / "plain"), "lines")[1]
    for table in ("allocations", "hlo_values", "assignments", "live_ranges"):
        assert _without_unknown(rows[table]) == _without_unknown(plain[table]), table
    assert {r["unknown_attributes"] for r in rows["allocations"]} == {attribute}  # every line


def test_the_warning_lands_in_diagnostics_with_its_text_and_strict_refuses_it(tmp_path):
    root = _copy(tmp_path, lambda line: line.replace(", page 0", ", page 0, numa-node 1", 1))
    db = tmp_path / "w.duckdb"
    report = bufferhouse.ingest(str(root), db=str(db))
    assert len(report.loaded) == 1 and not report.failed
    con = duckdb.connect(str(db), read_only=True)
    ((severity, line, message, text),) = con.execute(
        "SELECT severity, line, message, text FROM diagnostics"
    ).fetchall()
    ((kept,),) = con.execute("SELECT DISTINCT unknown_attributes FROM allocations").fetchall()
    con.close()
    assert (severity, line, text, kept) == ("warning", 2, "numa-node 1", "numa-node 1")
    assert "numa-node 1" in message
    strict = bufferhouse.ingest(str(root), db=str(tmp_path / "s.duckdb"), strict=True)
    (failed,) = strict.failed
    assert isinstance(failed.error, UnknownInput) and failed.error.line == 2
    assert "--strict" in failed.error.message and "numa-node 1" in failed.error.message


@pytest.mark.parametrize(
    "attribute, says",
    [
        ("3 frobs", "malformed allocation attribute '3 frobs'"),
        ("maybe-live-out please", "malformed allocation attribute 'maybe-live-out please'"),
        ("page x", "expected 'page N'"),
        ("word " + "x" * 300, "malformed allocation attribute"),
    ],
)
def test_a_malformed_attribute_is_a_located_error_in_both_readers(tmp_path, attribute, says):
    root = _copy(tmp_path, lambda line: line.replace(", page 0", f", page 0, {attribute}", 1))
    lines, columns = _read(root, "lines"), _read(root, "columns")
    assert lines == columns
    status, _kind, name, line, message = lines
    assert (status, name, line) == ("error", ASSIGNMENT.name, 2)
    assert says in message


def _insert_after(marker: str, new: str):
    """An edit of the whole assignment file: `new` on a line of its own after `marker`."""

    def edit(root: Path) -> None:
        target = root / ASSIGNMENT.name
        text = target.read_text()
        assert marker in text
        target.write_text(text.replace(marker, marker + new + "\n", 1))

    return edit


@pytest.mark.parametrize(
    "marker, new",
    [
        ("BufferAssignment:", "Pages: 1 of 65536 KiB"),  # before the first allocation
        (" value:", "Reserved scratch: 0 bytes"),  # after an allocation's first value
        (
            " value: <2 reduce_sum.5",
            "Peak memory could not be determined (unbounded dynamic shape)",
        ),
    ],
    ids=["section-start", "between-values", "file-end"],
)
def test_an_unknown_line_loads_with_a_warning_in_both_readers(tmp_path, marker, new):
    # after the whole first line that starts with `marker`
    marker = next(line for line in ASSIGNMENT.read_text().splitlines() if line.startswith(marker))
    marker += "\n"
    root = _copy(tmp_path)
    _insert_after(marker, new)(root)
    lines, columns = _read(root, "lines"), _read(root, "columns")
    assert lines == columns
    status, rows, warnings = lines
    assert status == "ok", lines
    ((kind, name, line, message, text),) = warnings
    assert (kind, name, text) == ("UnknownInput", ASSIGNMENT.name, new)
    assert ASSIGNMENT.read_text().splitlines()[line - 2] + "\n" == marker  # the line before
    assert "unknown line" in message
    (tmp_path / "plain").mkdir()
    plain = _read(_copy(tmp_path / "plain"), "lines")[1]
    for table in ("allocations", "hlo_values", "assignments", "live_ranges"):
        got = [{k: v for k, v in r.items() if k != "line"} for r in rows[table]]
        want = [{k: v for k, v in r.items() if k != "line"} for r in plain[table]]
        assert got == want, table
    strict = bufferhouse.ingest(str(root), db=str(tmp_path / "s.duckdb"), strict=True)
    (failed,) = strict.failed
    assert isinstance(failed.error, UnknownInput) and failed.error.line == line


@pytest.mark.parametrize(
    "new",
    ["HloLiveRange", "allocation x", "Used values", "total bytes: 5", "Pages\\x01"],
)
def test_a_damaged_known_line_is_still_an_error(tmp_path, new):
    root = _copy(tmp_path)
    _insert_after("BufferAssignment:\n", new.replace("\\x01", "\x01"))(root)
    lines, columns = _read(root, "lines"), _read(root, "columns")
    assert lines == columns
    assert lines[0] == "error" and lines[3] == 2, lines


def test_a_new_dump_file_kind_beside_a_module_loses_nothing(tmp_path):
    """A file kind a newer XLA writes beside a module (here a made-up report, in text and
    proto wire form) is left unread: the module loads with the same rows, with or
    without --strict. (XLA writes dozens of kinds per module that bufferhouse has no use
    for, pass dumps, flagfiles, debug options: none is warned about.)"""
    both = DATA / "proto" / "both" / "while_newton"
    plain, new = tmp_path / "plain", tmp_path / "new"
    shutil.copytree(both, plain)
    shutil.copytree(both, new)
    stem = "module_0000.jit_while_newton.cpu_after_optimizations"
    (new / f"{stem}-frobnicator-report.pb").write_bytes(b"\x08\x01\x12\x03abc")
    (new / f"{stem}.frobnicator.txt").write_text("Frobnicator report v2\n")
    counts = {}
    for root, strict in ((plain, False), (new, False), (new, True)):
        db = tmp_path / f"{root.name}{strict}.duckdb"
        report = bufferhouse.ingest([str(root)], db=str(db), strict=strict)
        assert report.ok and len(report.loaded) == 1, (root, strict)
        with duckdb.connect(str(db), read_only=True) as con:
            counts[(root.name, strict)] = con.execute(
                "SELECT heap_peak_bytes, total_bytes, source_kind,"
                " (SELECT count(*) FROM allocations), (SELECT count(*) FROM heap_events),"
                " (SELECT count(*) FROM diagnostics) FROM modules"
            ).fetchall()
    assert counts[("new", False)] == counts[("plain", False)] == counts[("new", True)]
