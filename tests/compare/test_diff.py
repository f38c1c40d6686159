"""`bufferhouse diff`: module pairs and their deltas checked against the
memory_analysis() figures of the corpus manifest, self-diffs, the structural
match, the drill-down, golden markdown and the gate's exit codes."""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
import sqlglot
from click.testing import CliRunner

import bufferhouse
from bufferhouse.cli import main
from bufferhouse.compare import (
    METRICS,
    Features,
    ModuleRef,
    diff_queries,
    match_modules,
    parse_threshold,
)
from bufferhouse.compare.gate import Gate
from bufferhouse.compare.match import pairs_table as _pairs_table
from bufferhouse.compare.statements import run as _run
from bufferhouse.errors import DiffError
from tests.conftest import CORPUS, GOLDEN, hash_keyed, module_hashes

#: The fixture pair: programs on each side (two on one side only).
PAIR_BASE = ["transformer_block_forward", "convnet_forward", "sort_topk", "fft_ops"]
PAIR_HEAD = ["transformer_block_forward", "convnet_forward", "sort_topk", "cond_switch"]
#: memory_analysis() field of each category compared with the manifest.
ORACLE = {
    "parameter_bytes": "argument_size_in_bytes",
    "output_bytes": "output_size_in_bytes",
    "alias_bytes": "alias_size_in_bytes",
    "temp_bytes": "temp_size_in_bytes",
}
_NAME = re.compile(r"^module_\d+\.(.+?)\.(?:cpu|gpu|tpu)_after_optimizations-buffer-assignment")


def run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _tree(root: Path, version: str, programs: list[str]) -> Path:
    for program in programs:
        shutil.copytree(CORPUS / version / program, root / program)
    return root


@pytest.fixture(scope="session")
def versions_db(tmp_path_factory) -> Path:
    """The corpus compiled by jax 0.6.2 and 0.7.2, labelled jax=VERSION."""
    db = tmp_path_factory.mktemp("versions") / "versions.duckdb"
    for version in ("0.6.2", "0.7.2"):
        report = bufferhouse.ingest(CORPUS / f"jax-{version}", db=db, labels={"jax": version})
        assert report.ok and report.loaded
    return db


@pytest.fixture(scope="session")
def pair(tmp_path_factory) -> dict[str, Path]:
    """A small base/head pair: labelled in one warehouse, one warehouse each, two trees."""
    root = tmp_path_factory.mktemp("pair")
    base = _tree(root / "base", "jax-0.6.2", PAIR_BASE)
    head = _tree(root / "head", "jax-0.7.2", PAIR_HEAD)
    out = {"base": base, "head": head, "db": root / "pair.duckdb"}
    for side, tree, label in (("base", base, "0.6.2"), ("head", head, "0.7.2")):
        assert bufferhouse.ingest(tree, db=out["db"], labels={"jax": label}, jobs=1).ok
        out[f"{side}_db"] = root / f"{side}.duckdb"
        assert bufferhouse.ingest(tree, db=out[f"{side}_db"], jobs=1).ok
    return out


def _manifest_figures(manifest: dict, version: str) -> dict[str, dict[str, int]]:
    """Per module name: the manifest's memory_analysis() categories and printed total."""
    out = {}
    for key, entry in manifest.items():
        if not key.startswith(f"jax-{version}/"):
            continue
        name = _NAME.match(key.rsplit("/", 1)[1]).group(1)
        assert name not in out, f"{name} twice in jax-{version}"
        ma = entry["memory_analysis"]
        figures = {metric: ma[field] for metric, field in ORACLE.items()}
        figures["total_bytes"] = entry["text_counts"]["total_bytes_used"]
        out[name] = figures
    return out


