"""`sql` and `query` see only the warehouse (issue 21): no files, network or extensions."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import bufferhouse
from bufferhouse.cli import main
from bufferhouse.errors import QueryError, WarehouseError
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
    refused = "statements are refused: the warehouse is sealed"
    return {
        f"COPY modules TO '{tmp_path / 'out.csv'}'": "COPY " + refused,
        f"EXPLAIN ANALYZE COPY modules TO '{tmp_path / 'out.csv'}'": "EXPLAIN of a statement",
        "SELECT * FROM read_text('/etc/hostname')": "file system operations are disabled",
        f"SELECT * FROM read_parquet('{own_parquet}')": "file system operations are disabled",
        "SELECT * FROM glob('/etc/*')": "file system operations are disabled",
        f"ATTACH '{tmp_path / 'other.duckdb'}' AS other": "ATTACH " + refused,
        "INSTALL httpfs": "LOAD " + refused,
        "LOAD httpfs": "LOAD " + refused,
        "SELECT * FROM read_csv('https://example.com/x.csv')": "file system operations are disabled",
        "SET enable_external_access = true": "SET " + refused,
        "SET lock_configuration = false": "SET " + refused,
    }


def test_the_seal_holds_below_the_statement_check(samples_db, tmp_path):
    """DuckDB itself refuses on a sealed connection what the statement check refuses first."""
    with connect_sealed(samples_db) as con:
        for sql, reason in {
            f"COPY modules TO '{tmp_path / 'out.csv'}'": "file system operations are disabled",
            f"ATTACH '{tmp_path / 'other.duckdb'}' AS other": "file system operations are disabled",
            "SET enable_external_access = true": "the configuration has been locked",
            "SET lock_configuration = false": "the configuration has been locked",
        }.items():
            with pytest.raises(duckdb.Error, match=reason):
                con.execute(sql)
    assert list(tmp_path.iterdir()) == []


def test_every_way_out_fails_with_a_clear_message(samples_db, tmp_path, own_parquet):
    for sql, reason in attempts(tmp_path, own_parquet).items():
        result = run("sql", sql, "--db", samples_db)
        assert result.exit_code == 2, (sql, result.output)
        assert result.stderr.startswith("bufferhouse: error: "), sql
        assert reason in result.stderr, (sql, result.stderr)
        if "Permission Error" in result.stderr or "refused" in result.stderr:
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


def forged(db, attached_from: str):
    """A warehouse file whose schema_info says what an attacker likes."""
    from bufferhouse.schema.tables import SCHEMA_VERSION

    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE schema_info (key VARCHAR, value VARCHAR)")
        con.execute(
            "INSERT INTO schema_info VALUES ('schema_version', ?), ('attached_from', ?)",
            [str(SCHEMA_VERSION), attached_from],
        )
    return db


def test_a_views_warehouse_cannot_write_its_dataset(samples_db, tmp_path):
    """Issue 31: COPY TO into the dataset's folders overwrote its files."""
    out, views = tmp_path / "dataset", tmp_path / "views.duckdb"
    assert run("export", out, "--db", samples_db).exit_code == 0
    assert run("attach", out, "--db", views).exit_code == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    (target,) = (out / "modules").glob("*/*.parquet")
    for sql in (
        f"COPY (SELECT 1 AS x) TO '{target}' (FORMAT parquet, USE_TMP_FILE false)",
        f"COPY (SELECT 1 AS x) TO '{out / 'modules' / 'new.parquet'}'",
        f"EXPLAIN ANALYZE COPY (SELECT 1 AS x) TO '{target}' (USE_TMP_FILE false)",
    ):
        result = run("sql", sql, "--db", views)
        assert result.exit_code == 2 and "refused: the warehouse is sealed" in result.stderr, sql
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    # beside the dataset's folders, DuckDB refuses too
    with connect_sealed(views) as con, pytest.raises(duckdb.PermissionException):
        con.execute(f"COPY (SELECT 1 AS x) TO '{out / 'evil.parquet'}'")
    top = run("query", "top-modules", "--db", views, "-f", "csv")
    assert top.exit_code == 0 and len(top.stdout.splitlines()) == 1 + 5, top.output
    explained = bufferhouse.sql("EXPLAIN SELECT count(*) FROM modules", views)
    assert explained.num_rows == 1


