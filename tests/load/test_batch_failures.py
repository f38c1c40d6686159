"""A batch of many small modules with a bad one among them: the good ones land whole,
the bad one fails alone with its located error (issue 39)."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb

import bufferhouse
from bufferhouse.schema import MODULE_TABLES
from tests.conftest import DATA

SAMPLES = DATA / "samples"


def _tree(root: Path, copies: int) -> list[Path]:
    """`copies` renamed copies of every sample (a module's name is part of its identity)."""
    root.mkdir()
    out = []
    for i in range(copies):
        for src in sorted(SAMPLES.glob("*.txt")):
            dest = root / f"c{i:02d}_{src.name}"
            shutil.copy(src, dest)
            out.append(dest)
    return out


def _rows_by_module(db: Path) -> dict[str, dict[str, int]]:
    """content_hash -> table -> rows, over every per-module table."""
    out: dict[str, dict[str, int]] = {}
    with duckdb.connect(str(db), read_only=True) as con:
        hashes = dict(con.execute("SELECT module_id, content_hash FROM modules").fetchall())
        for t in MODULE_TABLES:
            for module_id, n in con.execute(
                f"SELECT module_id, count(*) FROM {t.name} GROUP BY ALL"
            ).fetchall():
                out.setdefault(hashes[module_id], {})[t.name] = n
        for h in hashes.values():
            out.setdefault(h, {})
    return out


def test_a_bad_module_among_many_good_ones(tmp_path: Path) -> None:
    good = tmp_path / "good"
    files = _tree(good, 12)  # 60 modules: one batch
    clean = tmp_path / "clean.duckdb"
    report = bufferhouse.ingest(good, clean, jobs=1)
    assert len(report.loaded) == len(files)

    mixed = tmp_path / "mixed"
    shutil.copytree(good, mixed)
    bad = mixed / files[len(files) // 2].name
    lines = bad.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("allocation 1: size "))
    lines[at] = "allocation 1: size twelve, parameter 0:\n"
    bad.write_text("".join(lines))
    db = tmp_path / "mixed.duckdb"
    report = bufferhouse.ingest(mixed, db, jobs=1)

    failed = [o for o in report.outcomes if o.status == "failed"]
    assert [o.files.display for o in failed] == [str(bad)]
    error = failed[0].error
    assert error.path == str(bad) and error.line == at + 1
    assert "allocation" in error.message
    assert len(report.loaded) == len(files) - 1
    # every good module whole: the same rows in every table as in the clean ingest
    want, got = _rows_by_module(clean), _rows_by_module(db)
    assert set(got) < set(want) and len(got) == len(want) - 1
    assert all(got[h] == want[h] for h in got)
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT path, line, severity, module_id FROM diagnostics WHERE severity = 'error'"
        ).fetchall()
    assert rows == [(str(bad), at + 1, "error", None)]
    # and again: nothing new, the bad one fails again, located the same
    again = bufferhouse.ingest(mixed, db, jobs=1)
    assert [o.status for o in again.outcomes].count("present") == len(files) - 1
    assert [o.error.line for o in again.outcomes if o.status == "failed"] == [at + 1]
