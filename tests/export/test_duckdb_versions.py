"""The public API and the canned queries on both DuckDB majors pyproject allows.

pyproject says duckdb>=1.4 and the venv CI builds resolves the newest (2.x),
so the oldest supported release is tested here: duckdb 1.4 is pip-installed
once into a cache directory (about 6 s and 57 MB, then reused; set
BUFFERHOUSE_TEST_CACHE to move it) and put first on the path of a
subprocess that runs the same API script as the installed duckdb does. The
two runs must agree on every canned query's rows.

The README's duckdb-shell examples run verbatim in the duckdb-cli shells
from PyPI (1.5 from the test extra, 1.4.4 cached like duckdb 1.4), and their
SQL on the DuckDB 1.2 and 1.3 engines (PyPI has no older shell): what the
README says about shell versions is what these tests show.
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
from tests.conftest import ROOT, SAMPLES, pip_target, run_with

pytestmark = pytest.mark.slow  # installs and runs older DuckDB releases

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
con = bufferhouse.connect(db)  # the notebook pattern: a connection of one's own open ...
out["top2"] = [r[2] for r in con.sql("FROM bh_top_modules(top := 2)").fetchall()]
notebook = []
for _ in range(2):  # ... beside sealed sql and query calls, any number of them (issue 27)
    notebook.append(bufferhouse.sql("SELECT count(*) AS n FROM modules", db).to_pylist())
    notebook.append(bufferhouse.query("top-modules", db, top=2).num_rows)
out["notebook"] = notebook
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
    result = bufferhouse.diff(db, db, causes=True)
    out["diff"] = [result.failed, result.table("changes").num_rows, digest(result.causes)]
print(json.dumps(out))
"""


@pytest.fixture(scope="session")
def oldest_duckdb() -> Path:
    """A directory holding duckdb 1.4 alone, to put first on PYTHONPATH."""
    return pip_target(OLDEST, "duckdb-1.4")


def _run_api(tmp_path: Path, name: str, first_on_path: Path | None, mode: str = "full") -> dict:
    args = [API_SCRIPT, str(SAMPLES), str(tmp_path / f"{name}.duckdb"), mode]
    return run_with(args, tmp_path, first_on_path)


def test_the_api_on_both_duckdb_majors(tmp_path, oldest_duckdb):
    newest = _run_api(tmp_path, "newest", None)
    oldest = _run_api(tmp_path, "oldest", oldest_duckdb)
    assert oldest["duckdb"].startswith("1.4."), oldest["duckdb"]
    assert newest["duckdb"] != oldest["duckdb"]
    for run in (newest, oldest):
        assert run["loaded"] == 5
        assert run["top2"] == ["003_186bba49641ec33a", "001_58de9a4b501a9eb8"]
        assert run["again"] == 5 and run["sql"] == [{"n": 5}]
        assert run["notebook"] == [[{"n": 5}], 2] * 2
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
        assert run["notebook"] == [[{"n": 5}], 2] * 2
    assert oldest["queries"] == newest["queries"]


#: Engines the README promises can read the warehouse, older than any PyPI shell.
OLD_ENGINES = ("1.2.2", "1.3.2")
README = ROOT / "README.md"


def readme_shell_examples() -> list[str]:
    """The command lines of the code block after the README's shell-examples marker."""
    text = README.read_text(encoding="utf-8")
    block = text.split("<!-- shell-examples:", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    lines = [line for line in block.splitlines() if line.strip()]
    assert lines and all(line.startswith('duckdb fleet.duckdb -c "') for line in lines), lines
    return lines


def _shell_sql(line: str) -> str:
    return line.split(' -c "', 1)[1].rstrip('"')


@pytest.fixture(scope="module")
def shells() -> dict[str, Path]:
    """duckdb-cli version -> directory whose `duckdb` runs that shell."""
    installed = Path(sys.executable).parent
    out = {"installed": installed}
    out["1.4.4"] = pip_target("duckdb-cli==1.4.4.post2", "duckdb-cli-1.4.4") / "bin"
    for name, path in out.items():
        assert (path / "duckdb").exists(), name
    return out


def test_readme_shell_examples_verbatim(tmp_path, samples_db, shells):
    versions = set()
    for name, bindir in shells.items():
        work = tmp_path / name
        work.mkdir()
        shutil.copy(samples_db, work / "fleet.duckdb")
        env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
        version = subprocess.run(
            ["duckdb", "--version"], capture_output=True, text=True, env=env, check=True
        ).stdout
        versions.add(version.split()[0])
        for line in readme_shell_examples():
            proc = subprocess.run(
                ["bash", "-c", line], capture_output=True, text=True, env=env, cwd=work
            )
            assert proc.returncode == 0 and not proc.stderr, (version, line, proc.stderr)
        top = subprocess.run(
            ["bash", "-c", 'duckdb -csv fleet.duckdb -c "FROM bh_top_modules(top := 20)"'],
            capture_output=True,
            text=True,
            env=env,
            cwd=work,
            check=True,
        ).stdout
        assert len(top.splitlines()) == 1 + 5  # the header and the samples' five modules
    assert len(versions) == 2 and any(v.startswith("v1.4.4") for v in versions), versions


_ENGINE_SCRIPT = r"""
import json, sys
import duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
con.execute("SET enable_progress_bar = false")  # drawn on stdout when a query passes 2 s
out = {"version": duckdb.__version__}
for sql in json.loads(sys.argv[2]):
    try:
        out[sql] = len(con.sql(sql).fetchall())
    except duckdb.Error as exc:
        out[sql] = str(exc).splitlines()[0]
print(json.dumps(out))
"""


@pytest.mark.parametrize("version", OLD_ENGINES)
def test_readme_examples_on_the_oldest_engines(tmp_path, samples_db, version):
    """The README's shell SQL, the docs' macro examples, binds on DuckDB 1.2 and 1.3;
    the positional form the README warns about fails there as it says."""
    engine = pip_target(f"duckdb=={version}", f"duckdb-{version}")
    db = tmp_path / "fleet.duckdb"
    shutil.copy(samples_db, db)
    docs = [
        line.split(' -c "', 1)[1].rstrip('"').replace("jit_train_step", "003_186bba49641ec33a")
        for line in (ROOT / "docs" / "queries.md").read_text().splitlines()
        if line.startswith('duckdb fleet.duckdb -c "FROM bh_')
    ]
    readme = [_shell_sql(line) for line in readme_shell_examples()]
    positional = "FROM bh_top_modules(20)"
    proc = subprocess.run(
        [sys.executable, "-c", _ENGINE_SCRIPT, str(db), json.dumps([*readme, *docs, positional])],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(engine)},
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out.pop("version") == version
    assert "requires 0 positional arguments" in out.pop(positional)
    assert len(docs) == len(queries.queries())
    # the samples hold no device memory snapshot: a snapshot example binds and runs,
    # and says so with the query's own error (a key that selects nothing is an error)
    assert all(isinstance(rows, int) or "no snapshot matches" in rows for rows in out.values()), out
    assert out["FROM bh_top_modules(top := 20)"] == 5