def _check_against_manifest(result, manifest: dict, base: str, head: str) -> None:
    want_base = _manifest_figures(manifest, base)
    want_head = _manifest_figures(manifest, head)
    assert set(want_base) == set(want_head)
    rows = result.changes.to_pylist()
    assert {r["module_name"] for r in rows} == set(want_base)
    assert all(r["match"] == "name" and r["status"] not in ("added", "removed") for r in rows)
    checked = 0
    for r in rows:
        if r["metric"] not in want_base[r["module_name"]]:
            continue
        b = want_base[r["module_name"]][r["metric"]]
        h = want_head[r["module_name"]][r["metric"]]
        assert (r["base_bytes"], r["head_bytes"], r["delta_bytes"]) == (b, h, h - b), r
        if b:
            assert r["change_pct"] == pytest.approx(100.0 * (h - b) / b)
        checked += 1
    assert checked == 5 * len(want_base)
    # at least some figures really changed between the versions (not a vacuous test)
    assert any(r["delta_bytes"] for r in rows if r["metric"] in ORACLE)


@pytest.mark.slow
def test_label_diff_matches_memory_analysis(versions_db, manifest):
    result = bufferhouse.diff("jax=0.6.2", "jax=0.7.2", db=versions_db)
    assert (result.base.kind, result.base.modules, result.head.modules) == ("label", 63, 63)
    _check_against_manifest(result, manifest, "0.6.2", "0.7.2")
    assert result.changes.num_rows == 63 * len(METRICS)
    deltas = [abs(d) for d in result.changes.column("delta_bytes").to_pylist()]
    assert deltas == sorted(deltas, reverse=True)
    assert result.buffers is None and result.gate is None


