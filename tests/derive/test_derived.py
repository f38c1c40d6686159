"""The derived tables written at ingest hold exactly what the base tables define.

Each oracle below recomputes a derived table the slow, obvious way (over the
value_facts view, windows instead of aggregates), independent of the
statements in bufferhouse/schema/derive/*.sql; every fixture warehouse must match.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

import bufferhouse
from bufferhouse import queries
from bufferhouse.check import check_warehouse
from bufferhouse.schema import DERIVED_TABLES, MODULE_TABLES, SCHEMA_VERSION
from bufferhouse.schema.derive import derived_tables
from bufferhouse.schema.warehouse import schema_version
from tests.conftest import CORPUS, DATA, SAMPLES

#: The heap-peak membership rule, windows over each allocation's values: a temp value
#: whose live range covers the peak step (the fixtures here are text dumps); each
#: indefinite allocation once, its largest value, whatever its values' ranges say.
_PEAK_BUFFERS = """
WITH facts AS (
  SELECT f.*, p.peak_time,
    f.category = 'temp' AND p.peak_time IS NOT NULL AND (
      f.start_time IS NULL OR p.peak_time BETWEEN f.start_time AND f.end_time) AS live_at_peak
  FROM value_facts AS f
  JOIN heap_peaks AS p ON p.module_id = f.module_id AND p.color = f.color
),
ranked AS (
  SELECT *,
    row_number() OVER (
      PARTITION BY module_id, allocation_index ORDER BY size DESC, value_id) AS size_rank
  FROM facts
)
SELECT module_id, color, peak_time, value_id, allocation_index, category, size,
  logical_bytes, live_at_peak
FROM ranked
WHERE (live_at_peak AND NOT shape LIKE '(%')
  OR (category <> 'temp' AND size_rank = 1)
