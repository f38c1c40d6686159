"""Parquet export, ingest --to-parquet, attach and transpiled queries.

The oracle throughout is the warehouse itself: a dataset read back (with
pyarrow, or through attach's views) must give the rows, types and canned-query
answers of a warehouse ingest of the same files.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest
import sqlglot
from click.testing import CliRunner

import bufferhouse
from bufferhouse import queries
from bufferhouse.cli import main
from bufferhouse.errors import ExportError, QueryError
from bufferhouse.export import (
    DIALECTS,
    attach,
    export_warehouse,
    ingest_to_parquet,
    open_dataset,
    read_table,
    transpile,
)
from bufferhouse.export import parquet as parquet_mod
from bufferhouse.export.dataset import file_schema, hive_partitioning, is_partitioned, table_schema
from bufferhouse.parse.discover import discover
from bufferhouse.schema import SCHEMA_VERSION, TABLES, TABLES_BY_NAME, arrow_schema
from tests.conftest import CORPUS, DATA, SAMPLES, hash_keyed, module_hashes

MODULE = "003_186bba49641ec33a"  # a sample with live ranges
PARAMS = {
    "heap-timeline": {"module": MODULE},
    "arena": {"module": MODULE},
    "heap-trace": {"module": MODULE},
}
ALL = queries.queries()
IDS = [q.name for q in ALL]

#: Canned queries a dialect cannot express, and the construct each message names.
UNSUPPORTED = {
    ("oom-vs-peak", "spark"): "the six pairing tiers",
    ("top-modules", "postgres"): "error()",
    ("by-source", "postgres"): "error()",
    ("heap-timeline", "postgres"): "error()",
    ("arena", "postgres"): "error()",
    ("heap-trace", "postgres"): "error()",
    ("live-by-source", "postgres"): "error()",
    ("live-growth", "postgres"): "error()",
    ("device-budget", "postgres"): "error()",
    ("by-source", "bigquery"): "list_slice()",
    ("heap-timeline", "bigquery"): "bh_peak_first() OVER",
    ("modules", "bigquery"): "NULLS LAST",
    ("recompiles", "bigquery"): "NULLS LAST",
    ("oom-events", "bigquery"): "NULLS LAST",
    ("oom-culprits", "bigquery"): "NULLS LAST",
    ("fits", "postgres"): "error()",
    ("fits", "bigquery"): "NULLS LAST",
}


def _sorted_rows(table) -> list[tuple]:
    rows = [tuple(r.values()) for r in table.to_pylist()]
    return sorted(rows, key=repr)


@pytest.fixture(scope="module")
def exported(fleet_db, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export") / "out"
    report = export_warehouse(out, fleet_db)
    assert report.modules > 100 and report.runs == 1
    return out


@pytest.fixture(scope="module")
def attached(exported, tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("attach") / "views.duckdb"
    report = attach(exported, db)
    assert report.modules > 100
    return db


@pytest.mark.parametrize("table", TABLES, ids=[t.name for t in TABLES])
def test_round_trip_rows_and_types(table, fleet_db, exported):
    """Read back with pyarrow: the warehouse's rows, column names and types."""
    with duckdb.connect(str(fleet_db), read_only=True) as con:
        expected = queries.arrow_result(con.sql(f'SELECT * FROM "{table.name}"'))
    got = read_table(exported, table.name)
    assert got.schema.names == table.column_names
    assert got.schema.types == arrow_schema(table).types
    assert _sorted_rows(got) == _sorted_rows(expected)
    for path in (exported / table.name).rglob("*.parquet"):
        stored = pq.read_schema(path)
        assert stored.types == file_schema(table).types, path
        assert stored.metadata[b"bufferhouse.doc"].decode() == table.doc
        docs = json.loads(stored.metadata[b"bufferhouse.columns"])
        assert docs == {c.name: c.doc for c in table.columns}
        for f in stored:
            assert f.metadata[b"doc"].decode() == docs[f.name]
        if is_partitioned(table):
            assert path.parent.name.startswith("run_id="), path


def test_schema_files_beside_the_data(exported):
    doc = json.loads((exported / "_schema.json").read_text())
    assert doc["schema_version"] == SCHEMA_VERSION
    assert [t["name"] for t in doc["tables"]] == [t.name for t in TABLES]
    allocations = next(t for t in doc["tables"] if t["name"] == "allocations")
    assert allocations["partitioning"] == ["run_id"]
    size = next(c for c in allocations["columns"] if c["name"] == "size")
    assert size["doc"] == next(
        c.doc for c in TABLES_BY_NAME["allocations"].columns if c.name == "size"
    )
    readme = (exported / "README.md").read_text()
    assert "run_id" in readme and "## `heap_peaks`" in readme