@pytest.mark.slow
def test_dump_tree_diff_matches_memory_analysis(manifest, tmp_path, monkeypatch):
    """Split-format dumps (0.10.2) too; the temporary warehouses are removed."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    result = bufferhouse.diff(CORPUS / "jax-0.7.2", CORPUS / "jax-0.10.2", jobs=2)
    assert (result.base.kind, result.head.kind) == ("dumps", "dumps")
    _check_against_manifest(result, manifest, "0.7.2", "0.10.2")
    # pymp-*: the forkserver's socket directory, multiprocessing's for the process's life
    # (made here when this test is the first to start parser processes).
    assert [p for p in tmp_path.iterdir() if not p.name.startswith("pymp-")] == []


@pytest.mark.slow
def test_gate_against_manifest_totals(versions_db, manifest):
    """--peak total --fail-above: exactly the modules whose printed total grew past it."""
    base = _manifest_figures(manifest, "0.6.2")
    head = _manifest_figures(manifest, "0.7.2")
    for spec, over in (
        ("0%", lambda b, h: h > b),
        ("0.1%", lambda b, h: (h - b) * 1000 > b),
        ("20B", lambda b, h: h - b > 20),
    ):
        result = bufferhouse.diff(
            "jax=0.6.2", "jax=0.7.2", db=versions_db, peak="total", fail_above=spec
        )
        want = {n for n in base if over(base[n]["total_bytes"], head[n]["total_bytes"])}
        assert set(result.gate.failures.column("module_name").to_pylist()) == want, spec
        assert result.failed == bool(want)
    assert want  # the last threshold catches something


@pytest.mark.slow
def test_self_diff_is_zero_everywhere(versions_db):
    result = bufferhouse.diff(
        "jax=0.7.2", "jax=0.7.2", db=versions_db, module="jit_transformer_block", fail_above=0
    )
    assert result.changes.num_rows == len(METRICS)
    assert set(result.changes.column("delta_bytes").to_pylist()) == {0}
    assert set(result.changes.column("status").to_pylist()) == {"same"}
    assert set(result.changes.column("change_pct").to_pylist()) == {0.0}
    assert result.buffers.num_rows > 10
    assert set(result.buffers.column("status").to_pylist()) == {"same"}
    for row in result.buffers.to_pylist():
        assert row["base_value_id"] == row["head_value_id"], row
        assert row["matched_by"] == ("instruction" if row["op_name"] is None else "op_name+shape")
    assert set(result.sources.column("delta_bytes").to_pylist()) == {0}
    assert not result.failed
    whole = bufferhouse.diff("jax=0.7.2", "jax=0.7.2", db=versions_db)
    assert whole.summary()["same"] == 63
    assert set(whole.changes.column("delta_bytes").to_pylist()) == {0}
    assert whole.changes.column("base_module_id") == whole.changes.column("head_module_id")


def test_sides_of_every_kind_agree(pair):
    by_label = bufferhouse.diff("jax=0.6.2", "jax=0.7.2", db=pair["db"])
    by_file = bufferhouse.diff(pair["base_db"], pair["head_db"])
    by_tree = bufferhouse.diff(pair["base"], pair["head"], jobs=1)
    # module ids are each warehouse's own: the same modules have the same content hashes
    in_one = module_hashes(pair["db"])
    in_two = module_hashes(pair["base_db"]) | module_hashes(pair["head_db"])
    assert hash_keyed(by_file.changes, in_two).equals(hash_keyed(by_label.changes, in_one))
    ids = ["base_module_id", "head_module_id"]  # by_tree's warehouse is gone
    assert by_tree.changes.drop_columns(ids).equals(by_label.changes.drop_columns(ids))
    assert [by_file.base.kind, by_tree.base.kind] == ["warehouse", "dumps"]
    status = dict(
        zip(
            by_label.modules.column("module_name").to_pylist(),
            by_label.modules.column("status").to_pylist(),
        )
    )
    assert status["jit_fft_ops"] == "removed" and status["jit_cond_switch"] == "added"


def test_drill_down_accounts_for_every_peak_buffer(pair):
    result = bufferhouse.diff("jax=0.6.2", "jax=0.7.2", db=pair["db"], module="jit_convnet_forward")
    assert result.modules.num_rows == 1
    for side in ("base", "head"):
        module_id = result.modules.column(f"{side}_module_id")[0].as_py()
        peak = bufferhouse.query("peak-buffers", db=pair["db"], module=str(module_id), top=10**6)
        values = [v for v in result.buffers.column(f"{side}_value_id").to_pylist() if v is not None]
        assert sorted(values) == sorted(peak.column("value_id").to_pylist())
        sizes = [s for s in result.buffers.column(f"{side}_size").to_pylist() if s is not None]
        assert sum(sizes) == sum(peak.column("size").to_pylist())
        assert sum(result.sources.column(f"{side}_bytes").to_pylist()) == sum(sizes)
    assert sum(result.buffers.column("delta_bytes").to_pylist()) == sum(
        result.sources.column("delta_bytes").to_pylist()
    )
    rows = result.buffers.to_pylist()
    assert {"new", "gone", "same"} <= {r["status"] for r in rows}
    # JAX 0.6's `jit(main)/` scope does not stop a buffer from matching
    assert any(r["matched_by"] == "op_name+shape" and r["base_category"] == "temp" for r in rows)


def _copy_module(src: Path, dst: Path, number: int, name: str) -> None:
    """Copy one module's dump files under another module number and jit name."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        renamed = re.sub(r"^module_\d+\.[^.]+\.", f"module_{number:04d}.{name}.", f.name)
        shutil.copy(f, dst / renamed)


def test_one_name_several_modules_match_by_structure(tmp_path):
    """Two compiles of `jit_f` per side, in swapped order, plus a third on the head side:
    each pairs with the program it compiles (same parameter shapes), not by module order."""
    base, head = tmp_path / "base", tmp_path / "head"
    _copy_module(CORPUS / "jax-0.6.2/mlp_forward", base, 3, "jit_f")
    _copy_module(CORPUS / "jax-0.6.2/convnet_forward", base, 5, "jit_f")
    _copy_module(CORPUS / "jax-0.7.2/convnet_forward", head, 3, "jit_f")
    _copy_module(CORPUS / "jax-0.7.2/mlp_forward", head, 7, "jit_f")
    _copy_module(CORPUS / "jax-0.7.2/scan_rnn", head, 9, "jit_f")
    _copy_module(CORPUS / "jax-0.7.2/sort_topk", head, 11, "jit_g")
    result = bufferhouse.diff(base, head, jobs=1)
    rows = {(r["base_number"], r["head_number"]): r for r in result.modules.to_pylist()}
    assert set(rows) == {(3, 7), (5, 3), (None, 9), (None, 11)}
    assert rows[(3, 7)]["match"] == rows[(5, 3)]["match"] == "signature"
    assert rows[(None, 9)]["status"] == rows[(None, 11)]["status"] == "added"
    # the sum of parameters is the same for both pairs: the right pair changed nothing there
    params = [r for r in result.changes.to_pylist() if r["metric"] == "parameter_bytes"]
    assert {r["delta_bytes"] for r in params if r["status"] != "added"} == {0}