"""

ORACLES = {
    "heap_peak_buffers": _PEAK_BUFFERS,
    "heap_peak_sources": f"""
        SELECT b.module_id, b.color, f.op_name, f.source_file, f.source_line,
          count(*), sum(b.size), sum(b.logical_bytes)
        FROM ({_PEAK_BUFFERS}) AS b
        JOIN value_facts AS f USING (module_id, value_id)
        GROUP BY ALL""",
    "space_totals": """
        WITH slices AS (
          SELECT module_id, color, size, max(logical_bytes) AS logical_bytes
          FROM value_facts GROUP BY module_id, color, allocation_index, byte_offset, size)
        SELECT a.module_id, a.color, sum(a.size),
          sum(CASE WHEN is_parameter THEN a.size ELSE 0 END),
          sum(CASE WHEN is_maybe_live_out THEN a.size ELSE 0 END),
          sum(CASE WHEN is_parameter AND is_maybe_live_out THEN a.size ELSE 0 END),
          sum(CASE WHEN is_constant THEN a.size ELSE 0 END),
          sum(CASE WHEN is_thread_local THEN a.size ELSE 0 END),
          sum(CASE WHEN is_preallocated_temp THEN a.size ELSE 0 END),
          (SELECT count(*) FROM slices s WHERE s.module_id = a.module_id AND s.color = a.color),
          (SELECT sum(size) FROM slices s WHERE s.module_id = a.module_id AND s.color = a.color),
          (SELECT sum(logical_bytes) FROM slices s
           WHERE s.module_id = a.module_id AND s.color = a.color)
        FROM allocations AS a GROUP BY a.module_id, a.color""",
    "padded_values": """
        SELECT module_id, value_id, instruction, shape_index, allocation_index, category, color,
          shape, op_name, size, logical_bytes, padding_bytes
        FROM value_facts WHERE padding_bytes > 0""",
}

assert set(ORACLES) == {t.name for t in DERIVED_TABLES}


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple]:
    return sorted((tuple(r) for r in con.execute(sql).fetchall()), key=repr)


def assert_derived_match_oracles(db: Path | str) -> None:
    with duckdb.connect(str(db), read_only=True) as con:
        queries.use_package_views(con)
        for name, oracle in ORACLES.items():
            stored = _rows(con, f'SELECT * FROM "{name}"')
            assert stored == _rows(con, oracle), name


@pytest.fixture(scope="module")
def edge_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("edge") / "edge.duckdb"
    bufferhouse.ingest([DATA / "edge"], db=db, jobs=1)
    return db


@pytest.mark.parametrize("fixture", ["fleet_db", "samples_db", "edge_db"])
def test_derived_tables_equal_their_oracles(fixture, request):
    db = request.getfixturevalue(fixture)
    assert_derived_match_oracles(db)
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM heap_peak_buffers").fetchone()[0] > 0


def test_warehouse_free_derivation_equals_the_warehouse(fleet_db):
    """derived_tables (Parquet parts, Spark) over a module's Arrow rows = the stored rows."""
    with duckdb.connect(str(fleet_db), read_only=True) as con:
        ids = [r[0] for r in con.execute("SELECT module_id FROM modules ORDER BY 1").fetchall()]
        for module_id in ids[:: max(1, len(ids) // 12)]:
            base = {
                t.name: con.sql(
                    f'SELECT * FROM "{t.name}" WHERE module_id = {int(module_id)}'
                ).to_arrow_table()
                for t in MODULE_TABLES
            }
            got = derived_tables(base)
            for table in DERIVED_TABLES:
                want = con.execute(
                    f'SELECT * FROM "{table.name}" WHERE module_id = ?', [module_id]
                ).fetchall()
                rows = [tuple(r.values()) for r in got[table.name].to_pylist()]
                assert sorted(rows, key=repr) == sorted(want, key=repr), (table.name, module_id)


@pytest.mark.slow
def test_a_writer_upgrades_version_2_in_place(tmp_path):
    db = tmp_path / "v2.duckdb"
    assert bufferhouse.ingest([SAMPLES, CORPUS / "jax-0.7.2"], db=db, jobs=1).ok
    with duckdb.connect(str(db)) as con:
        before = {t.name: _rows(con, f'SELECT * FROM "{t.name}"') for t in DERIVED_TABLES}
        for table in DERIVED_TABLES:
            con.execute(f'DROP TABLE "{table.name}"')
        con.execute("UPDATE schema_info SET value = '2' WHERE key = 'schema_version'")
    bufferhouse.connect(db, read_only=False).close()
    with duckdb.connect(str(db), read_only=True) as con:
        assert schema_version(con) == SCHEMA_VERSION
        for name, rows in before.items():
            assert _rows(con, f'SELECT * FROM "{name}"') == rows, name
    assert check_warehouse(db).ok, check_warehouse(db).lines()


def test_upgrade_fill_in_small_ranges_equals_ingest(fleet_db, tmp_path):
    """derive_all works in id ranges; ranges of a few modules give the same rows."""
    import shutil

    from bufferhouse.schema.derive import derive_all

    db = tmp_path / "copy.duckdb"
    shutil.copy(fleet_db, db)
    with duckdb.connect(str(db)) as con:
        before = {t.name: _rows(con, f'SELECT * FROM "{t.name}"') for t in DERIVED_TABLES}
        derive_all(con, max_rows=200)
        for name, rows in before.items():
            assert _rows(con, f'SELECT * FROM "{name}"') == rows, name


def test_each_derived_table_has_one_documented_statement_file():
    """schema/derive/<table>.sql: one per derived table, documented like every .sql
    file of the package (the queries' header format), reading exactly $lo and $hi."""
    from importlib import resources

    from bufferhouse.schema.derive import STATEMENTS

    folder = resources.files("bufferhouse.schema").joinpath("derive")
    files = sorted(e.name for e in folder.iterdir() if e.name.endswith(".sql"))
    assert files == sorted(f"{t.name}.sql" for t in DERIVED_TABLES)
    assert list(STATEMENTS) == [t.name for t in DERIVED_TABLES]  # the order they run in
    for name, text in STATEMENTS.items():
        statement = queries.parse_query_file(text, f"derive/{name}.sql")
        assert statement.name == name and statement.description
        assert sorted(p.name for p in statement.params) == ["hi", "lo"]
