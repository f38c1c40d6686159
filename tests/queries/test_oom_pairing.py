"""oom-vs-peak pairs one to one, by source line first, against the module asked for
(issue 41 item 13).

tests/data/oom-pair (make_fixture.py): jax 0.12 compiled decode_step on CPU twice, with
caches of 512 and of 256 positions (two modules named jit_decode_step); decode.log holds
the OOM message rendered from the first. The oracle is the message's source: the dump's
printed peak list, largest first, which the renderer turned into the listed buffers, read
here with a regex of this test's own.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import duckdb
import pytest

import bufferhouse
from bufferhouse.errors import UnknownModuleError
from tests.conftest import DATA

PAIR = DATA / "oom-pair"
MANIFEST = json.loads((PAIR / "manifest.json").read_text())
OOM_STEM = MANIFEST["oom_module"]
OTHER_STEM = next(m["module"] for m in MANIFEST["modules"] if m["module"] != OOM_STEM)


@pytest.fixture(scope="module")
def pair_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("oom-pair") / "w.duckdb"
    report = bufferhouse.ingest([PAIR], db=db, jobs=1)
    assert report.ok and len(report.loaded) == 2 and report.events_loaded == 1
    return db


def _rendered() -> list[str]:
    """The instruction each listed buffer was rendered from, by rank."""
    live = (PAIR / "dump" / f"{OOM_STEM}-live-range.txt").read_text()
    listed = re.search(r"Live ranges at \d+ \(peak\):\n((?:    .*\n)+)", live).group(1)
    peak = [(int(m[1]), m[0]) for m in re.findall(r"    (\S+?)\{\}: (\d+) bytes", listed)]
    peak.sort(key=lambda p: -p[0])  # stable, as the renderer sorted
    return [name for _, name in peak]


def _hash(db: Path, stem: str) -> str:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(
            "SELECT substr(content_hash, 1, 12) FROM modules WHERE file_stem = ?", [stem]
        ).fetchone()[0]


def test_each_value_pairs_with_one_buffer(pair_db):
    """Every listed buffer gets the value it was rendered from; where the message cannot tell
    two apart (cache['k'] and cache['v']: the same `Entry Parameter Subshape`), the group
    gets the group's values, one each. Before: ranks 1 and 7 (one op_name and shape, two
    source lines) both took one update, ranks 2 and 3 both cache['k']."""
    _check_pairs(bufferhouse.query("oom-vs-peak", db=pair_db, module=OOM_STEM).to_pylist())


def test_one_module_of_the_name_pairs_one_to_one(tmp_path):
    """The compile alone (no parameter needed, no note): the same pairs."""
    tree = tmp_path / "t"
    (tree / "dump").mkdir(parents=True)
    shutil.copy(PAIR / "decode.log", tree)
    for f in (PAIR / "dump").glob(f"{OOM_STEM}*"):
        shutil.copy(f, tree / "dump")
    bufferhouse.ingest([tree], db=tmp_path / "w.duckdb", jobs=1)
    rows = bufferhouse.query("oom-vs-peak", db=tmp_path / "w.duckdb").to_pylist()
    _check_pairs(rows)
    assert {(r["modules_of_name"], r["module_note"]) for r in rows} == {(1, None)}


def _check_pairs(rows: list[dict]) -> None:
    rendered = _rendered()
    assert [r["rank"] for r in rows] == list(range(1, len(rendered) + 1))
    values = [r["value_id"] for r in rows]
    assert None not in values and len(set(values)) == len(values)  # one to one, all paired
    groups: dict[tuple, tuple[Counter, Counter]] = {}
    for row, want in zip(rows, rendered, strict=True):
        key = (row["oom_shape"], row["oom_size_bytes"], row["oom_op_name"], row["oom_source_line"])
        got, expected = groups.setdefault(key, (Counter(), Counter()))
        got[row["instruction"]] += 1
        expected[want] += 1
        if row["oom_source_line"] is not None:  # the printed line chose the value
            assert row["matched_by"] == "source+shape+size"
            assert row["peak_source_line"] == row["oom_source_line"]
            assert row["instruction"] == want
    for key, (got, expected) in groups.items():
        assert got == expected, key
    by_rank = {r["rank"]: r["instruction"] for r in rows}
    assert {by_rank[2], by_rank[3]} == {"cache__k__.1", "cache__v__.1"}
    assert by_rank[1] != by_rank[7]


def test_without_module_the_latest_is_named_and_noted(pair_db):
    """The latest ingested of the name, as before, but said: its hash, how many share the
    name, and a note; its caches are of another length, so the cache buffers find none."""
    rows = bufferhouse.query("oom-vs-peak", db=pair_db).to_pylist()
    assert {r["module_hash"] for r in rows} == {_hash(pair_db, OTHER_STEM)}
    assert {r["modules_of_name"] for r in rows} == {2}
    (note,) = {r["module_note"] for r in rows}
    assert "latest ingested of 2 modules named jit_decode_step" in note
    assert "module parameter" in note
    values = [r["value_id"] for r in rows if r["value_id"] is not None]
    assert len(set(values)) == len(values)
    assert [r["rank"] for r in rows if r["oom_shape"] == "f32[2,4,512,4,64]" and r["value_id"]] == [
        1,
        7,
    ]  # by op_name only: the module's caches hold 256 positions


def test_every_key_form_chooses_the_module(pair_db):
    with duckdb.connect(str(pair_db), read_only=True) as con:
        module_id = con.execute(
            "SELECT module_id FROM modules WHERE file_stem = ?", [OOM_STEM]
        ).fetchone()[0]
    results = [
        bufferhouse.query("oom-vs-peak", db=pair_db, module=key).to_pylist()
        for key in (OOM_STEM, str(module_id), _hash(pair_db, OOM_STEM))
    ]
    assert results[0] == results[1] == results[2]
    assert {r["module_id"] for r in results[0]} == {module_id}
    (note,) = {r["module_note"] for r in results[0]}
    assert note == "chosen by the module parameter, of 2 modules named jit_decode_step"
    # the name selects both: the rows of each, as every module query shows them
    both = bufferhouse.query("oom-vs-peak", db=pair_db, module="jit_decode_step").to_pylist()
    assert len({r["module_id"] for r in both}) == 2 and len(both) == 2 * len(results[0])


def test_an_event_asked_for_by_id_meets_any_module(pair_db):
    """With `event` and `module` both given, the module need not bear the program's name."""
    with duckdb.connect(str(pair_db), read_only=True) as con:
        (event_id,) = con.execute("SELECT event_id FROM oom_events").fetchone()
    rows = bufferhouse.query(
        "oom-vs-peak", db=pair_db, event=str(event_id), module=OOM_STEM
    ).to_pylist()
    assert len(rows) == len(_rendered()) and all(r["value_id"] is not None for r in rows)


def test_a_module_that_matches_nothing_is_an_error(pair_db):
    with pytest.raises(UnknownModuleError, match="jit_decode_step"):
        bufferhouse.query("oom-vs-peak", db=pair_db, module="jit_decode_stpe")