def test_match_modules_rules():
    def mods(*numbers):
        return [ModuleRef(100 + n, "jit_f", n) for n in numbers]

    ops = {"a": Features("s1", {"fusion": 3, "dot": 1}), "b": Features("s1", {"copy": 5})}
    base, head = mods(1, 2), mods(5, 6, 7)
    # same signature everywhere: the instruction multiset decides, then module order
    got = match_modules(
        base,
        head,
        {101: ops["b"], 102: ops["a"]},
        {105: ops["a"], 106: ops["b"], 107: ops["b"]},
    )
    assert got == [
        ("jit_f", "signature", 101, 106),
        ("jit_f", "signature", 102, 105),
        ("jit_f", None, None, 107),
    ]
    # a different signature loses to an equal one whatever the instructions
    got = match_modules(
        mods(1), mods(2, 3), {101: ops["a"]}, {102: Features("s2", ops["a"].opcodes), 103: ops["b"]}
    )
    assert got[0] == ("jit_f", "signature", 101, 103)
    # nothing to tell them apart: module-number order
    assert [p[2:] for p in match_modules(mods(1, 2), mods(3, 4))] == [(101, 103), (102, 104)]
    # one module per side: paired by name alone, whatever they hold
    assert match_modules(mods(1), mods(9)) == [("jit_f", "name", 101, 109)]


@pytest.mark.parametrize(
    ("spec", "kind", "value"),
    [
        ("5%", "pct", 5.0),
        ("0.5%", "pct", 0.5),
        ("1048576", "bytes", 1048576.0),
        ("10MiB", "bytes", 10 * 2**20),
        ("1.5GB", "bytes", 1.5e9),
        ("0", "bytes", 0.0),
    ],
)
def test_parse_threshold(spec, kind, value):
    t = parse_threshold(spec)
    assert (t.kind, t.value) == (kind, value)


@pytest.mark.parametrize(
    ("spec", "text"),
    [
        ("5", "5 bytes"),
        (5, "5 bytes"),
        ("1", "1 byte"),
        ("1048576", "1,048,576 bytes"),
        ("10MiB", "10 MiB (10,485,760 bytes)"),
        ("5%", "5%"),
    ],
)
def test_a_threshold_says_its_unit(spec, text):
    t = parse_threshold(spec)
    assert str(t) == text
    gate = Gate("heap", t, pa.table({"module_name": pa.array([], pa.string())}), pa.table({}))
    assert f"more than {text} in heap peak" in gate.details()


def test_threshold_edges():
    five = parse_threshold("5%")
    assert not five.exceeded(100, 105) and five.exceeded(100, 106)
    assert five.exceeded(0, 1) and not five.exceeded(0, 0) and not five.exceeded(None, 9)
    assert not parse_threshold(10).exceeded(100, 110) and parse_threshold(10).exceeded(100, 111)
    for bad in ("5 parsecs", "-5%", "%", "", "1e3"):
        with pytest.raises(DiffError, match="threshold"):
            parse_threshold(bad)


def test_side_errors(pair, tmp_path):
    with pytest.raises(DiffError, match="neither an existing file"):
        bufferhouse.diff("nope", "jax=0.7.2", db=pair["db"])
    with pytest.raises(DiffError, match=r"no module .* carries that label; labels: jax=0.6.2"):
        bufferhouse.diff("jax=0.6.2", "jax=9", db=pair["db"])
    with pytest.raises(DiffError, match="no dump files found"):
        (tmp_path / "empty").mkdir()
        bufferhouse.diff(tmp_path / "empty", "jax=0.7.2", db=pair["db"])
    with pytest.raises(DiffError, match="no module 'jit_nope' on either side"):
        bufferhouse.diff("jax=0.6.2", "jax=0.7.2", db=pair["db"], module="jit_nope")
    with pytest.raises(DiffError, match="no warehouse"):
        bufferhouse.diff("jax=0.6.2", "jax=0.7.2", db=tmp_path / "missing.duckdb")


