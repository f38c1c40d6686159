"""`sql` and `query` see only the warehouse (issue 21): no files, network or extensions."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import bufferhouse
from bufferhouse.cli import main
from bufferhouse.errors import QueryError
from bufferhouse.schema.warehouse import connect_sealed


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def own_parquet(tmp_path):
    path = tmp_path / "mine.parquet"
    pq.write_table(pa.table({"x": [1, 2, 3]}), path)
    return path


def attempts(tmp_path, own_parquet) -> dict[str, str]:
    """What an attacker (or a curious user) tries -> what the error must mention."""
    return {
        f"COPY modules TO '{tmp_path / 'out.csv'}'": "file system operations are disabled",
        "SELECT * FROM read_text('/etc/hostname')": "file system operations are disabled",
        f"SELECT * FROM read_parquet('{own_parquet}')": "file system operations are disabled",
        "SELECT * FROM glob('/etc/*')": "file system operations are disabled",
        f"ATTACH '{tmp_path / 'other.duckdb'}' AS other": "file system operations are disabled",
        "INSTALL httpfs": "Permission Error",
        "LOAD httpfs": "Permission Error",
        "SELECT * FROM read_csv('https://example.com/x.csv')": "file system operations are disabled",
        "SET enable_external_access = true": "the configuration has been locked",
        "SET lock_configuration = false": "the configuration has been locked",
    }


def test_every_way_out_fails_with_a_clear_message(samples_db, tmp_path, own_parquet):
    for sql, reason in attempts(tmp_path, own_parquet).items():
        result = run("sql", sql, "--db", samples_db)
        assert result.exit_code == 2, (sql, result.output)
        assert result.stderr.startswith("bufferhouse: error: "), sql
        assert reason in result.stderr, (sql, result.stderr)
        if "Permission Error" in result.stderr:
            assert "--allow-files" in result.stderr, sql
        with pytest.raises(QueryError, match=reason):
            bufferhouse.sql(sql, samples_db)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.parquet"]  # nothing written


def test_allow_files_reads_and_writes_your_own_files(samples_db, tmp_path, own_parquet):
    result = run(
        "sql",
        f"SELECT sum(x) AS s FROM '{own_parquet}'",
        "--db",
        samples_db,
        "--allow-files",
        "-f",
        "csv",
    )
    assert result.exit_code == 0 and result.stdout == "s\n6\n"
    out = tmp_path / "modules.csv"
    result = run("sql", f"COPY modules TO '{out}'", "--db", samples_db, "--allow-files")
    assert result.exit_code == 0 and len(out.read_text().splitlines()) == 1 + 5
    joined = bufferhouse.sql(
        f"SELECT count(*) AS n FROM modules, '{own_parquet}'", samples_db, allow_files=True
    )
    assert joined.to_pylist() == [{"n": 15}]


def test_canned_queries_run_sealed(samples_db):
    """`query` opens the warehouse the same way and needs nothing outside it."""
    with connect_sealed(samples_db) as con:
        settings = dict(
            con.sql(
                "SELECT name, value FROM duckdb_settings() WHERE name IN ("
                "'enable_external_access', 'lock_configuration', "
                "'autoinstall_known_extensions', 'autoload_known_extensions')"
            ).fetchall()
        )
    assert settings == {
        "enable_external_access": "false",
        "lock_configuration": "true",
        "autoinstall_known_extensions": "false",
        "autoload_known_extensions": "false",
    }
    result = run("query", "top-modules", "--db", samples_db, "-f", "csv")
    assert result.exit_code == 0 and len(result.stdout.splitlines()) == 1 + 5


def test_a_views_warehouse_reads_its_dataset_and_nothing_else(samples_db, tmp_path):
    out, views = tmp_path / "dataset", tmp_path / "views.duckdb"
    assert run("export", out, "--db", samples_db).exit_code == 0
    assert run("attach", out, "--db", views).exit_code == 0
    counted = run("sql", "SELECT count(*) AS n FROM modules", "--db", views, "-f", "csv")
    assert counted.exit_code == 0 and counted.stdout == "n\n5\n", counted.output
    outside = run("sql", "SELECT * FROM read_text('/etc/hostname')", "--db", views)
    assert outside.exit_code == 2 and "file system operations are disabled" in outside.stderr
    beside = tmp_path / "beside.parquet"
    pq.write_table(pa.table({"x": [1]}), beside)
    other = run("sql", f"SELECT * FROM '{beside}'", "--db", views)
    assert other.exit_code == 2, other.output  # the dataset's folder only, not its parent


def test_a_views_warehouse_over_a_url_keeps_the_network(tmp_path):
    """Its extension (httpfs) reads the dataset: external access stays on, the rest is
    sealed. (Only the settings are checked: no network here.)"""
    import duckdb

    from bufferhouse.schema.tables import SCHEMA_VERSION

    db = tmp_path / "remote.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE schema_info (key VARCHAR, value VARCHAR)")
        con.execute(
            "INSERT INTO schema_info VALUES ('schema_version', ?), "
            "('attached_from', 'https://example.invalid/fleet')",
            [str(SCHEMA_VERSION)],
        )
    with connect_sealed(db) as con:
        settings = dict(
            con.sql(
                "SELECT name, value FROM duckdb_settings() WHERE name IN ("
                "'enable_external_access', 'lock_configuration', 'autoinstall_known_extensions')"
            ).fetchall()
        )
    assert settings == {
        "enable_external_access": "true",
        "lock_configuration": "true",
        "autoinstall_known_extensions": "false",
    }
