"""The `shardings` table from jax 0.12 protos: the mesh pairs (tests/data/jax012/pairs/
mesh-*, made by tests/data/jax012/make_fixtures.py) shard w (512x512) as P("model", None)
and x (64x512) as P("data", "model") on a 1x4 and a 2x2 mesh (data x model), and the
first result as P("data", None): the rows must say so, and per-device dims times
tiles must give back the logical shapes the script built."""

from __future__ import annotations

import shutil

import duckdb
import pytest

from bufferhouse.load import ingest_paths
from tests.conftest import DATA

PAIRS = DATA / "jax012" / "pairs"
#: (pair, side) -> mesh (data, model) the fixture script compiled with
MESHES = {
    ("mesh-cpu", "base"): (1, 4),
    ("mesh-cpu", "head"): (2, 2),
    ("mesh-v5p", "base"): (1, 4),
    ("mesh-v5p", "head"): (2, 2),
}
LOGICAL = {0: [512, 512], 1: [64, 512]}  # w, x


def _rows(tmp_path, pair: str, side: str, pattern: str) -> duckdb.DuckDBPyConnection:
    src = tmp_path / "in"
    src.mkdir()
    for f in (PAIRS / pair / side).glob(pattern):
        if f.is_dir():
            continue
        shutil.copy(f, src / f.name)
    db = tmp_path / "w.duckdb"
    report = ingest_paths([str(src)], str(db))
    assert not report.failed
    return duckdb.connect(str(db), read_only=True)


@pytest.mark.parametrize(("pair", "side"), sorted(MESHES))
def test_parameter_and_result_shardings(tmp_path, pair, side):
    data, model = MESHES[(pair, side)]
    con = _rows(tmp_path, pair, side, "*after_optimizations.hlo.pb")
    rows = con.execute(
        "SELECT target, number, shape_index, sharding, tiles FROM shardings"
        " ORDER BY target, number, shape_index"
    ).fetchall()
    mesh = f"mesh[data={data}, model={model}]"
    params = {r[1]: r for r in rows if r[0] == "parameter"}
    assert params[0][3] == f"{{{mesh}, [{{model}}, {{}}]}}"
    assert params[0][4] == [model, 1]
    first = "{data}" if data > 1 else "{}"  # jax drops a mesh axis of size 1
    assert params[1][3] == f"{{{mesh}, [{first}, {{model}}]}}"
    assert params[1][4] == [data, model]
    # the entry parameters' per-device dims times the tiles are the logical shapes
    dims = dict(
        con.execute(
            "SELECT a.parameter_number, v.dims FROM allocations AS a"
            " JOIN assignments AS s USING (module_id, allocation_index)"
            " JOIN hlo_values AS v USING (module_id, value_id)"
            " JOIN instructions AS i USING (module_id, instruction)"
            " WHERE a.is_parameter AND i.opcode = 'parameter'"
        ).fetchall()
    )
    for n, row in params.items():
        assert [d * t for d, t in zip(dims[n], row[4])] == LOGICAL[n]
    results = {r[2]: r for r in rows if r[0] == "output"}
    assert results["{1}"][3] == "{replicated}" and results["{1}"][4] is None
    first = (2, 1) if data > 1 else None
    assert (tuple(results["{0}"][4]) if results["{0}"][4] else None) == first


def test_text_and_proto_keep_the_protos_shardings(tmp_path):
    """A directory with the text dumps and the proto of one compile: one module, and
    the shardings (which the text does not print) are the proto's."""
    con = _rows(tmp_path, "mesh-cpu", "head", "*")
    ((forms,),) = con.execute("SELECT count(*) FROM modules").fetchall()
    assert forms == 1
    ((n,),) = con.execute("SELECT count(*) FROM shardings WHERE target = 'parameter'").fetchall()
    assert n == 2


def test_one_device_module_cuts_nothing(tmp_path):
    """A single-device compile: no spmd shardings, only its parameters' own
    (a one-device mesh), which cut no dimension."""
    con = _rows(tmp_path, "batch-cpu", "base", "*after_optimizations.hlo.pb")
    rows = con.execute("SELECT target, sharding, tiles FROM shardings").fetchall()
    assert rows and {r[0] for r in rows} == {"instruction"}
    assert all(set(r[2]) == {1} for r in rows), rows