def test_several_labels_must_all_hold(pair, tmp_path):
    db = tmp_path / "w.duckdb"
    shutil.copy(pair["db"], db)
    bufferhouse.ingest(pair["head"] / "sort_topk", db=db, labels={"model": "sort"}, jobs=1)
    result = bufferhouse.diff("jax=0.7.2,model=sort", "jax=0.7.2", db=db)
    assert result.base.modules == 1
    assert result.summary()["added"] == 3


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("diff-labels", ["--fail-above", "5%"]),
        ("diff-module", ["--module", "jit_transformer_block"]),
    ],
)
def test_golden_markdown(pair, update_golden, name, args):
    result = run(
        "diff", "--base", "jax=0.6.2", "--head", "jax=0.7.2", "--db", pair["db"],
        "--format", "markdown", *args,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    path = GOLDEN / f"{name}.md"
    if update_golden:
        path.write_text(result.stdout)
    assert path.exists(), f"no golden file {path}; run pytest --update-golden and read the diff"
    assert result.stdout == path.read_text(), f"{name} changed; see git diff after --update-golden"


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--fail-above", "5%"], 0),  # 0.6.2 -> 0.7.2 only shrinks
        (["--fail-above", "5%", "--reverse"], 1),  # convnet_forward grows 49%
        (["--fail-above", "50%", "--reverse"], 0),
        (["--fail-above", "100KiB", "--reverse"], 1),
        (["--fail-above", "1MiB", "--reverse"], 0),
        (["--fail-above", "0", "--reverse", "--peak", "logical"], 1),
        (["--fail-above", "5 parsecs"], 2),
        (["--peak", "biggest"], 2),
        (["--show", "buffers"], 2),
        (["--module", "jit_nope"], 2),
    ],
)
def test_gate_exit_codes(pair, args, code):
    sides = ["--base", "jax=0.6.2", "--head", "jax=0.7.2"]
    if "--reverse" in args:
        args = [a for a in args if a != "--reverse"]
        sides = ["--base", "jax=0.7.2", "--head", "jax=0.6.2"]
    result = run("diff", *sides, "--db", pair["db"], "--format", "csv", *args)
    assert result.exit_code == code, result.output
    if code == 1:
        assert "gate failed:" in result.stderr and "jit_convnet_forward" in result.stderr
    if code == 0 and "--fail-above" in args:
        assert "gate passed" in result.stderr


def test_cli_tables(pair):
    sides = ["--base", "jax=0.6.2", "--head", "jax=0.7.2", "--db", pair["db"]]
    changes = run("diff", *sides, "--format", "csv")
    assert changes.exit_code == 0
    assert changes.stdout.splitlines()[0].startswith("pair,module_name,status,match,metric,")
    assert len(changes.stdout.splitlines()) == 1 + 5 * len(METRICS)
    sources = run(
        "diff", *sides, "--module", "jit_convnet_forward", "--show", "sources", "-f", "json"
    )
    assert sources.exit_code == 0 and '"source": "programs.py:227"' in sources.stdout
    table = run("diff", *sides, "--format", "table", "--top", "1")
    assert "Modules by heap peak" in table.stdout and "more rows not shown" in table.stdout
    assert "base: jax=0.6.2 (label, 4 modules)" in table.stderr


def test_no_module_is_named_like_a_public_function():
    """`bufferhouse.diff` and `bufferhouse.ingest` are the API's functions, and no
    module of those names exists to shadow them (or be shadowed)."""
    import importlib.util

    import bufferhouse.api

    for name in bufferhouse.__all__:
        if name.startswith("__"):
            continue
        assert getattr(bufferhouse, name) is getattr(bufferhouse.api, name)
        assert importlib.util.find_spec(f"bufferhouse.{name}") is None, name


