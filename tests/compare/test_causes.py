"""`bufferhouse diff --show causes`: each pair of real jax compiles in
tests/data/causes (made by make_pairs.py there) names the cause it was built
with first, the multi pair splits as its script computed from shapes, and on
every pair and the jax-release corpus the rows sum to the modules' changes."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from click.testing import CliRunner

import bufferhouse
from bufferhouse.cli import main
from bufferhouse.compare import statements
from bufferhouse.compare.causes import CAUSES, measures
from bufferhouse.errors import DiffError
from tests.conftest import CORPUS, DATA

PAIRS = DATA / "causes"
MANIFEST = json.loads((PAIRS / "manifest.json").read_text())["pairs"]
#: the figures explained with the default peak
MEASURES = ("total_bytes", "heap_peak_bytes")


@pytest.fixture(scope="module")
def pairs_db(tmp_path_factory) -> Path:
    """Every side of every pair, labelled pair=NAME,side=base|head."""
    db = tmp_path_factory.mktemp("causes") / "pairs.duckdb"
    for pair in MANIFEST:
        for side in ("base", "head"):
            labels = {"pair": pair, "side": side}
            assert bufferhouse.ingest(PAIRS / pair / side, db=db, labels=labels, jobs=1).ok
    return db


def _diff(db: Path, pair: str, **kw) -> bufferhouse.compare.DiffResult:
    return bufferhouse.diff(f"pair={pair},side=base", f"pair={pair},side=head", db, **kw)


def _per_cause(r, pair: int, measure: str) -> dict[str, int]:
    sums: dict[str, int] = defaultdict(int)
    for x in r.causes.to_pylist():
        if x["pair"] == pair and x["measure"] == measure:
            sums[x["cause"]] += x["bytes"]
    return dict(sums)


def _assert_sums(r, wanted: tuple[str, ...]) -> int:
    """Every matched pair's rows sum to its change in each measure; returns how many checked."""
    sums: dict[tuple[int, str], int] = defaultdict(int)
    unknown = set()
    for x in r.causes.to_pylist():
        assert x["cause"] in CAUSES
        if x["bytes"] is None:
            unknown.add((x["pair"], x["measure"]))
        else:
            sums[(x["pair"], x["measure"])] += x["bytes"]
    checked = 0
    for x in r.changes.to_pylist():
        if x["metric"] not in wanted or x["status"] in ("added", "removed"):
            continue
        key = (x["pair"], x["metric"])
        if x["delta_bytes"] is None:
            assert key in unknown and key not in sums, x
        else:
            assert sums.get(key, 0) == x["delta_bytes"], (x["module_name"], x["metric"])
        checked += 1
    return checked


@pytest.mark.parametrize("pair", sorted(MANIFEST))
def test_pair_names_its_cause_first_and_sums(pairs_db, pair):
    r = _diff(pairs_db, pair, causes=True)
    assert r.modules.num_rows == 1 and r.modules.column("match")[0].as_py() == "name"
    assert _assert_sums(r, MEASURES) == 2
    expect = MANIFEST[pair]["expect"]
    for measure in MEASURES:
        per_cause = _per_cause(r, 0, measure)
        if expect is None:
            assert per_cause == {} and r.causes.num_rows == 0
            continue
        first = max(per_cause, key=lambda c: abs(per_cause[c]))
        assert first == expect, (measure, per_cause)


def test_batch_is_shape_alone(pairs_db):
    """Batch 64 -> 256: the same values in the same allocations, bigger. Each allocation
    is one unit, so no value "owns" it and nothing is said to share or stop sharing."""
    r = _diff(pairs_db, "batch", causes=True)
    rows = r.causes.to_pylist()
    assert rows and {x["cause"] for x in rows} == {"shape"}
    for measure in MEASURES:
        assert all(x["bytes"] > 0 for x in rows if x["measure"] == measure)
    allocations = [x for x in rows if x["matched_by"] == "allocation"]
    assert allocations and all(x["base_shape"] != x["head_shape"] for x in allocations)


def test_donation_names_the_value(pairs_db):
    """The donated update's output: matched across the compiles, aliased on the base only."""
    r = _diff(pairs_db, "donation", causes=True)
    (row,) = [x for x in r.causes.to_pylist() if x["measure"] == "total_bytes"]
    w = MANIFEST["donation"]
    lost = w["base"]["memory_analysis"]["alias_size_in_bytes"]
    assert lost == w["head"]["memory_analysis"]["alias_size_in_bytes"] + row["bytes"]
    assert row["op_name"].endswith("/sub") and row["source"].endswith("make_pairs.py:64")
    assert (row["base_shape"], row["head_shape"]) == ("f32[512,512]", "f32[512,512]")
    assert row["matched_by"] == "op_name+shape"
    assert "no longer shares its allocation" in row["sentence"]


