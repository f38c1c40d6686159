"""The report as a new user reads it (issue 41 item 8): recompiles counted within a dump
directory, jax's helper programs told apart by one rule (bh_is_helper) that the queries,
the report and plain SQL share, names that wrap between words, configurations shown
with their directories."""

from __future__ import annotations

import os
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

import bufferhouse
from bufferhouse.export.transpile import transpile
from bufferhouse.queries.helpers import HELPER_NAME, is_helper
from tests.conftest import CORPUS

DUMP = CORPUS / "jax-0.7.2" / "bool_mask_ops"
STEM = "module_0001.jit_bool_masks.cpu_after_optimizations"
HELPERS = ("jit__normal", "jit__multi_slice", "jit_convert_element_type", "jit_broadcast_in_dim")
PROGRAMS = ("jit_train_step", "jit_scan", "jit_mlp", "jit_clip", "jit_decode")


def test_the_macro_and_the_python_rule_agree(samples_db):
    names = HELPERS + PROGRAMS + ("jit_", "jit__", "_normal", "jit_iota", "jit_while", None)
    sql = ", ".join(f"{HELPER_NAME}($n{i}) AS h{i}" for i in range(len(names)))
    row = bufferhouse.sql(
        f"SELECT {sql}", samples_db, {f"n{i}": n for i, n in enumerate(names)}
    ).to_pylist()[0]
    got = {n: bool(row[f"h{i}"]) for i, n in enumerate(names)}
    assert got == {n: is_helper(n) for n in names}
    assert all(got[h] for h in HELPERS) and not any(got[p] for p in PROGRAMS)


def test_recompiles_counts_within_one_dump_directory(fleet_db):
    """The corpus holds the same jit names in several jax releases' directories: those
    are runs, not recompiles; each row's modules come from its one directory."""
    rows = bufferhouse.query("recompiles", fleet_db, min_modules=1).to_pylist()
    primary = bufferhouse.sql(
        "SELECT module_name, paths[1] AS path FROM modules "
        "WHERE module_id IN (SELECT primary_module_id FROM compile_modules)",
        fleet_db,
    ).to_pylist()
    per_dir: dict[tuple[str, str], int] = defaultdict(int)
    for r in primary:
        per_dir[(os.path.dirname(r["path"]), r["module_name"])] += 1
    assert {(r["directory"], r["module_name"]): r["modules"] for r in rows} == dict(per_dir)
    names = defaultdict(set)
    for d, n in per_dir:
        names[n].add(d)
    assert any(len(d) > 1 for d in names.values()), "some name is in several directories"
    for r in bufferhouse.query("recompiles", fleet_db).to_pylist():
        assert r["modules"] == per_dir[(r["directory"], r["module_name"])] >= 2


@pytest.fixture(scope="module")
def helper_db(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("helpers")
    for directory, names in (("run-a", (*HELPERS, "jit_decode")), ("run-b", ("jit_decode",))):
        root = tmp / "dumps" / directory
        root.mkdir(parents=True)
        for i, name in enumerate(names):
            for src in DUMP.iterdir():
                rest = src.name.removeprefix(STEM)
                target = root / f"module_{i + 1:04d}.{name}.cpu_after_optimizations{rest}"
                shutil.copy(src, target)
    db = tmp / "h.duckdb"
    assert bufferhouse.ingest(tmp / "dumps", db=db, jobs=1).ok
    return db


def test_the_report_leaves_helpers_out_and_names_directories(helper_db, tmp_path):
    pytest.importorskip("matplotlib")
    from bufferhouse import visual

    written = visual.write_report(tmp_path / "r.html", db=helper_db, sections=0)
    data = written.data
    assert data.helper_count == len(HELPERS)
    assert {r["module_name"] for r in data.top_modules} == {"jit_decode"}
    assert {os.path.basename(r["directory"]) for r in data.top_modules} == {"run-a", "run-b"}
    every = bufferhouse.query("top-modules", helper_db).to_pylist()
    assert {r["module_name"] for r in every} == {*HELPERS, "jit_decode"}
    text = written.path.read_text(encoding="utf-8")
    assert f"{len(HELPERS)} of jax's helper programs" in text
    # table cells break between words: after the _ of jit_, never inside decode
    assert '<td class="wrap"><code>jit_<wbr>decode \u00b7 ' in text


def test_the_rule_reaches_other_engines_written_out():
    sql = transpile("top-modules", "spark").sql
    assert HELPER_NAME not in sql and "'jit_convert_element_type'" in sql
