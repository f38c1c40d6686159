"""`bufferhouse check`: a clean warehouse passes; each kind of damage is named."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

import bufferhouse
from bufferhouse.check import check_warehouse
from bufferhouse.cli import main
from tests.conftest import SAMPLES

# One damaging statement per check: (what it does, SQL, check that must fail, message part).
DAMAGE = [
    (
        "a foreign view",  # issue 41 item 6: a crafted warehouse's view reads a file
        "CREATE VIEW hostname AS SELECT * FROM read_text('/etc/hostname')",
        "foreign objects",
        "view hostname is not one of bufferhouse's",
    ),
    (
        "a foreign macro",
        "CREATE MACRO bh_exfiltrate(p) AS TABLE SELECT * FROM read_text(p)",
        "foreign objects",
        "macro bh_exfiltrate is not one of bufferhouse's",
    ),
    (
        "derived row stale",
        "UPDATE space_totals SET temp_bytes = temp_bytes + 1"
        " WHERE module_id = (SELECT min(module_id) FROM space_totals"
        " WHERE module_id IN (SELECT module_id FROM space_totals GROUP BY 1 HAVING count(*) = 1))",
        "derived values",
        "space_totals: 2 rows differ from a recomputation",
    ),
    (
        "lost rows",
        "DELETE FROM live_ranges WHERE module_id = (SELECT min(module_id) FROM modules)"
        " AND start_time = 0",
        "modules complete",
        "were written at ingest",
    ),
    (
        "row_counts without a table",
        "UPDATE modules SET row_counts = map_from_entries([('allocations', 1)])"
        " WHERE module_id = (SELECT min(module_id) FROM modules)",
        "modules complete",
        "row_counts records tables",
    ),
    (
        "allocation_count off",
        "UPDATE modules SET allocation_count = allocation_count + 1",
        "modules complete",
        "modules.allocation_count",
    ),
    (
        "allocation grown",
        "UPDATE allocations SET size = size + 1 WHERE allocation_index = 0",
        "total bytes",
        "but the allocations add up to",
    ),
    (
        "value past its allocation",
        "UPDATE assignments SET byte_offset = byte_offset + 1000000000",
        "assignments in bounds",
        "of allocation",
    ),
    (
        "allocation index twice",
        "UPDATE allocations SET allocation_index = 0 WHERE allocation_index = 1",
        "allocations well formed",
        "allocation index 0 is listed 2 times",
    ),
    (
        "allocation size negative",
        "UPDATE allocations SET size = -8 WHERE allocation_index = 0",
        "allocations well formed",
        "allocation 0 has size -8, which is negative",
    ),
    (
        "value id twice",
        "INSERT INTO hlo_values SELECT * FROM hlo_values"
        " WHERE module_id = (SELECT max(module_id) FROM modules) LIMIT 1",
        "values well formed",
        "is listed 2 times",
    ),
    (
        "ShapeIndex negative",
        "UPDATE hlo_values SET shape_index = '{0,-1}'"
        " WHERE value_id = (SELECT min(value_id) FROM hlo_values)",
        "values well formed",
        "has ShapeIndex {0,-1}, with a negative element",
    ),
    (
        "value assigned twice",
        "INSERT INTO assignments SELECT * FROM assignments"
        " WHERE module_id = (SELECT max(module_id) FROM modules) LIMIT 1",
        "assignments in bounds",
        "is assigned 2 times",
    ),
    (
        "peak entry lost",
        "DELETE FROM peak_values WHERE ordinal = 0",
        "peak list",
        "live at the peak time but not printed",
    ),
    (
        "cumulative off",
        "UPDATE peak_values SET cumulative_bytes = cumulative_bytes + 1 WHERE ordinal = 1",
        "peak list",
        "running sum",
    ),
    (
        "logical peak off",
        "UPDATE modules SET logical_peak_bytes = logical_peak_bytes + 1",
        "peak list",
        "logical_peak_bytes",
    ),
    (
        "schedule cut",
        "UPDATE modules SET schedule_length = schedule_length + 1",
        "schedule",
        "sequence rows",
    ),
    (
        "heap peak off",
        "UPDATE heap_peaks SET heap_peak_bytes = heap_peak_bytes + 1",
        "heap peaks",
        "is not indefinite + temp peak",
    ),
    (
        "module row lost",
        "DELETE FROM modules WHERE module_id = (SELECT min(module_id) FROM modules)",
        "orphans",
        "rows of a missing module",
    ),
    (
        "diagnostics of a missing module",
        "INSERT INTO diagnostics VALUES (1, 42, 'x.txt', 1, 'warning', 'w', NULL, NULL)",
        "orphans",
        "diagnostics of a missing module",
    ),
    (
        "labels of a missing module",
        "INSERT INTO labels VALUES (42, 'k', 'v')",
        "orphans",
        "labels rows of a missing module",
    ),
    (
        "module id shared",
        "UPDATE modules SET module_id = (SELECT max(module_id) FROM modules)"
        " WHERE module_id = (SELECT min(module_id) FROM modules)",
        "module ids",
        "module_id is shared by 2 modules",
    ),
    (
        "rows out of id order",
        "INSERT INTO uses SELECT * FROM uses"
        " WHERE module_id = (SELECT min(module_id) FROM modules)",
        "module ids",
        "uses rows lie before rows of module",
    ),
    (
        "schema version",
        "UPDATE schema_info SET value = '99' WHERE key = 'schema_version'",
        "schema",
        "schema version 99",
    ),
    ("a table dropped", "DROP TABLE stack_trace", "schema", "table stack_trace is missing"),
]


@pytest.fixture
def copy_of(tmp_path):
    def make(db: Path) -> Path:
        target = tmp_path / "copy.duckdb"
        shutil.copy(db, target)
        return target

    return make


def test_clean_warehouse_passes(fleet_db):
    report = check_warehouse(fleet_db)
    assert report.ok, report.lines()
    assert report.modules > 190
    assert all(count == 0 for count in report.checks.values())
    assert len(report.checks) == 16


@pytest.mark.parametrize(("what", "sql", "check", "message"), DAMAGE, ids=[d[0] for d in DAMAGE])
def test_damage_is_found(samples_db, copy_of, what, sql, check, message):
    db = copy_of(samples_db)
    with duckdb.connect(str(db)) as con:
        con.execute(sql)
    report = check_warehouse(db)
    assert not report.ok
    assert report.checks[check] > 0, report.lines()
    assert any(message in p.message for p in report.problems if p.check == check), report.lines()


def test_cli_exit_codes_and_report(samples_db, copy_of):
    runner = CliRunner()
    ok = runner.invoke(main, ["check", "--db", str(samples_db)])
    assert ok.exit_code == 0, ok.output
    assert "warehouse is consistent" in ok.stdout
    db = copy_of(samples_db)
    with duckdb.connect(str(db)) as con:
        con.execute(DAMAGE[6][1])  # total bytes
    bad = runner.invoke(main, ["check", "--db", str(db)])
    assert bad.exit_code == 1
    assert "FAIL total bytes: 5" in bad.stdout
    assert "module 003_186bba49641ec33a (" in bad.stdout
    missing = runner.invoke(main, ["check", "--db", str(db.with_name("nope.duckdb"))])
    assert missing.exit_code == 2
    assert "no warehouse at" in missing.stderr


def test_empty_file_is_an_empty_warehouse(tmp_path):
    db = tmp_path / "new.duckdb"
    duckdb.connect(str(db)).close()
    report = check_warehouse(db)
    assert report.ok and report.empty


def test_zero_byte_file_is_an_empty_warehouse(tmp_path):
    """What a full disk (or a kill at that instant) leaves when DuckDB creates the file."""
    db = tmp_path / "zero.duckdb"
    db.touch()
    assert check_warehouse(db).empty
    result = CliRunner().invoke(main, ["query", "modules", "--db", str(db)])
    assert result.exit_code == 2
    assert "is empty (0 bytes)" in result.stderr
    assert bufferhouse.ingest(SAMPLES, db=db, jobs=1).ok
    assert check_warehouse(db).modules == 5


def test_check_opens_read_only(samples_db):
    """Two checks and a reader at once: nobody takes the write lock."""
    with duckdb.connect(str(samples_db), read_only=True):
        assert check_warehouse(samples_db).ok
        assert check_warehouse(samples_db).ok


def test_every_check_statement_is_documented_and_used():
    """check/sql/*.sql: each file parses with the one loader (description, every
    parameter and output column documented) and some check runs it."""
    import inspect

    from bufferhouse.check import rules
    from bufferhouse.queries import sql_files

    found = sql_files("bufferhouse.check", "sql", "check")
    assert len(found) >= 20
    source = inspect.getsource(rules) + inspect.getsource(sys.modules["bufferhouse.check"])
    for name, statement in found.items():
        assert statement.description and statement.columns, name
        assert f'"{name}"' in source, f"{name}.sql is run by no check"