def test_multi_splits_as_computed_from_shapes(pairs_db):
    r = _diff(pairs_db, "multi", causes=True)
    split = MANIFEST["multi"]["split"]["total_bytes"]
    for measure in MEASURES:
        per_cause = _per_cause(r, 0, measure)
        assert {c: per_cause.get(c) for c in split} == split, measure


def test_scan_unroll_extra_copies(pairs_db):
    """Unrolled 8 times, the body's tanh has more copies live: one f32[64,256] each."""
    r = _diff(pairs_db, "scan_unroll", causes=True)
    rows = [x for x in r.causes.to_pylist() if x["measure"] == "heap_peak_bytes"]
    top = max(rows, key=lambda x: abs(x["bytes"]))
    assert top["cause"] == "longer-live" and 6 <= top["buffers"] <= 7
    assert top["op_name"].endswith("/tanh") and top["head_shape"] == "f32[64,256]"
    assert top["bytes"] == top["buffers"] * 64 * 256 * 4 and top["base_shape"] is None


def test_peak_choices(pairs_db):
    assert measures("total") == ["total_bytes"]
    assert measures("logical") == ["total_bytes", "logical_peak_bytes"]
    r = _diff(pairs_db, "batch", causes=True, peak="logical")
    assert _assert_sums(r, ("total_bytes", "logical_peak_bytes")) == 2
    assert set(r.causes.column("measure").to_pylist()) == {"total_bytes", "logical_peak_bytes"}
    assert _diff(pairs_db, "batch").causes is None
    with pytest.raises(DiffError, match="causes=True"):
        _diff(pairs_db, "batch").table("causes")


def test_no_peak_is_said_not_invented(pairs_db, tmp_path):
    """A side without live ranges or trace has no heap peak: one no-peak row, no bytes."""
    for name in ("buffer-assignment.txt", "buffer-assignment-values.txt"):
        (src,) = (PAIRS / "batch" / "head").glob(f"*-{name}")
        shutil.copy(src, tmp_path / src.name)
    r = bufferhouse.diff("pair=batch,side=base", tmp_path, pairs_db, causes=True, jobs=1)
    heap = [x for x in r.causes.to_pylist() if x["measure"] == "heap_peak_bytes"]
    assert [(x["cause"], x["bytes"]) for x in heap] == [("no-peak", None)]
    assert heap[0]["head_bytes"] is None and heap[0]["base_bytes"] is not None
    assert "no heap_peak_bytes on the head side" in heap[0]["sentence"]
    assert _assert_sums(r, MEASURES) == 2


