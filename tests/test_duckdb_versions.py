"""The public API and the canned queries on both DuckDB majors pyproject allows.

pyproject says duckdb>=1.4 and the venv CI builds resolves the newest (2.x),
so the oldest supported release is tested here: duckdb 1.4 is pip-installed
once into a cache directory (about 6 s and 57 MB, then reused; set
BUFFERHOUSE_TEST_CACHE to move it) and put first on the path of a
subprocess that runs the same API script as the installed duckdb does. The
two runs must agree on every canned query's rows.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bufferhouse import queries
from tests.conftest import SAMPLES

ROOT = Path(__file__).resolve().parent.parent
OLDEST = "duckdb>=1.4,<1.5"

#: What a notebook does, on a fresh warehouse: every call of the public API.
API_SCRIPT = r"""
import hashlib, json, sys
import duckdb
import bufferhouse
from bufferhouse import queries

samples, db, mode = sys.argv[1], sys.argv[2], sys.argv[3]
out = {"duckdb": duckdb.__version__}
if mode == "full":
    out["loaded"] = len(bufferhouse.ingest(samples, db, jobs=1).loaded)
con = bufferhouse.connect(db)  # the README's notebook example, verbatim
out["top2"] = [r[2] for r in con.sql("FROM bh_top_modules(top := 2)").fetchall()]
out["again"] = con.sql("SELECT count(*) FROM modules").fetchall()[0][0]
con.close()
with bufferhouse.connect(db, read_only=False) as con:
    out["writable"] = con.sql("SELECT count(*) FROM bh_memory_spaces()").fetchall()[0][0]

def digest(table):
    keep = [c for c in table.column_names if c != "module_id" and not c.endswith("_module_id")]
    rows = sorted(json.dumps(r, sort_keys=True, default=str) for r in table.select(keep).to_pylist())
    return [table.num_rows, hashlib.sha256("\n".join(rows).encode()).hexdigest()]

out["queries"] = {}
for q in queries.queries():
    params = {"module": "003_186bba49641ec33a"} if any(p.name == "module" for p in q.params) else {}
    out["queries"][q.name] = digest(bufferhouse.query(q.name, db, **params))
out["sql"] = bufferhouse.sql("SELECT count(*) AS n FROM modules", db).to_pylist()
if mode == "full":
    result = bufferhouse.diff(db, db)
    out["diff"] = [result.failed, result.table("changes").num_rows]
print(json.dumps(out))
"""


def _cache() -> Path:
    base = os.environ.get("BUFFERHOUSE_TEST_CACHE") or Path.home() / ".cache" / "bufferhouse-tests"
    return Path(base)


@pytest.fixture(scope="session")
def oldest_duckdb() -> Path:
    """A directory holding duckdb 1.4 alone, to put first on PYTHONPATH."""
    target = _cache() / f"duckdb-1.4-py{sys.version_info.major}{sys.version_info.minor}"
    if not (target / "duckdb").is_dir():
        staging = target.with_name(target.name + f".{os.getpid()}")
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--target", str(staging), OLDEST],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            pytest.fail(f"cannot pip install {OLDEST} for this test:\n{proc.stderr[-2000:]}")
        if not (target / "duckdb").is_dir():  # another test process may have won
            staging.replace(target)
    return target


def _run_api(tmp_path: Path, name: str, first_on_path: Path | None, mode: str = "full") -> dict:
    path = [str(ROOT)] if first_on_path is None else [str(first_on_path), str(ROOT)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    proc = subprocess.run(
        [sys.executable, "-c", API_SCRIPT, str(SAMPLES), str(tmp_path / f"{name}.duckdb"), mode],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


# Two fixes outside this branch make it pass (checked with both applied): load/writer.py
# runs `SET write_buffer_row_group_count = 1`, a DuckDB 2 setting, so every ingest on
# 1.4 fails (fix: ignore duckdb.CatalogException there); and main's diff raises KeyError
# (fixed on branch `compare`, bf2f505). Strict: once both land it passes, and this
# marker must go.
@pytest.mark.xfail(
    strict=True,
    reason="ingest on duckdb 1.4 (load/writer.py SET write_buffer_row_group_count) "
    "and diff's KeyError on main (branch compare)",
)
def test_the_api_on_both_duckdb_majors(tmp_path, oldest_duckdb):
    newest = _run_api(tmp_path, "newest", None)
    oldest = _run_api(tmp_path, "oldest", oldest_duckdb)
    assert oldest["duckdb"].startswith("1.4."), oldest["duckdb"]
    assert newest["duckdb"] != oldest["duckdb"]
    for run in (newest, oldest):
        assert run["loaded"] == 5
        assert run["top2"] == ["003_186bba49641ec33a", "001_58de9a4b501a9eb8"]
        assert run["again"] == 5 and run["sql"] == [{"n": 5}]
        assert run["diff"][0] is False
    assert oldest["queries"] == newest["queries"]
    assert oldest["diff"] == newest["diff"]
    assert sorted(newest["queries"]) == sorted(q.name for q in queries.queries())


def test_reading_on_the_oldest_duckdb(tmp_path, samples_db, oldest_duckdb):
    """A warehouse written with the newest duckdb, read through the API on 1.4 and on
    the newest: connect + sql, read-write connect, every canned query, sql."""
    for name in ("newest", "oldest"):
        shutil.copy(samples_db, tmp_path / f"{name}.duckdb")
    newest = _run_api(tmp_path, "newest", None, "read")
    oldest = _run_api(tmp_path, "oldest", oldest_duckdb, "read")
    assert oldest["duckdb"].startswith("1.4."), oldest["duckdb"]
    for run in (newest, oldest):
        assert run["top2"] == ["003_186bba49641ec33a", "001_58de9a4b501a9eb8"]
        assert run["again"] == 5 and run["sql"] == [{"n": 5}] and run["writable"] > 0
    assert oldest["queries"] == newest["queries"]