@pytest.mark.parametrize("query", diff_queries(), ids=lambda q: q.name)
def test_diff_queries_documented_and_valid(query):
    assert query.description.endswith(".")
    assert query.columns and all(doc.strip() for _, doc in query.columns)
    sqlglot.parse_one(query.sql, read="duckdb")
    for n, line in enumerate(query.sql.splitlines(), 1):
        assert len(line) < 80, f"{query.source}:{n} is {len(line)} characters"


def _buffers(rows: list[tuple]) -> pa.Table:
    names = ["pair", "value_id", "instruction", "shape_index", "category", "size", "shape"]
    names += ["opcode", "op_name", "source"]
    return pa.table({n: [r[i] for r in rows] for i, n in enumerate(names)})


def test_buffer_matching_passes():
    """Hand-made peaks: each pass of diff/buffers.sql, and every status."""
    base = _buffers(
        [
            (0, 1, "fusion.1", "{}", "temp", 400, "f32[10,10]{1,0}", "fusion", "jit(f)/jit(main)/dot", "a.py:1"),
            (0, 2, "fusion.2", "{}", "temp", 400, "f32[10,10]{1,0}", "fusion", "jit(f)/exp", "a.py:2"),
            (0, 3, "copy.3", "{}", "temp", 64, "f32[16]{0}", "copy", None, None),
            (0, 4, "add.4", "{}", "output", 8, "f32[2]{0}", "add", "jit(f)/add", "a.py:3"),
            (0, 5, "constant.5", "{}", "constant", 4, "f32[]", "constant", None, None),
            (0, 6, "gone.6", "{}", "temp", 100, "u8[100]{0}", "fusion", "jit(f)/gone", "a.py:4"),
        ]
    )  # fmt: skip
    head = _buffers(
        [
            (0, 11, "fusion.9", "{}", "temp", 400, "f32[10,10]{0,1}", "fusion", "jit(f)/dot", "a.py:1"),
            (0, 12, "fusion.2", "{}", "temp", 800, "f32[20,10]{1,0}", "fusion", "jit(f)/exp", "a.py:2"),
            (0, 13, "copy.3", "{}", "temp", 32, "f32[8]{0}", "copy", None, None),
            (0, 14, "add.4", "{}", "output", 8, "f32[2]{0}", "add", "jit(f)/sub", "a.py:3"),
            (0, 15, "constant.9", "{}", "constant", 4, "f32[]", "constant", None, None),
            (0, 16, "new.6", "{}", "temp", 50, "u8[50]{0}", "fusion", "jit(f)/new", "a.py:5"),
        ]
    )  # fmt: skip
    con = duckdb.connect()
    con.register("pairs", _pairs_table([("jit_f", "name", 1, 2)]))
    con.register("base_buffers", base)
    con.register("head_buffers", head)
    got = {
        (r["base_value_id"], r["head_value_id"]): (r["status"], r["matched_by"], r["delta_bytes"])
        for r in _run(con, "buffers").to_pylist()
    }
    assert got == {
        (1, 11): ("same", "op_name+shape", 0),  # jit(main)/ and the layout ignored
        (2, 12): ("grown", "instruction", 400),  # same instruction, op_name, new shape
        (3, 13): ("shrunk", "instruction", -32),  # no op_name, same instruction
        (4, None): ("gone", None, -8),  # same instruction but another op_name
        (None, 14): ("new", None, 8),
        (5, 15): ("same", "opcode+shape", 0),  # no op_name, renamed constant
        (6, None): ("gone", None, -100),
        (None, 16): ("new", None, 50),
    }
    sources = {r["source"]: r["delta_bytes"] for r in _run(con, "sources").to_pylist()}
    assert sources == {
        "a.py:1": 0,
        "a.py:2": 400,
        "(unknown)": -32,
        "a.py:3": 0,
        "a.py:4": -100,
        "a.py:5": 50,
    }