@pytest.fixture(scope="module")
def corpus_db(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("corpus") / "corpus.duckdb"
    for version in ("0.6.2", "0.7.2", "0.10.2"):
        assert bufferhouse.ingest(
            CORPUS / f"jax-{version}", db=db, labels={"jax": version}, jobs=2
        ).ok
    return db


@pytest.mark.parametrize("base,head", [("0.6.2", "0.7.2"), ("0.7.2", "0.10.2")])
@pytest.mark.parametrize("peak", ["heap", "logical"])
def test_corpus_causes_sum_to_changes(corpus_db, base, head, peak):
    r = bufferhouse.diff(f"jax={base}", f"jax={head}", corpus_db, causes=True, peak=peak)
    wanted = tuple(measures(peak))
    matched = sum(1 for x in r.modules.to_pylist() if x["status"] not in ("added", "removed"))
    assert matched > 50 and _assert_sums(r, wanted) == 2 * matched
    named = {x["cause"] for x in r.causes.to_pylist()}
    assert {"new-buffer", "gone-buffer", "aliasing-lost", "aliasing-gained"} <= named


def test_cli_show_causes_and_report(pairs_db):
    args = ["diff", "--base", "pair=multi,side=base", "--head", "pair=multi,side=head"]
    args += ["--db", str(pairs_db)]
    out = CliRunner().invoke(main, [*args, "--show", "causes", "--format", "json"])
    assert out.exit_code == 0, out.output
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert {r["cause"] for r in rows} == {"aliasing-lost", "new-buffer"}
    report = CliRunner().invoke(main, [*args, "--causes", "--format", "markdown"]).stdout
    assert "#### Causes of each matched module's change" in report
    assert "Total, summed over the modules: aliasing-lost +1.0 MiB, new-buffer +256.0 KiB" in report
    plain = CliRunner().invoke(main, [*args, "--format", "markdown"]).stdout
    assert "Causes" not in plain


def _values(rows: list[tuple]) -> pa.Table:
    """diff-values rows: (value_id, op_name, element_type, dims, category, size, member
    [, allocation_index]); a value's allocation is its own unless given."""
    out = []
    for value_id, op, etype, dims, category, size, member, *shared in rows:
        shape = f"{etype}[{','.join(map(str, dims))}]"
        parameter = "0{}" if category == "parameter" and op is None else None
        opcode = "parameter" if parameter else "fusion"
        out.append(
            {
                "module_id": 1, "value_id": value_id, "instruction": f"i{value_id}",
                "shape_index": "{}", "shape": shape, "element_type": etype, "dims": dims,
                "opcode": opcode, "op_name": op, "source": None, "parameter": parameter,
                "allocation_index": shared[0] if shared else value_id, "category": category, "size": size,
                "total_member": member, "copy_of": None,
            }
        )  # fmt: skip
    return pa.Table.from_pylist(out)


#: diff-shardings of a module that is not partitioned
_NO_SHARDINGS = pa.table(
    {
        "module_id": pa.array([], pa.int64()),
        "target": pa.array([], pa.string()),
        "parameter": pa.array([], pa.string()),
        "shape_index": pa.array([], pa.string()),
        "sharding": pa.array([], pa.string()),
        "tiles": pa.array([], pa.list_(pa.int32())),
    }
)


def test_rules_on_hand_made_values():
    """Each rule of diff-causes on one hand-made module pair (total bytes only):
    the residual is the fragmentation row, and the rows sum to the change."""
    base = _values(
        [
            (1, None, "f32", [8], "parameter", 32, True),
            (2, "f/dot", "f32", [16, 16], "temp", 1024, True),  # padded more: layout
            (3, "f/exp", "f32", [4], "temp", 16, True),  # split in two: shape + fusion
            (4, "f/log", "f32", [8], "temp", 32, True),  # gone
            (5, "f/out", "f32", [8], "output", 32, True),  # now in the parameter's allocation
            (6, "f/tmp", "f32", [8], "temp", 32, True),  # no longer live at the peak
        ]
    )
    head = _values(
        [
            (11, None, "f32", [8], "parameter", 32, True),
            (12, "f/dot", "f32", [16, 16], "temp", 2048, True),
            (13, "f/exp", "f32", [2], "temp", 8, True),
            (14, "f/exp", "f32", [1, 2], "temp", 8, True),
            (15, "f/out", "f32", [8], "parameter", 32, False, 11),  # donated
            (16, "f/tmp", "f32", [8], "temp", 32, False),
        ]
    )
    expect = {
        "layout": 1024,
        "shape": -8,
        "fusion": 8,
        "gone-buffer": -32,
        "aliasing-gained": -32,
        "shorter-live": -32,
        "fragmentation": 100,
    }
    base_total, head_total = 5000, 5000 + sum(expect.values())
    con = duckdb.connect()
    con.register("pairs", pa.Table.from_pylist(
        [{"pair": 0, "module_name": "f", "match": "name", "base_module_id": 1, "head_module_id": 1}]
    ))  # fmt: skip
    for side, values, total in (("base", base, base_total), ("head", head, head_total)):
        con.register(f"{side}_values", values)
        con.register(f"{side}_shardings", _NO_SHARDINGS)  # not partitioned
        figures = {"module_id": 1, "total_bytes": total, "alias_bytes": 0}
        figures |= {"heap_peak_bytes": None, "logical_peak_bytes": None}
        con.register(f"{side}_modules", pa.Table.from_pylist([figures]))
        members = values.filter(pc.field("total_member"))
        con.register(f"{side}_members", pa.table({
            "module_id": members.column("module_id"),
            "measure": pa.array(["total_bytes"] * members.num_rows),
            "value_id": members.column("value_id"),
            "size": members.column("size"),
        }))  # fmt: skip
    matched = statements.run(con, "matched")
    con.register("matched", matched)
    by = {r["base_value_id"]: r["matched_by"] for r in matched.to_pylist()}
    assert by[1] == "parameter" and by[2] == "op_name+shape" and by[4] is None
    rows = statements.run(con, "causes", measures=["total_bytes"]).to_pylist()
    assert {r["cause"]: r["bytes"] for r in rows} == expect
    assert sum(r["bytes"] for r in rows) == head_total - base_total
    (fusion,) = [r for r in rows if r["cause"] == "fusion"]
    assert (fusion["op_name"], fusion["base_shape"]) == ("f/exp", None)
