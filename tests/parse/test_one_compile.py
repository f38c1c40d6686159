"""One compile, one answer: the same jax compiles ingested as text only, as protos only,
as both side by side, and from a profile give the same figures in every consumer.

The compiles are tests/data/proto (made by gen.py there with jax on CPU): scan, remat,
donation, a while loop, a 2-device sharded program and a LAPACK custom call, each
dumped as text and .hlo.pb of one compile; a profile of two programs with the .hlo.pb
dump of the same process. The forms are cut from the same files, so each warehouse
holds the very same compiles, and their figures must be equal, form against form
(the oracle here is the other form; tests/parse/proto/test_proto.py holds each against
memory_analysis()).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import bufferhouse
from tests.conftest import DATA as TESTS_DATA
from tests.conftest import ROOT

DATA = TESTS_DATA / "proto"
PROGRAMS = sorted(p.name for p in (DATA / "both").iterdir() if p.is_dir())
FORMS = ("text", "proto", "mixed")

#: The figures that must not depend on the form.
MODULE_FIGURES = (
    "module_name, total_bytes, allocation_count, value_count, heap_peak_bytes,"
    " xla_peak_bytes, assignment_fingerprint"
)


def _tree(tmp: Path, form: str) -> Path:
    """tests/data/proto/both cut to one form: the text dump files, the .hlo.pb, or both."""
    out = tmp / form
    for program in PROGRAMS:
        dest = out / program
        dest.mkdir(parents=True)
        for f in (DATA / "both" / program).iterdir():
            is_proto = f.name.endswith(".hlo.pb")
            is_text = f.name.endswith(".txt")
            if form == "mixed" or (form == "proto" and is_proto) or (form == "text" and is_text):
                shutil.copy(f, dest / f.name)
    return out


@pytest.fixture(scope="module")
def warehouses(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("forms")
    out = {}
    for form in FORMS:
        db = tmp / f"{form}.duckdb"
        report = bufferhouse.ingest([_tree(tmp, form)], db=db, jobs=1)
        assert len(report.loaded) == len(PROGRAMS) and not report.failed, form
        out[form] = db
    return out


def _by_name(db: Path, sql: str) -> dict[str, tuple]:
    rows = bufferhouse.sql(sql, db=db).to_pylist()
    return {r["module_name"]: tuple(v for k, v in r.items() if k != "module_name") for r in rows}


def test_each_form_gives_the_same_module_figures(warehouses: dict[str, Path]) -> None:
    figures = {
        f: _by_name(db, f"SELECT {MODULE_FIGURES} FROM modules") for f, db in warehouses.items()
    }
    assert len(figures["text"]) == len(PROGRAMS)
    assert figures["proto"] == figures["text"]
    assert figures["mixed"] == figures["text"]
    # every module has its peak now, from whichever source the form carries
    sources = {
        f: _by_name(db, "SELECT module_name, peak_source FROM modules")
        for f, db in warehouses.items()
    }
    assert set(sources["text"].values()) == {("live_ranges",)}
    assert set(sources["proto"].values()) == {("trace",)}
    assert set(sources["mixed"].values()) == {("trace",)}


def test_each_form_gives_the_same_heap_peaks_per_space(warehouses: dict[str, Path]) -> None:
    sql = (
        "SELECT m.module_name, list((h.color, h.total_bytes, h.indefinite_bytes,"
        " h.temp_peak_bytes, h.heap_peak_bytes, h.peak_time) ORDER BY h.color) AS spaces"
        " FROM heap_peaks h JOIN modules m USING (module_id) GROUP BY m.module_name"
    )
    peaks = {f: _by_name(db, sql) for f, db in warehouses.items()}
    assert peaks["proto"] == peaks["text"] == peaks["mixed"]


@pytest.mark.parametrize(
    "query, params",
    [
        ("top-modules", {}),
        ("top-modules", {"peak": "xla"}),
        ("categories", {}),
        ("memory-spaces", {}),
        ("recompiles", {"min_modules": 1}),
    ],
)
def test_canned_queries_agree_across_forms(
    warehouses: dict[str, Path], query: str, params: dict
) -> None:
    def rows(db: Path) -> list[dict]:
        drop = {"module_id", "file_stem", "content_hash", "distinct_contents", "logical_peak_bytes"}
        out = [
            {k: v for k, v in r.items() if k not in drop}
            for r in bufferhouse.query(query, db=db, **params).to_pylist()
        ]
        for r in out:  # each warehouse's tree has its own root (tmp/text, tmp/proto)
            if "directory" in r:
                r["directory"] = Path(r["directory"]).name
        return out

    text = rows(warehouses["text"])
    assert text
    assert rows(warehouses["proto"]) == text
    assert rows(warehouses["mixed"]) == text


def _peak_rows(db: Path, name: str) -> list[tuple]:
    rows = bufferhouse.query("peak-buffers", db=db, module=name, top=100_000).to_pylist()
    return sorted(
        (
            r["value_id"],
            r["instruction"],
            r["allocation_index"],
            r["size"],
            r["category"],
            r["live_at_peak"],
            r["peak_time"],
        )
        for r in rows
    )


def _heap_peak(db: Path, name: str) -> int:
    rows = bufferhouse.sql(
        f"SELECT heap_peak_bytes FROM modules WHERE module_name = '{name}'", db=db
    ).to_pylist()
    assert len(rows) == 1, name
    return rows[0]["heap_peak_bytes"]


def test_peak_buffers_agree_across_forms(warehouses: dict[str, Path]) -> None:
    """One set of peak buffers per compile: the same rows from text, proto and both,
    summing to heap_peak_bytes in each (an indefinite allocation is one row whatever
    the form says of its values' liveness)."""
    for program in PROGRAMS:
        name = f"jit_{program}"
        got = {form: _peak_rows(db, name) for form, db in warehouses.items()}
        assert got["text"] and got["proto"] == got["text"] == got["mixed"], program
        for form, db in warehouses.items():
            assert sum(r[3] for r in got[form]) == _heap_peak(db, name), (program, form)
        # every indefinite allocation of the space is listed, once
        allocations = {r[2] for r in got["text"] if r[4] != "temp"}
        assert len(allocations) == sum(1 for r in got["text"] if r[4] != "temp"), program


def test_peak_buffers_of_a_profile_and_its_dump_agree(tmp_path: Path) -> None:
    got = {}
    for form, tree in (("xplane", DATA / "profile"), ("proto", DATA / "profile_dump")):
        db = tmp_path / f"{form}.duckdb"
        bufferhouse.ingest([tree], db=db, jobs=1)
        names = [
            r["module_name"]
            for r in bufferhouse.sql("SELECT module_name FROM modules", db=db).to_pylist()
        ]
        got[form] = {n: _peak_rows(db, n) for n in names}
        for n in names:
            assert sum(r[3] for r in got[form][n]) == _heap_peak(db, n), (form, n)
    assert got["xplane"] and got["xplane"] == got["proto"]


def test_diff_of_the_same_compiles_across_forms_shows_no_change(
    warehouses: dict[str, Path],
) -> None:
    r = bufferhouse.diff(warehouses["text"], warehouses["proto"], fail_above="0%")
    assert r.gate is not None and r.gate.passed, r.gate.details()
    deltas = {row["delta_bytes"] for row in r.modules.to_pylist()}
    assert deltas == {0}
    for base, head in (("text", "proto"), ("text", "mixed"), ("proto", "text")):
        causes = bufferhouse.diff(warehouses[base], warehouses[head], causes=True).causes
        assert causes.num_rows == 0, (base, head, causes.to_pylist()[:3])


def test_a_gate_that_cannot_compare_fails(tmp_path: Path, warehouses: dict[str, Path]) -> None:
    """A proto carries no HloLiveRange: the logical peak is unknown, and a gate on it
    must not pass on NULL against NULL."""
    r = bufferhouse.diff(warehouses["proto"], warehouses["proto"], peak="logical", fail_above="5%")
    assert r.gate is not None and not r.gate.passed
    assert "cannot be compared" in r.gate.details()


def test_one_compile_in_several_forms_is_counted_once(
    tmp_path: Path, warehouses: dict[str, Path]
) -> None:
    """The text dump and the proto of the same compiles ingested into one warehouse
    (as two runs): recompiles lists nothing, top-modules ranks each compile once."""
    db = tmp_path / "both.duckdb"
    text, proto = _tree(tmp_path, "text"), _tree(tmp_path, "proto")
    bufferhouse.ingest([text], db=db, jobs=1, labels={"form": "text"})
    bufferhouse.ingest([proto], db=db, jobs=1, labels={"form": "proto"})
    assert bufferhouse.sql("SELECT count(*) AS n FROM modules", db=db).to_pylist() == [
        {"n": 2 * len(PROGRAMS)}
    ]
    assert bufferhouse.query("recompiles", db=db).num_rows == 0
    top = bufferhouse.query("top-modules", db=db).to_pylist()
    assert sorted(r["module_name"] for r in top) == sorted(f"jit_{p}" for p in PROGRAMS)
    # a label selects a compile when any of its forms carries it
    by_label = bufferhouse.query("top-modules", db=db, label="form=proto").to_pylist()
    assert [r["peak_bytes"] for r in by_label] == [r["peak_bytes"] for r in top]


def test_the_report_headline_counts_compiles_not_forms(tmp_path: Path) -> None:
    """The text dump and the proto of the same compiles: the report's headline says
    len(PROGRAMS) compiles (and the modules behind them), not twice as many modules."""
    pytest.importorskip("matplotlib")  # the report draws: the plot extra
    from bufferhouse import visual

    db = tmp_path / "both.duckdb"
    bufferhouse.ingest([_tree(tmp_path, "text"), _tree(tmp_path, "proto")], db=db, jobs=1)
    written = visual.write_report(tmp_path / "r.html", db=db, sections=0)
    assert (written.data.module_count, written.data.compile_count) == (
        2 * len(PROGRAMS),
        len(PROGRAMS),
    )
    assert sum(written.data.backends.values()) == len(PROGRAMS)
    page = written.path.read_text(encoding="utf-8")
    assert (
        f"<div class=card><b>{len(PROGRAMS)}</b><span>compiles ({2 * len(PROGRAMS)} modules" in page
    )


def test_the_profile_and_its_dump_agree(tmp_path: Path) -> None:
    """The programs of an XProf profile against the .hlo.pb dump of the same process."""
    got = {}
    for form, tree in (("xplane", DATA / "profile"), ("proto", DATA / "profile_dump")):
        db = tmp_path / f"{form}.duckdb"
        bufferhouse.ingest([tree], db=db, jobs=1)
        got[form] = _by_name(
            db,
            "SELECT module_name, heap_peak_bytes, peak_source, xla_peak_bytes, total_bytes FROM modules",
        )
    assert got["xplane"] and got["xplane"] == got["proto"]


@pytest.mark.parametrize("form", FORMS)
def test_every_consumer_serves_every_form(
    tmp_path: Path, warehouses: dict[str, Path], form: str
) -> None:
    """report, plot, export and attach on a text-only, proto-only and mixed warehouse:
    each runs, and the attached dataset answers as the warehouse does."""
    pytest.importorskip("matplotlib")  # the report draws: the plot extra
    from bufferhouse import visual
    from bufferhouse.export import attach, export_warehouse

    db = warehouses[form]
    html = tmp_path / "r.html"
    visual.write_report(html, db=db)
    page = html.read_text(encoding="utf-8")
    assert all(f"jit_{p}" in page for p in PROGRAMS)
    result = visual.plot_timeline("jit_scan_rnn", tmp_path / "t.png", db=db)
    assert result.path.stat().st_size > 0
    export_warehouse(tmp_path / "out", db)
    views = tmp_path / "views.duckdb"
    attach(tmp_path / "out", views)
    for query in ("top-modules", "peak-buffers"):
        assert (
            bufferhouse.query(query, db=views).to_pylist()
            == bufferhouse.query(query, db=db).to_pylist()
        ), query


def test_a_profile_warehouse_serves_the_report(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")  # the report draws: the plot extra
    from bufferhouse import visual

    db = tmp_path / "xplane.duckdb"
    bufferhouse.ingest([DATA / "profile"], db=db, jobs=1)
    html = tmp_path / "r.html"
    visual.write_report(html, db=db)
    top = bufferhouse.query("top-modules", db=db).to_pylist()
    assert top and all(r["peak_bytes"] is not None for r in top)
    assert all(r["module_name"] in html.read_text(encoding="utf-8") for r in top)


def test_a_version_6_warehouse_gains_the_peak_sources(tmp_path: Path) -> None:
    """6 -> 7 in place: peak_source filled for the live-range figures and for spaces
    without temp allocations; the figures unchanged; the derived tables by this
    release's rule."""
    import duckdb

    from bufferhouse.schema import SCHEMA_VERSION
    from bufferhouse.schema.warehouse import schema_version
    from tests.conftest import drop_version_7

    db = tmp_path / "v6.duckdb"
    bufferhouse.ingest([_tree(tmp_path, "text")], db=db, jobs=1)
    query = (
        "SELECT m.module_name, h.color, h.heap_peak_bytes, h.peak_source, m.peak_source"
        " FROM heap_peaks h JOIN modules m USING (module_id) ORDER BY 1, 2"
    )
    fresh = bufferhouse.sql(query, db=db).to_pylist()
    with duckdb.connect(str(db)) as con:
        drop_version_7(con)
        con.execute("UPDATE schema_info SET value = '6' WHERE key = 'schema_version'")
    bufferhouse.connect(db, read_only=False).close()
    with duckdb.connect(str(db), read_only=True) as con:
        assert schema_version(con) == SCHEMA_VERSION
    assert bufferhouse.sql(query, db=db).to_pylist() == fresh
    assert {r["peak_source"] for r in fresh} == {"live_ranges"}


SIZES = TESTS_DATA / "sizes"


def _sized(tmp: Path, size: str, form: str) -> Path:
    """tests/data/sizes/<size> (make_sizes.py: five programs, text and .hlo.pb of one
    compile each) cut to one form."""
    out = tmp / f"{size}-{form}"
    for f in (SIZES / size).rglob("*"):
        if f.is_file():
            keep = {"text": f.name.endswith(".txt"), "proto": f.name.endswith(".hlo.pb")}
            if keep.get(form, True):
                dest = out / f.relative_to(SIZES / size)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(f, dest)
    return out


@pytest.mark.parametrize("form", FORMS)
def test_a_diff_of_two_sizes_trips_the_gate_in_every_form(tmp_path: Path, form: str) -> None:
    """The same programs at twice the dimensions: every module's peak grows, the gate
    fails in every form; XLA's peak equals memory_analysis() in every form."""
    import json

    manifest = json.loads((SIZES / "manifest.json").read_text())["modules"]
    base, head = _sized(tmp_path, "s1", form), _sized(tmp_path, "s2", form)
    r = bufferhouse.diff(base, head, fail_above="5%", jobs=1)
    assert r.gate is not None and not r.gate.passed, r.gate.details()
    rows = r.modules.to_pylist()
    assert len(rows) == 5 and all(row["status"] == "grown" for row in rows)
    assert all(row["head_bytes"] > 1.05 * row["base_bytes"] for row in rows)
    db = tmp_path / "s1.duckdb"
    bufferhouse.ingest([base], db=db, jobs=1)
    got = {
        row["module_name"]: row["xla_peak_bytes"]
        for row in bufferhouse.sql(
            "SELECT module_name, xla_peak_bytes FROM modules", db=db
        ).to_pylist()
    }
    want = {
        f"jit_{key.split('/')[1]}": m["peak_memory_in_bytes"]
        for key, m in manifest.items()
        if key.startswith("s1/")
    }
    assert got == want


def test_a_diff_of_text_against_proto_of_the_same_compiles_shows_no_change(tmp_path: Path) -> None:
    r = bufferhouse.diff(
        _sized(tmp_path, "s2", "text"),
        _sized(tmp_path, "s2", "proto"),
        fail_above="0%",
        jobs=1,
        causes=True,
    )
    assert r.gate is not None and r.gate.passed, r.gate.details()
    assert r.causes.num_rows == 0, r.causes.to_pylist()[:3]
    assert {row["delta_bytes"] for row in r.modules.to_pylist()} == {0}
    # every figure both forms carry is equal; the logical peak is the text's alone
    deltas = {(row["metric"], row["delta_bytes"]) for row in r.changes.to_pylist()}
    assert {d for m, d in deltas if m != "logical_peak_bytes"} == {0}


@pytest.mark.parametrize("size", ["s1", "s2"])
def test_peak_buffers_of_text_and_proto_of_each_size_agree(tmp_path: Path, size: str) -> None:
    got = {}
    for form in ("text", "proto"):
        db = tmp_path / f"{size}-{form}.duckdb"
        bufferhouse.ingest([_sized(tmp_path, size, form)], db=db, jobs=1)
        names = [
            r["module_name"]
            for r in bufferhouse.sql("SELECT module_name FROM modules", db=db).to_pylist()
        ]
        got[form] = {n: _peak_rows(db, n) for n in names}
        for n in names:
            assert sum(r[3] for r in got[form][n]) == _heap_peak(db, n), (form, n)
    assert len(got["text"]) == 5 and got["text"] == got["proto"]


_FORMS_SCRIPT = r"""
import json, sys
import duckdb
import bufferhouse

trees = json.loads(sys.argv[1])
out = {"duckdb": duckdb.__version__, "forms": {}}
for form, (tree, db) in trees.items():
    bufferhouse.ingest([tree], db=db, jobs=1)
    figures = bufferhouse.sql(
        "SELECT module_name, heap_peak_bytes, xla_peak_bytes, total_bytes FROM modules"
        " ORDER BY module_name", db
    ).to_pylist()
    top = bufferhouse.query("top-modules", db=db).to_pylist()
    out["forms"][form] = {
        "figures": figures,
        "top": [[r["module_name"], r["peak_bytes"]] for r in top],
        "recompiles": bufferhouse.query("recompiles", db=db).num_rows,
    }
print(json.dumps(out))
"""


def test_every_form_agrees_on_the_oldest_and_newest_duckdb(tmp_path: Path) -> None:
    from tests.conftest import pip_target, run_with

    oldest = pip_target("duckdb>=1.4,<1.5", "duckdb-1.4")
    runs = {}
    for name, first in (("newest", None), ("oldest", oldest)):
        trees = {
            f: [str(_tree(tmp_path / name, f)), str(tmp_path / name / f"{f}.duckdb")] for f in FORMS
        }
        runs[name] = run_with([_FORMS_SCRIPT, json.dumps(trees)], tmp_path, first)
    assert runs["oldest"]["duckdb"].startswith("1.4.")
    for run in runs.values():
        forms = run["forms"]
        assert forms["proto"] == forms["text"] == forms["mixed"]
        assert len(forms["text"]["top"]) == len(PROGRAMS)
    assert runs["oldest"]["forms"] == runs["newest"]["forms"]


def test_modules_without_a_peak_are_not_ranked_and_the_report_still_runs(tmp_path: Path) -> None:
    """A split dump without its -live-range.txt has no peak from any source: it is
    listed after the ranked modules with no rank, and the report (which failed with
    "connection has an unfinished result" on duckdb 2) draws the rest."""
    pytest.importorskip("matplotlib")  # the report draws: the plot extra
    from bufferhouse import visual

    tree = _sized(tmp_path, "s1", "text")
    for f in (tree / "scan").glob("*-live-range.txt"):
        f.unlink()
    db = tmp_path / "w.duckdb"
    assert bufferhouse.ingest([tree], db=db, jobs=1).ok
    top = bufferhouse.query("top-modules", db=db).to_pylist()
    assert [r["rank"] for r in top] == [1, 2, 3, 4, None]
    assert top[-1]["module_name"] == "jit_scan" and top[-1]["peak_bytes"] is None
    known = [r["peak_bytes"] for r in top[:4]]
    assert known == sorted(known, reverse=True)
    visual.write_report(tmp_path / "r.html", db=db)
    assert "jit_scan" in (tmp_path / "r.html").read_text(encoding="utf-8")


def test_the_readmes_sql_on_modules_counts_each_compile_once(tmp_path: Path) -> None:
    """Plain SQL as the README writes it, on a warehouse holding each compile twice (text
    and .hlo.pb): one row, or one count, per compile, as the canned queries give."""
    import re

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    examples = re.findall(r"bufferhouse sql '([^']*\bFROM modules\b[^']*)'", readme)
    assert len(examples) >= 2, examples
    db = tmp_path / "both.duckdb"
    bufferhouse.ingest([_tree(tmp_path, "text"), _tree(tmp_path, "proto")], db=db, jobs=1)
    for sql in examples:
        rows = bufferhouse.sql(sql, db=db).to_pylist()
        if "module_name" in rows[0]:
            names = [r["module_name"] for r in rows]
            assert sorted(names) == sorted(f"jit_{p}" for p in PROGRAMS), sql
        else:  # a count per group
            counts = [v for r in rows for k, v in r.items() if isinstance(v, int)]
            assert sum(counts) == len(PROGRAMS), (sql, rows)