@pytest.mark.parametrize("source", ["/", "/etc", "https://example.invalid/fleet"])
def test_a_forged_attached_from_does_not_lift_the_seal(tmp_path, source):
    """Issue 31: `attached_from = '/'` (or a URL) in a file's own schema_info lifted
    the seal: sql read /etc/hostname and wrote files."""
    db = forged(tmp_path / "forged.duckdb", source)
    if "://" not in source:
        with pytest.raises(WarehouseError, match="is not a bufferhouse Parquet dataset"):
            connect_sealed(db)
        return
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    with connect_sealed(db) as con:
        for sql in (
            "SELECT * FROM read_text('/etc/hostname')",
            f"SELECT * FROM read_text('{secret}')",
            "SELECT * FROM read_csv('https://other.invalid/x.csv')",
            f"COPY (SELECT 1) TO '{tmp_path / 'out.csv'}'",
        ):
            with pytest.raises(duckdb.PermissionException, match="operations are disabled"):
                con.execute(sql)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["forged.duckdb", "secret.txt"]


def test_a_forged_source_reads_only_table_folders(tmp_path):
    """A source that has a table folder opens, and still reads nothing else under it."""
    (tmp_path / "modules").mkdir()
    (tmp_path / "secret.txt").write_text("secret")
    db = forged(tmp_path / "forged.duckdb", str(tmp_path))
    with connect_sealed(db) as con:
        for path in (tmp_path / "secret.txt", f"{tmp_path}/modules/../secret.txt"):
            with pytest.raises(duckdb.PermissionException, match="operations are disabled"):
                con.execute(f"SELECT * FROM read_text('{path}')")


def test_a_views_warehouse_over_a_url_reads_only_that_url(tmp_path):
    """Its extension (httpfs) reads the dataset's folders at the URL; external access is
    off all the same. (Only the settings are checked: no network here.)"""
    db = forged(tmp_path / "remote.duckdb", "https://example.invalid/fleet")
    with connect_sealed(db) as con:
        settings = dict(
            con.sql(
                "SELECT name, value FROM duckdb_settings() WHERE name IN ("
                "'enable_external_access', 'lock_configuration', 'autoinstall_known_extensions')"
            ).fetchall()
        )
        (allowed,) = con.sql("SELECT current_setting('allowed_directories')").fetchall()[0]
    assert settings == {
        "enable_external_access": "false",
        "lock_configuration": "true",
        "autoinstall_known_extensions": "false",
    }
    assert "https://example.invalid/fleet/modules/" in allowed


def test_sealed_uses_do_not_touch_other_connections(samples_db):
    """Each sealed use is a DuckDB instance of its own: a connection the caller holds
    keeps its configuration, and sql then query in one process both run."""
    with bufferhouse.connect(samples_db, allow_files=True) as mine:
        assert bufferhouse.sql("SELECT count(*) AS n FROM modules", samples_db)["n"][0].as_py() == 5
        assert bufferhouse.query("top-modules", samples_db).num_rows == 5
        (external,) = mine.sql("SELECT current_setting('enable_external_access')").fetchall()[0]
    assert external is True


def test_connect_runs_a_crafted_view_without_file_access(samples_db, tmp_path):
    """A warehouse whose view reads /etc/hostname: bufferhouse.connect() (read-only, the
    documented API) is sealed, so the view fails with DuckDB's permission error instead
    of returning the file (issue 41 item 6); allow_files=True opens it as the shell does."""
    import shutil

    crafted = tmp_path / "crafted.duckdb"
    shutil.copy(samples_db, crafted)
    with duckdb.connect(str(crafted)) as con:
        con.execute("CREATE VIEW hostname AS SELECT content FROM read_text('/etc/hostname')")
    with bufferhouse.connect(crafted) as con, pytest.raises(duckdb.PermissionException):
        con.execute("SELECT * FROM hostname").fetchall()
    with bufferhouse.connect(crafted) as con:
        assert con.execute("SELECT count(*) FROM modules").fetchone() == (5,)
    with bufferhouse.connect(crafted, allow_files=True) as con:
        assert con.execute("SELECT count(*) FROM hostname").fetchone() == (1,)
