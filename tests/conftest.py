"""Shared fixtures: warehouses built once per session from the committed test data."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

import bufferhouse

#: the checkout, and the tests' committed fixtures (tests in area folders use these, not
#: paths of their own from __file__)
ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data"
SAMPLES = DATA / "samples"
CORPUS = DATA / "corpus"
GOLDEN = Path(__file__).parent / "golden"


def _cache() -> Path:
    base = os.environ.get("BUFFERHOUSE_TEST_CACHE") or Path.home() / ".cache" / "bufferhouse-tests"
    return Path(base)


def pip_target(spec: str | list[str], name: str, no_deps: bool = False) -> Path:
    """A directory holding `spec` (pip install --target), made once and cached: older
    releases of a dependency, or a tool, to put first on a subprocess's path."""
    specs = [spec] if isinstance(spec, str) else spec
    target = _cache() / f"{name}-py{sys.version_info.major}{sys.version_info.minor}"
    if not (target / ".complete").exists():
        staging = target.with_name(target.name + f".{os.getpid()}")
        cmd = [sys.executable, "-m", "pip", "install", "-q", "--target", str(staging)]
        proc = subprocess.run(
            cmd + (["--no-deps"] if no_deps else []) + specs, capture_output=True, text=True
        )
        if proc.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            _pip_failed(specs, proc.stderr)
        (staging / ".complete").touch()
        if not (target / ".complete").exists():  # another test process may have won
            shutil.rmtree(target, ignore_errors=True)
            staging.replace(target)
        else:
            shutil.rmtree(staging, ignore_errors=True)
    return target


#: Set (CI sets it) to fail, not skip, a test whose release the package index cannot give.
NEED_INDEX = "BUFFERHOUSE_TEST_NEED_INDEX"
#: Set (CI sets it) to fail, not skip, tests/parse/text/test_native_sanitizers.py where gcc or its
#: AddressSanitizer and UndefinedBehaviorSanitizer runtimes are missing.
NEED_SANITIZERS = "BUFFERHOUSE_TEST_NEED_SANITIZERS"
#: What pip says when the index cannot give a release: not reachable (no network, a
#: mirror down) or reachable without it. Anything else (a build or install error) fails.
_NOT_OFFERED = (
    "No matching distribution found",
    "Could not find a version that satisfies",
    "Failed to establish a new connection",
    "Could not fetch URL",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "ProxyError",
)


def _pip_failed(specs: list[str], stderr: str) -> None:
    """Skip the test when the package index cannot give `specs` (unless NEED_INDEX is
    set); fail it on any other pip error."""
    last = (stderr.strip().splitlines() or ["(no output)"])[-1]
    if any(m in stderr for m in _NOT_OFFERED) and not os.environ.get(NEED_INDEX):
        pytest.skip(
            f"the package index cannot give {' '.join(specs)} (unreachable, or without that "
            f"release): {last} (set {NEED_INDEX}=1 to fail instead)"
        )
    pytest.fail(f"cannot pip install {specs} for this test:\n{stderr[-2000:]}")


def run_with(args: list[str], cwd: Path, first_on_path: Path | None = None, **env: str) -> dict:
    """What `python -c args...` prints as JSON on its last line, run in a subprocess
    with this checkout (after `first_on_path`: an older dependency from pip_target) on
    its path and `env` added to its environment."""
    root = Path(__file__).resolve().parent.parent
    path = [str(root)] if first_on_path is None else [str(first_on_path), str(root)]
    proc = subprocess.run(
        [sys.executable, "-c", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(path), **env},
        cwd=cwd,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="Rewrite tests/golden/* from the current output instead of comparing.",
    )


@pytest.fixture(scope="session")
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture(scope="session")
def manifest() -> dict:
    return json.loads((CORPUS / "manifest.json").read_text())["entries"]