@pytest.mark.parametrize("query", ALL, ids=IDS)
def test_attach_answers_like_the_warehouse(query, fleet_db, attached):
    params = PARAMS.get(query.name, {})
    expected = bufferhouse.query(query.name, db=fleet_db, **params)
    got = bufferhouse.query(query.name, db=attached, **params)
    assert got.schema == expected.schema
    assert got.to_pylist() == expected.to_pylist()


def test_attached_file_opens_in_the_duckdb_shell(attached, tmp_path):
    from tests.cli.test_cli import _duckdb_cli

    out = subprocess.run(
        [_duckdb_cli(), "-readonly", "-csv", str(attached), "-c", "FROM bh_top_modules(3)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert len(out.strip().splitlines()) == 4


def test_export_refuses_to_overwrite(fleet_db, exported, tmp_path):
    with pytest.raises(ExportError, match="--overwrite"):
        export_warehouse(exported, fleet_db)
    stranger = tmp_path / "home"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("mine")
    with pytest.raises(ExportError, match="not a bufferhouse export"):
        export_warehouse(stranger, fleet_db, overwrite=True)
    assert (stranger / "notes.txt").read_text() == "mine"
    again = tmp_path / "again"
    export_warehouse(again, fleet_db, tables=["heap_peaks"])
    export_warehouse(again, fleet_db, tables=["allocations"], overwrite=True)
    assert sorted(p.name for p in again.iterdir() if p.is_dir()) == ["allocations", "modules"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_unknown_table_names_the_valid_ones(fleet_db, tmp_path):
    with pytest.raises(ExportError, match=r"no table 'values' \(the values table is hlo_values\)"):
        export_warehouse(tmp_path / "x", fleet_db, tables=["allocations", "values"])
    with pytest.raises(ExportError, match=r"no table '\.\./escape'"):
        export_warehouse(tmp_path / "x", fleet_db, tables=["../escape"])
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.slow
def test_export_by_label(tmp_path):
    db = tmp_path / "labelled.duckdb"
    bufferhouse.ingest(SAMPLES, db=db, labels={"set": "samples"}, jobs=1)
    bufferhouse.ingest(CORPUS / "jax-0.6.2", db=db, labels={"set": "corpus"}, jobs=1)
    report = export_warehouse(tmp_path / "out", db, labels=["set=samples"])
    samples = len(list(SAMPLES.glob("*.txt")))
    assert report.modules == samples
    assert read_table(tmp_path / "out", "modules").num_rows == samples
    assert read_table(tmp_path / "out", "runs").num_rows == 1
    labels = read_table(tmp_path / "out", "labels").to_pylist()
    assert {(r["key"], r["value"]) for r in labels} == {("set", "samples")}


def _ingest_cli(paths: list[Path], out: Path, label: str) -> subprocess.Popen:
    args = [sys.executable, "-m", "bufferhouse.cli", "ingest", *map(str, paths)]
    args += ["--to-parquet", str(out), "--label", label, "-j", "1", "-q"]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_two_writers_at_once_equal_one_warehouse(fleet_db, tmp_path):
    """Overlapping shards from two processes: attach dedups to the warehouse's answers."""
    out = tmp_path / "shared"
    first = _ingest_cli([SAMPLES, CORPUS / "jax-0.6.2"], out, "writer=a")
    second = _ingest_cli([CORPUS], out, "writer=b")
    loaded = []
    for proc in (first, second):
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        counts = re.search(r"(\d+) loaded, (\d+) already present, 0 failed", err)
        assert counts, err
        loaded.append(int(counts.group(1)))
    raw = read_table(out, "modules")
    deduped = read_table(out, "modules", dedup=True)
    with duckdb.connect(str(fleet_db), read_only=True) as con:
        expected = con.sql("SELECT count(*) FROM modules").fetchall()[0][0]
    # jax-0.6.2 is in both shards: parsed twice if the writers overlapped in time,
    # skipped by a writer that found it published when it started. Every module a
    # writer loaded is in the dataset once; the copies beyond one are of jax-0.6.2.
    assert raw.num_rows == sum(loaded)
    assert deduped.num_rows == expected
    overlap = {files.buffer_assignment for files in discover([CORPUS / "jax-0.6.2"])}
    copies = [r for r in raw.to_pylist() if r["paths"][0] in overlap]
    twice = raw.num_rows - deduped.num_rows
    assert len(copies) == len(overlap) + twice and 0 <= twice <= len(overlap)
    assert read_table(out, "runs").num_rows == 2
    db = tmp_path / "shared.duckdb"
    attach(out, db)
    fleet_hashes = module_hashes(fleet_db)
    for q in ALL:
        # Each sink numbers modules in its own ingest order: compare content hashes, and
        # rows as sets, all of them (rows that tie up to module_id come in ingest order,
        # and so does the rank top-modules gives them).
        params = dict(PARAMS.get(q.name, {}))
        if any(p.name == "top" for p in q.params):
            params["top"] = 10**6
        want = hash_keyed(bufferhouse.query(q.name, db=fleet_db, **params), fleet_hashes)
        got = hash_keyed(bufferhouse.query(q.name, db=db, **params), module_hashes(db))
        # labels: the writers labelled on purpose, the warehouse not
        unlike = [c for c in ("labels", "rank") if c in want.column_names]
        want, got = want.drop_columns(unlike), got.drop_columns(unlike)
        assert sorted(got.to_pylist(), key=repr) == sorted(want.to_pylist(), key=repr), q.name
    # both writers' labels land on the module both parsed, like re-ingest with new labels
    with duckdb.connect(str(db), read_only=True) as con:
        both = con.sql(
            "SELECT count(*) FROM (SELECT module_id FROM labels GROUP BY module_id "
            "HAVING count(DISTINCT value) = 2)"
        ).fetchall()[0][0]
    assert both == len(list((CORPUS / "jax-0.6.2").rglob("*-buffer-assignment.txt*")))


def test_rerun_skips_modules_the_dataset_has(tmp_path):
    out = tmp_path / "out"
    first = ingest_to_parquet([SAMPLES], out, jobs=1)
    again = ingest_to_parquet([SAMPLES], out, jobs=1, labels={"pass": "two"})
    assert len(first.loaded) == len(again.present) == len(list(SAMPLES.glob("*.txt")))
    assert not again.loaded
    con = open_dataset(out)
    assert con.sql("SELECT count(*) FROM modules").fetchall()[0][0] == len(first.loaded)
    assert con.sql("SELECT count(DISTINCT module_id) FROM labels").fetchall()[0][0] == len(
        first.loaded
    )


@pytest.mark.slow
def test_parts_hold_many_modules(tmp_path):
    out = tmp_path / "out"
    report = ingest_to_parquet([CORPUS / "jax-0.6.2"], out, jobs=1, max_modules=20)
    files = list((out / "modules").rglob("*.parquet"))
    assert len(report.loaded) > 40
    assert len(files) == -(-len(report.loaded) // 20)
    names = {p.name for p in files}
    assert len(names) == len(files) and all(n.startswith("part-") for n in names)


def test_killed_writer_leaves_no_half_module(tmp_path, monkeypatch):
    """A flush that dies before its modules file is renamed shows nothing of its modules."""
    out = tmp_path / "out"
    real = os.replace

    def dying_replace(src, dst):
        if "/modules/" in str(dst):
            raise KeyboardInterrupt  # the process is killed here
        return real(src, dst)

    monkeypatch.setattr(parquet_mod.os, "replace", dying_replace)
    with pytest.raises(KeyboardInterrupt):
        ingest_to_parquet([SAMPLES], out, jobs=1)
    monkeypatch.setattr(parquet_mod.os, "replace", real)
    assert list((out / "allocations").rglob("*.parquet"))  # its other tables did land
    con = open_dataset(out)
    for table in ("modules", "allocations", "hlo_values", "live_ranges"):
        assert con.sql(f"SELECT count(*) FROM {table}").fetchall()[0][0] == 0, table
    # a re-run completes the dataset; the orphaned rows stay invisible
    report = ingest_to_parquet([SAMPLES], out, jobs=1)
    assert len(report.loaded) == len(list(SAMPLES.glob("*.txt")))
    con = open_dataset(out)
    assert con.sql("SELECT count(*) FROM modules").fetchall()[0][0] == len(report.loaded)
    with duckdb.connect(str(_samples_warehouse(tmp_path)), read_only=True) as wh:
        want = wh.sql("SELECT count(*) FROM allocations").fetchall()[0][0]
    assert con.sql("SELECT count(*) FROM allocations").fetchall()[0][0] == want


def _samples_warehouse(tmp_path: Path) -> Path:
    db = tmp_path / "samples.duckdb"
    bufferhouse.ingest(SAMPLES, db=db, jobs=1)
    return db


def test_attach_never_replaces_a_warehouse(fleet_db, exported, tmp_path):
    copy = tmp_path / "fleet.duckdb"
    shutil.copy(fleet_db, copy)
    before = copy.read_bytes()
    with pytest.raises(ExportError, match="not a file made by 'bufferhouse attach'"):
        attach(exported, copy)
    assert copy.read_bytes() == before
    views = tmp_path / "views.duckdb"
    attach(exported, views)
    attach(exported, views)  # an earlier attach is replaced
    with pytest.raises(ExportError, match="no dataset"):
        attach(tmp_path / "missing", tmp_path / "x.duckdb")


def test_attach_a_glob_of_datasets(fleet_db, tmp_path):
    export_warehouse(tmp_path / "day1", fleet_db, tables=["heap_peaks"])
    ingest_to_parquet([SAMPLES], tmp_path / "day2", jobs=1)
    con = open_dataset(str(tmp_path / "day*"))
    with duckdb.connect(str(fleet_db), read_only=True) as wh:
        want = wh.sql("SELECT count(*) FROM modules").fetchall()[0][0]
    assert con.sql("SELECT count(*) FROM modules").fetchall()[0][0] == want
    assert con.sql("SELECT count(*) FROM memory_spaces").fetchall()[0][0] == 17


# --- transpiled queries -------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("query", ALL, ids=IDS)
def test_every_query_transpiles_or_says_why(query, dialect):
    construct = UNSUPPORTED.get((query.name, dialect))
    if construct is not None:
        with pytest.raises(QueryError, match=f"cannot be expressed in {dialect}") as err:
            transpile(query.name, dialect)
        assert construct in str(err.value)
        return
    out = transpile(query.name, dialect)
    tree = sqlglot.parse_one(out.sql, read=dialect)
    names = {t.name for t in tree.find_all(sqlglot.exp.Table)}
    views = {v.name for v in queries.views()}
    assert not (names & views) - {c.alias_or_name for c in tree.find_all(sqlglot.exp.CTE)}
    assert set(out.params) == set(query.used_params())
    assert "$" not in out.sql and "bhparam" not in out.sql


def test_dialect_markers():
    assert ":module" in transpile("peak-buffers", "spark").sql
    assert "@module" in transpile("peak-buffers", "bigquery").sql
    # Postgres cannot type a bare NULL parameter in `$1 IS NULL`
    assert "CAST(%(module)s AS VARCHAR)" in transpile("peak-buffers", "postgres").sql
    trino = transpile("padding", "trino")
    assert trino.sql.count("?") == len(trino.params) == 8
    assert trino.params == ("module",) * 7 + ("top",)


def test_views_are_inlined_as_ctes():
    """No canned query reads a view today; SQL that does gets the view in front."""
    from bufferhouse.export.transpile import _inline_views

    tree = sqlglot.parse_one("SELECT module_id FROM module_keys WHERE key = $module", read="duckdb")
    sql = _inline_views("test", tree).sql(dialect="spark")
    assert sql.startswith("WITH module_keys AS (SELECT module_id, module_name AS key")


def test_postgres_try_cast_casts_only_integers():
    """A plain CAST of a module name to BIGINT would raise in Postgres."""
    sql = transpile("categories", "postgres").sql
    assert "TRY_CAST" not in sql
    guard = "WHEN CAST(%(module)s AS VARCHAR) ~ '\\A\\s*[-+]?[0-9]+\\s*\\Z'"
    in_range = "AS DECIMAL) BETWEEN -9223372036854775808 AND 9223372036854775807"
    assert guard in sql and in_range in sql
    assert sql.count("AS BIGINT)") == 1


def test_unknown_dialect():
    with pytest.raises(QueryError, match="valid dialects: spark, trino, bigquery, postgres"):
        transpile("top-modules", "oracle")


# --- CLI ------------------------------------------------------------------------


def test_cli_export_attach_query(fleet_db, tmp_path):
    runner = CliRunner()
    out = tmp_path / "out"
    result = runner.invoke(main, ["export", str(out), "--db", str(fleet_db)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["export", str(out), "--db", str(fleet_db)])
    assert result.exit_code == 2 and "--overwrite" in result.output
    views = tmp_path / "views.duckdb"
    result = runner.invoke(main, ["attach", str(out), "--db", str(views)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["query", "top-modules", "--db", str(views), "-f", "csv"])
    expected = runner.invoke(main, ["query", "top-modules", "--db", str(fleet_db), "-f", "csv"])
    assert result.exit_code == 0 and result.stdout == expected.stdout


def test_cli_dialect(tmp_path):
    runner = CliRunner()
    result = runner.invoke(main, ["query", "peak-buffers", "--dialect", "spark"])
    assert result.exit_code == 0
    assert result.stdout.startswith("-- peak-buffers (spark)") and ":module" in result.stdout
    result = runner.invoke(main, ["query", "top-modules", "--dialect", "postgres"])
    assert result.exit_code == 2
    assert "cannot be expressed in postgres SQL: error()" in result.output
    result = runner.invoke(main, ["query", "top-modules", "--dialect", "trino", "-p", "top=3"])
    assert result.exit_code == 2 and "bind parameters in the engine" in result.output


def test_cli_to_parquet_and_db_are_exclusive(tmp_path):
    result = CliRunner().invoke(
        main, ["ingest", str(SAMPLES), "--db", "x.duckdb", "--to-parquet", str(tmp_path)]
    )
    assert result.exit_code == 2 and "exclusive" in result.output


def test_export_stage_is_last():
    """schema -> ingest -> queries -> export -> cli: nothing earlier imports export."""
    code = (
        "import sys, bufferhouse.parse, bufferhouse.load, bufferhouse.schema, bufferhouse.queries;"
        "assert not [m for m in sys.modules if m.startswith('bufferhouse.export')], sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_spark_module_says_what_to_install(monkeypatch):
    from bufferhouse import spark as bhs
    from bufferhouse.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "pyspark", None)
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'bufferhouse\[spark\]'"):
        bhs.session()


# --- other readers: every table as they find it, with the declared types ---------------


@pytest.fixture(scope="module")
def with_empty_tables(samples_db, tmp_path_factory) -> Path:
    """An export in which some tables have no rows (no labels, no usage reports)."""
    out = tmp_path_factory.mktemp("empty") / "out"
    report = export_warehouse(out, samples_db)
    empty = [name for name, rows in report.tables.items() if rows == 0]
    assert {"labels", "usage_report"} <= set(empty), empty
    return out


def _declared(table) -> pa.Schema:
    """The table's declared columns and types, with the partition column (int64)."""
    schema = table_schema(table)
    if is_partitioned(table) and "run_id" not in schema.names:
        schema = schema.append(pa.field("run_id", pa.int64()))
    return schema


def _types(schema) -> dict:
    return {f.name: f.type for f in schema}


def test_empty_tables_are_files_with_their_columns(with_empty_tables):
    for table in TABLES:
        files = list((with_empty_tables / table.name).rglob("*.parquet"))
        assert files, f"{table.name}: no file"
        for path in files:
            assert pq.read_schema(path).types == file_schema(table).types, path
            if is_partitioned(table):
                assert path.parent.name.startswith("run_id="), path


@pytest.mark.parametrize("table", TABLES, ids=[t.name for t in TABLES])
def test_pyarrow_pandas_and_polars_read_every_table_with_its_declared_types(
    table, with_empty_tables, samples_db
):
    pd = pytest.importorskip("pandas")  # not in the test extra: skipped on a minimal install
    import polars as pl

    path = with_empty_tables / table.name
    want = _declared(table)
    with duckdb.connect(str(samples_db), read_only=True) as con:
        rows = con.execute(f'SELECT count(*) FROM "{table.name}"').fetchone()[0]
    partitioning = hive_partitioning() if is_partitioned(table) else None

    got = pads.dataset(path, partitioning=partitioning).to_table()
    assert _types(got.schema) == _types(want) and got.num_rows == rows

    frame = pd.read_parquet(path, partitioning=partitioning, dtype_backend="pyarrow")
    assert {c: t.pyarrow_dtype for c, t in frame.dtypes.items()} == _types(want)
    assert len(frame) == rows
    if is_partitioned(table):  # numpy dtypes too: run_id an integer, not a category
        assert pd.read_parquet(path, partitioning=partitioning)["run_id"].dtype == "int64"

    # polars as it is (no hints): the declared types as polars maps them.
    frame = pl.read_parquet(f"{path}/")
    assert dict(frame.schema) == dict(pl.from_arrow(want.empty_table()).schema)
    assert frame.height == rows


@pytest.mark.slow
def test_spark_reads_every_table_with_its_declared_types(with_empty_tables):
    pytest.importorskip("pyspark")
    from pyspark.sql.pandas.types import from_arrow_type

    from bufferhouse import spark as bhs

    session = bhs.session("local[1]")
    try:
        for table in TABLES:
            frame = session.read.parquet(str(with_empty_tables / table.name))
            got = {f.name: f.dataType for f in frame.schema}
            want = {f.name: from_arrow_type(f.type) for f in _declared(table)}
            assert got == want, table.name
    finally:
        session.stop()


def test_ingest_to_parquet_writes_every_table_too(tmp_path):
    import polars as pl

    out = tmp_path / "out"
    assert ingest_to_parquet([SAMPLES], out).ok
    for table in TABLES:
        frame = pl.read_parquet(f"{out / table.name}/")  # fails on a table without files
        assert dict(frame.schema) == dict(pl.from_arrow(_declared(table).empty_table()).schema)
    assert pl.read_parquet(f"{out / 'labels'}/").height == 0


def test_cli_export_takes_its_directory_as_o_like_plot_and_report(fleet_db, tmp_path):
    """`export -o DIR` as `plot -o` and `report -o`; the positional form still works."""
    runner = CliRunner()
    by_option = tmp_path / "by-option"
    result = runner.invoke(
        main, ["export", "-o", str(by_option), "--db", str(fleet_db), "--tables", "modules"]
    )
    assert result.exit_code == 0, result.output
    positional = tmp_path / "positional"
    result = runner.invoke(
        main, ["export", str(positional), "--db", str(fleet_db), "--tables", "modules"]
    )
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in by_option.iterdir()) == sorted(
        p.name for p in positional.iterdir()
    )
    assert (by_option / "modules").is_dir()
    result = runner.invoke(main, ["export", "--db", str(fleet_db)])
    assert result.exit_code == 2 and "-o DIR" in result.output
    result = runner.invoke(main, ["export", str(positional), "-o", str(by_option)])
    assert result.exit_code == 2 and "give one" in result.output


def test_module_targets_in_a_dataset_as_in_the_warehouse(tmp_path):
    """ingest --to-parquet reads each module's target files as ingest does (module_targets,
    in the module's partition), export writes the warehouse's, and attach keeps the row of
    the kept copy only: two datasets of the same sweep compiles answer `fits` as the
    warehouse does."""
    sweep = DATA / "jax012" / "sweep"
    compiles = {
        sweep / "v5e_1x1" / "batch=262144": "v5e:1x1",
        sweep / "v5e_1x1" / "batch=524288": "v5e:1x1",  # an E1000
        sweep / "gpu_h100" / "batch=262144": "gpu:h100",
    }
    db = tmp_path / "w.duckdb"
    for day in ("day1", "day2"):
        for directory, target in compiles.items():
            labels = {"topology": target, "batch": directory.name.split("=")[1]}
            if day == "day1":
                assert bufferhouse.ingest([directory], db=db, jobs=1, labels=labels).ok
            assert ingest_to_parquet([directory], tmp_path / day, jobs=1, labels=labels).ok
    columns = "platform, device_kind, chips, capacity_bytes, capacity_source, files"
    want = bufferhouse.sql(
        f"SELECT m.content_hash, {columns} FROM module_targets JOIN modules AS m USING"
        " (module_id) ORDER BY 1",
        db=db,
    ).to_pylist()
    assert [(r["device_kind"], r["capacity_source"]) for r in sorted(want, key=repr)] == sorted(
        [("NVIDIA H100 80GB HBM3", "dump"), ("TPU v5 lite", "table")], key=repr
    )
    raw = read_table(tmp_path / "day1", "module_targets")
    assert raw.num_rows == 2
    assert all(
        p.parent.name.startswith("run_id=")
        for p in (tmp_path / "day1" / "module_targets").rglob("*.parquet")
    )
    export_warehouse(tmp_path / "exported", db)
    attached = tmp_path / "a.duckdb"
    attach(str(tmp_path / "day*"), attached)
    exported = tmp_path / "e.duckdb"
    attach(tmp_path / "exported", exported)
    for other in (attached, exported):
        got = bufferhouse.sql(
            f"SELECT m.content_hash, {columns} FROM module_targets JOIN modules AS m USING"
            " (module_id) ORDER BY 1",
            db=other,
        ).to_pylist()
        assert got == want  # one row per module: day2's copies are dropped with their module
        assert (
            bufferhouse.query("fits", db=other).to_pylist()
            == bufferhouse.query("fits", db=db).to_pylist()
        )
