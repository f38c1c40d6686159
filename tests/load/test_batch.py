"""Small modules parsed as a batch (parse/batch.py, issue 39 item 2): each module's result
is the one it has parsed alone, a bad module fails alone with its located error, and the
plan cuts the run into batches of small text modules only."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

import bufferhouse
from bufferhouse.load import schedule
from bufferhouse.parse import parse_files
from bufferhouse.parse.batch import _check_rows, parse_batch
from bufferhouse.parse.derive.fingerprint import assignment_fingerprint, batch_fingerprints
from bufferhouse.parse.results import Failed, ParsedModule
from bufferhouse.parse.sources import discover_all
from tests.conftest import DATA

CORPUS = DATA / "corpus" / "jax-0.10.2"
BAD = DATA / "bad" / "live-range-past-schedule-buffer-assignment.txt"


def _groups(root: Path) -> list:
    return [g for g in discover_all([str(root)]) if getattr(g, "buffer_assignment", None)]


def test_each_module_of_a_batch_is_as_it_is_parsed_alone():
    groups = _groups(CORPUS)
    assert len(groups) > 20
    alone = [parse_files(g) for g in groups]
    batched = parse_batch(groups)
    assert [type(r) for r in batched] == [type(r) for r in alone]
    for one, many in zip(alone, batched):
        assert many.row == one.row  # the fingerprint too
        assert many.content_hash == one.content_hash
        assert many.tables.keys() == one.tables.keys()
        for name, table in one.tables.items():
            assert many.tables[name].equals(table, check_metadata=True), name


def test_batch_fingerprints_are_each_modules_own():
    results = [parse_files(g) for g in _groups(CORPUS)]
    tables = [r.tables for r in results if isinstance(r, ParsedModule)]
    digests = batch_fingerprints(tables)
    assert digests == [assignment_fingerprint(t) for t in tables]
    assert len(set(digests)) > 1
    # one module's rows moved to another module of the batch would change both
    assert batch_fingerprints(tables[1::-1]) == digests[1::-1]


@pytest.fixture
def tree_with_a_bad_module(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "dumps"
    shutil.copytree(CORPUS, root)
    bad = root / "module_0099.jit_bad.cpu_after_optimizations-buffer-assignment.txt"
    shutil.copy(BAD, bad)
    return root, bad


def test_a_bad_module_among_many_good_ones_fails_alone_located(tree_with_a_bad_module, tmp_path):
    root, bad = tree_with_a_bad_module
    groups = _groups(root)
    run = schedule.plan(groups, jobs=1)
    # the bad module is parsed in one batch with dozens of good ones
    at = run.order.index(next(g for g in groups if g.buffer_assignment == str(bad)))
    ends = [sum(run.units[: i + 1]) for i in range(len(run.units))]
    unit = next(i for i, end in enumerate(ends) if at < end)
    assert run.units[unit] > 20
    db = tmp_path / "w.duckdb"
    report = bufferhouse.ingest(root, db, jobs=1)
    failed = [o for o in report.outcomes if o.status == "failed"]
    assert len(failed) == 1
    assert (failed[0].error.path, failed[0].error.line) == (str(bad), 72)
    assert "past the schedule end" in failed[0].error.message
    loaded = [o for o in report.outcomes if o.status == "loaded"]
    assert len(loaded) == len(groups) - 1
    # the good ones whole: each as a warehouse of its own holds it
    alone = tmp_path / "alone.duckdb"
    one = next(g for g in groups if g.buffer_assignment != str(bad))
    bufferhouse.ingest(one.buffer_assignment, alone, jobs=1)
    sql = (
        "SELECT m.content_hash, count(*) FROM assignments a JOIN modules m USING (module_id)"
        " GROUP BY ALL"
    )
    with duckdb.connect(str(alone), read_only=True) as con:
        (row,) = con.execute(sql).fetchall()
    with duckdb.connect(str(db), read_only=True) as con:
        assert row in con.execute(sql).fetchall()
        assert con.execute("SELECT count(*) FROM modules").fetchone()[0] == len(groups) - 1


def test_a_row_too_large_for_its_column_fails_that_module_alone():
    groups = _groups(CORPUS)[:5]
    results = parse_batch(groups)
    results[2].row["schedule_length"] = 1 << 40  # INTEGER: 32 bits
    _check_rows(groups, results, list(range(5)))
    assert [type(r) for r in results] == [ParsedModule] * 2 + [Failed] + [ParsedModule] * 2
    assert "too large" in results[2].error.message
    assert not hasattr(results[2], "tables") and not hasattr(results[2], "row")


def test_the_plan_batches_small_text_modules_only(tmp_path: Path):
    root = tmp_path / "dumps"
    shutil.copytree(CORPUS, root)
    big = DATA / "samples"
    for f in big.glob("*.txt"):
        shutil.copy(f, root / f.name)
    groups = discover_all([str(root)])
    run = schedule.plan(groups, jobs=1)
    assert sum(run.units) == len(run.order)
    at = 0
    for count in run.units:
        unit = run.order[at : at + count]
        sizes = run.sizes[at : at + count]
        if count > 1:
            assert all(0 < s <= schedule.BATCH_MAX_BYTES for s in sizes)
            assert all(g.buffer_assignment and g.proto is None for g in unit)
        at += count
    assert any(c > 1 for c in run.units) and any(c == 1 for c in run.units)