@pytest.fixture(scope="session")
def fleet_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Samples and the corpus subset, ingested once (read-only for tests)."""
    db = tmp_path_factory.mktemp("fleet") / "fleet.duckdb"
    report = bufferhouse.ingest([SAMPLES, CORPUS], db=db, jobs=2)
    assert report.ok, [o.error for o in report.failed]
    return db


@pytest.fixture(scope="session")
def samples_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("samples") / "samples.duckdb"
    report = bufferhouse.ingest(SAMPLES, db=db, jobs=1)
    assert report.ok
    return db


@pytest.fixture(scope="session")
def oom_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The OOM fixtures (every form, tests/data/oom) and the JAX module whose OOM message
    tests/data/oom-join/train.log holds, beside its dump: what the oom-* goldens read."""
    db = tmp_path_factory.mktemp("oom") / "oom.duckdb"
    report = bufferhouse.ingest([DATA / "oom", DATA / "oom-join"], db=db, jobs=1)
    assert report.ok and len(report.loaded) == 1
    return db


@pytest.fixture(scope="session")
def runtime_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The jax run of tests/data/runtime: its two device memory profiles and the dump of its
    step, ingested together (one run): what the runtime goldens read."""
    db = tmp_path_factory.mktemp("runtime") / "runtime.duckdb"
    report = bufferhouse.ingest([DATA / "runtime"], db=db, jobs=1)
    assert report.ok and report.snapshots_loaded == 2 and len(report.loaded) == 1
    return db


def event_keyed(table: pa.Table, db: Path | str) -> pa.Table:
    """`table` with event_id (and snapshot_id) replaced by the event's (snapshot's) hash
    prefix and paths made relative to tests/data, as module ids are by hash_keyed: all are
    local to a warehouse."""
    with duckdb.connect(str(db), read_only=True) as con:
        keys = dict(
            con.execute("SELECT event_id, substr(event_hash, 1, 16) FROM oom_events").fetchall()
        )
        snapshots = dict(
            con.execute(
                "SELECT snapshot_id, substr(snapshot_hash, 1, 16) FROM runtime_snapshots"
            ).fetchall()
        )
    for i, name in enumerate(table.column_names):
        if name in ("event_id", "snapshot_id"):
            key = keys if name == "event_id" else snapshots
            ids = [None if e is None else key[e] for e in table.column(i).to_pylist()]
            table = table.set_column(i, name, pa.array(ids, pa.string()))
        elif name in ("path", "directory"):
            root = str(DATA) + "/"
            paths = [p if p is None else p.removeprefix(root) for p in table.column(i).to_pylist()]
            table = table.set_column(i, name, pa.array(paths, pa.string()))
    return table


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A copy of the samples in a temporary directory, free to damage."""
    target = tmp_path / "dumps"
    shutil.copytree(SAMPLES, target)
    return target


def module_hashes(db: Path | str) -> dict[int, str]:
    """module_id -> the first 16 hex digits of the module's content hash, in warehouse `db`."""
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT module_id, substr(content_hash, 1, 16) FROM modules").fetchall()
    return dict(rows)


def hash_keyed(table: pa.Table, hashes: dict[int, str]) -> pa.Table:
    """`table` with every module id column (module_id, *_module_id) replaced by the
    module's content-hash prefix: ids are local to a warehouse and grow with ingest
    order, while the content hash names the module the same way everywhere."""
    for i, name in enumerate(table.column_names):
        if name == "module_id" or name.endswith("_module_id"):
            keys = [None if m is None else hashes[m] for m in table.column(i).to_pylist()]
            table = table.set_column(i, name, pa.array(keys, pa.string()))
    return table


def drop_version_7(con: duckdb.DuckDBPyConnection) -> None:
    """Take a fresh warehouse back to what schema version 6 had: no peak_source columns
    (for the tests that build an older warehouse by dropping what it lacked)."""
    for table in ("modules", "heap_peaks"):
        con.execute(f"ALTER TABLE {table} DROP COLUMN peak_source")
    drop_version_11(con)


def drop_version_11(con: duckdb.DuckDBPyConnection) -> None:
    """Take a fresh warehouse back to what schema version 10 had: no modules.xla_temp_bytes,
    no hlo_values.tiled_bytes."""
    drop_version_14(con)
    con.execute("ALTER TABLE modules DROP COLUMN IF EXISTS xla_temp_bytes")
    con.execute("ALTER TABLE hlo_values DROP COLUMN IF EXISTS tiled_bytes")


def drop_version_14(con: duckdb.DuckDBPyConnection) -> None:
    """Take a fresh warehouse back to what schema version 13 had: no
    modules.generated_code_bytes."""
    con.execute("ALTER TABLE modules DROP COLUMN IF EXISTS generated_code_bytes")
