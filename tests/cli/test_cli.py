"""The command line: exit codes, summaries, renderers, and the plain duckdb shell."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

import bufferhouse
from bufferhouse.cli import main
from tests.conftest import SAMPLES


def run(*args: str, **kwargs):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, **kwargs)


def test_ingest_summary_and_exit_code(tmp_path):
    db = tmp_path / "w.duckdb"
    result = run("ingest", SAMPLES, "--db", db, "-q")
    assert result.exit_code == 0, result.output
    assert "5 loaded, 0 already present, 0 failed" in result.stderr
    again = run("ingest", SAMPLES, "--db", db, "-q")
    assert "0 loaded, 5 already present, 0 failed" in again.stderr


def test_ingest_reports_failures_and_loads_the_rest(tmp_path, scratch):
    (scratch / "broken-buffer-assignment.txt").write_text(
        "BufferAssignment:\nallocation 0: size x:\n"
    )
    db = tmp_path / "w.duckdb"
    result = run("ingest", scratch, "--db", db, "-q")
    assert result.exit_code == 1
    assert "5 loaded, 0 already present, 1 failed" in result.stderr
    assert "broken-buffer-assignment.txt:2: expected 'allocation N: size S" in result.stderr
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM modules").fetchone()[0] == 5
        diag = con.execute("SELECT line, severity, message FROM diagnostics").fetchall()
    assert diag == [(2, "error", "expected 'allocation N: size S[, attributes]:'")]


def test_strict_stops_at_first_failure(tmp_path, scratch):
    # The largest module is parsed first, so the broken one is made the largest.
    largest = max(p.stat().st_size for p in scratch.rglob("*.txt"))
    (scratch / "000_broken-buffer-assignment.txt").write_text("garbage\n" * (largest // 8 + 1))
    result = run("ingest", scratch, "--db", tmp_path / "w.duckdb", "--strict", "-j", "1", "-q")
    assert result.exit_code == 1
    assert "stopped at the first failure" in result.stderr


def test_labels_and_env_default_db(tmp_path, monkeypatch):
    db = tmp_path / "env.duckdb"
    monkeypatch.setenv("BUFFERHOUSE_DB", str(db))
    assert run("ingest", SAMPLES, "--label", "jax=0.7.2", "-q").exit_code == 0
    assert run("ingest", SAMPLES, "--label", "model=demo", "-q").exit_code == 0
    out = run("query", "modules", "--param", "label=model=demo", "--format", "csv").stdout
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 5
    assert {r["labels"] for r in rows} == {"jax=0.7.2,model=demo"}


def test_a_label_nothing_carries_is_an_error_that_names_the_near_ones(samples_db, tmp_path):
    """A typo in a label filter was an empty result, like a module name's."""
    db = tmp_path / "w.duckdb"
    assert run("ingest", SAMPLES, "--db", db, "--label", "jax=0.7.2", "-q").exit_code == 0
    for typo, said in (("jax=0.7.3", "did you mean jax=0.7.2"), ("jax:0.7.2", "key=value")):
        result = run("query", "top-modules", "--db", db, "--param", f"label={typo}")
        assert result.exit_code == 1 and said in result.stderr, result.output
    result = run("query", "oom-events", "--db", samples_db, "--param", "label=jax=0.7.2")
    assert result.exit_code == 1 and "holds 0 labels" in result.stderr


def test_bad_label_is_a_usage_error(tmp_path):
    result = run("ingest", SAMPLES, "--db", tmp_path / "w.duckdb", "--label", "nolabel")
    assert result.exit_code == 2
    assert "key=value" in result.stderr


def test_query_formats(samples_db):
    for fmt in ("table", "csv", "json", "markdown"):
        result = run("query", "top-modules", "--db", samples_db, "--format", fmt)
        assert result.exit_code == 0, result.output
        assert "003_186bba49641ec33a" in result.stdout
    lines = run("query", "top-modules", "--db", samples_db, "-f", "json").stdout.splitlines()
    assert json.loads(lines[0])["rank"] == 1
    assert len(lines) == 5


def test_query_to_parquet_file(samples_db, tmp_path):
    import pyarrow.parquet as pq

    out = tmp_path / "peak.parquet"
    result = run(
        "query", "peak-buffers", "--db", samples_db, "-p", "module=003_186bba49641ec33a", "-o", out
    )
    assert result.exit_code == 0
    assert pq.read_table(out).equals(
        bufferhouse.query("peak-buffers", db=samples_db, module="003_186bba49641ec33a")
    )


def test_a_module_id_selects_its_module_as_int_or_text(samples_db):
    with bufferhouse.connect(samples_db) as con:
        module_id = con.execute("SELECT min(module_id) FROM modules").fetchone()[0]
    by_int = bufferhouse.query("modules", db=samples_db, module=module_id)
    assert by_int.num_rows == 1 and by_int["module_id"][0].as_py() == module_id
    assert by_int.equals(bufferhouse.query("modules", db=samples_db, module=str(module_id)))


def test_query_errors_are_messages(samples_db, tmp_path):
    result = run("query", "nope", "--db", samples_db)
    assert result.exit_code == 2
    assert "valid queries:" in result.stderr
    missing = run("query", "modules", "--db", tmp_path / "missing.duckdb")
    assert missing.exit_code == 2
    assert "no warehouse at" in missing.stderr


def test_queries_list_and_show():
    listing = run("queries").stdout
    assert "peak-buffers" in listing and "heap-timeline" in listing
    shown = run("queries", "show", "heap-timeline").stdout
    assert "parameters:" in shown and "FROM bh_heap_timeline(" in shown


def test_sql_command(samples_db):
    out = run("sql", "SELECT count(*) AS n FROM modules", "--db", samples_db, "-f", "csv").stdout
    assert out == "n\n5\n"


def _duckdb_cli() -> str:
    candidates = [Path(sys.executable).parent / "duckdb", shutil.which("duckdb")]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return str(c)
    pytest.fail("the duckdb CLI (pip package duckdb-cli, in the test extra) is not installed")


def test_duckdb_cli_reads_the_warehouse(samples_db, tmp_path):
    """The 1.x shell opens a fresh warehouse and its macros return what `bufferhouse query` does."""
    cli = _duckdb_cli()
    version = subprocess.run([cli, "--version"], capture_output=True, text=True, check=True).stdout
    assert version.startswith("v1."), version
    copy = tmp_path / "copy.duckdb"
    shutil.copy(samples_db, copy)  # the shell must not hold the session's file
    checks = {
        "FROM bh_top_modules(3)": ("top-modules", {"top": 3}),
        "FROM bh_fragmentation('003_186bba49641ec33a')": (
            "fragmentation",
            {"module": "003_186bba49641ec33a"},
        ),
        "FROM bh_peak_buffers(module := '003_186bba49641ec33a')": (
            "peak-buffers",
            {"module": "003_186bba49641ec33a"},
        ),
        "FROM bh_memory_spaces()": ("memory-spaces", {}),
    }
    for sql, (name, params) in checks.items():
        proc = subprocess.run(
            [cli, "-readonly", "-csv", str(copy), "-c", sql], capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stderr
        got = list(csv.reader(io.StringIO(proc.stdout)))
        expected = bufferhouse.query(name, db=copy, **params)
        assert got[0] == expected.column_names
        assert len(got) - 1 == expected.num_rows
        first = ["" if v is None else str(v).lower() for v in expected.to_pylist()[0].values()]
        assert [v.lower() for v in got[1]] == first, sql
    comments = subprocess.run(
        [
            cli,
            "-readonly",
            "-csv",
            str(copy),
            "-c",
            "SELECT comment FROM duckdb_tables() WHERE table_name = 'modules'",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "One row per ingested module" in comments


# --- typos and empty input (issue 18) ------------------------------------------


@pytest.mark.parametrize("name", ["peak-buffers", "heap-timeline", "arena"])
def test_an_unknown_module_is_a_data_error_with_suggestions(name, samples_db):
    result = run("query", name, "-p", "module=003_186bba49641ec33", "--db", samples_db)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "no module matches '003_186bba49641ec33'" in result.stderr
    assert "did you mean 003_186bba49641ec33a?" in result.stderr


def test_a_path_that_does_not_exist_leaves_no_warehouse(tmp_path):
    db = tmp_path / "w.duckdb"
    result = run("ingest", tmp_path / "nope", "--db", db)
    assert result.exit_code == 1
    assert "nope: no such file or directory; nothing was written" in result.stderr
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(bufferhouse.errors.DumpError):
        bufferhouse.ingest(tmp_path / "nope", db)
    assert list(tmp_path.iterdir()) == []


def test_a_missing_path_beside_real_ones_fails_alone(tmp_path):
    result = run("ingest", tmp_path / "nope", SAMPLES, "--db", tmp_path / "w.duckdb", "-q")
    assert result.exit_code == 1
    assert "5 loaded, 0 already present, 1 failed" in result.stderr


def test_a_directory_without_dumps_says_so(tmp_path):
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    (empty / "sub" / "notes.md").write_text("nothing here\n")
    result = run("ingest", empty, "--db", tmp_path / "w.duckdb", "-q")
    assert result.exit_code == 1
    assert f"no XLA dump files or OOM messages found under {empty}" in result.stderr
    assert "loaded" not in result.stderr  # no summary of nothing
    assert not (tmp_path / "w.duckdb").exists()  # and no empty warehouse left behind


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no SQL statement given"),
        ("  -- only a comment", "no SQL statement given"),
        ("SELECT 1; SELECT 2", "the SQL holds 2 statements"),
    ],
)
def test_sql_refuses_none_or_several_statements(text, message, samples_db):
    result = run("sql", text, "--db", samples_db)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert message in result.stderr


def test_sql_one_statement_with_a_trailing_semicolon(samples_db):
    result = run("sql", "SELECT 1 AS one;", "--db", samples_db, "-f", "csv")
    assert result.exit_code == 0 and result.stdout == "one\n1\n"


# --- smaller things (issue 18 item 6) -------------------------------------------


def test_sql_binds_params_as_data(samples_db):
    result = run(
        "sql",
        "SELECT count(*) AS n FROM modules WHERE file_stem = $stem AND total_bytes > $least",
        "-p",
        "stem=003_186bba49641ec33a",
        "--param",
        "least=1000",
        "--db",
        samples_db,
        "-f",
        "csv",
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == "n\n1\n"
    hostile = run(
        "sql",
        "SELECT $x AS x",
        "-p",
        "x=1'); DROP TABLE modules; --",
        "--db",
        samples_db,
        "-f",
        "csv",
    )
    assert hostile.stdout.splitlines()[1] == "1'); DROP TABLE modules; --"
    assert run("sql", "SELECT 1", "-p", "novalue", "--db", samples_db).exit_code == 2


def test_reingest_with_labels_says_it_labelled_them(tmp_path):
    db = tmp_path / "w.duckdb"
    assert run("ingest", SAMPLES, "--db", db, "-q").exit_code == 0
    again = run("ingest", SAMPLES, "--db", db, "-q", "--label", "run=2", "--label", "jax=0.7.2")
    assert "0 loaded, 5 already present (labelled run=2, jax=0.7.2), 0 failed" in again.stderr
    plain = run("ingest", SAMPLES, "--db", db, "-q")
    assert "5 already present, 0 failed" in plain.stderr


def test_human_bytes_and_wide_cells_in_table_output(samples_db):
    exact = run("query", "top-modules", "--db", samples_db, "-f", "table").stdout
    human = run("query", "top-modules", "--db", samples_db, "-f", "table", "-H").stdout
    # total_bytes of the largest sample: `Total bytes used: 4282880` in its dump
    assert "4282880" in exact and "4.1 MiB" not in exact
    assert "4.1 MiB" in human and "4282880" not in human
    ids = run("sql", "SELECT max(module_id) AS m FROM modules", "--db", samples_db, "-f", "csv")
    assert ids.stdout.split()[1] in human  # ids are not bytes
    csv_out = run("query", "top-modules", "--db", samples_db, "-f", "csv", "-H").stdout
    assert "4282880" in csv_out  # csv stays exact


def test_table_cells_are_shortened_to_the_terminal(samples_db, monkeypatch):
    from bufferhouse.cli import options

    monkeypatch.setattr(options, "terminal_width", lambda: 60)
    sql = "SELECT module_name, total_bytes, paths FROM modules ORDER BY 1"
    narrow = run("sql", sql, "--db", samples_db, "-f", "table").stdout
    lines = narrow.splitlines()
    assert all(len(line) <= 60 for line in lines), max(map(len, lines))
    assert "…" in narrow and "4282880" in narrow  # text is shortened, numbers never
    wide = run("sql", sql, "--db", samples_db, "-f", "table", "--wide").stdout
    assert max(map(len, wide.splitlines())) > 60 and "…" not in wide
    to_file = run("sql", sql, "--db", samples_db, "-f", "csv").stdout
    assert "…" not in to_file


def test_progress_shows_bytes_rate_and_a_moving_clock(capsys):
    from types import SimpleNamespace

    from bufferhouse.cli.ingest import Progress

    outcome = SimpleNamespace(
        status="loaded",
        error=None,
        warnings=[],
        bytes_read=3 * 2**20,
        files=SimpleNamespace(stem="module_0001.jit_big"),
    )
    with Progress(quiet=False, interactive=True) as progress:
        progress.TICK = 0.05
        progress(outcome, 1, 2)
        first = progress.line()
        progress.started -= 5  # five seconds on, no module finished: the clock moves
        later = progress.line()
    assert first.startswith("[1/2] 3.0 MiB read, ") and "MB/s" in first
    assert "module_0001.jit_big" in first
    assert " 5s " in later or later.split(", ")[2].startswith("5s")
    err = capsys.readouterr().err
    assert "[1/2] 3.0 MiB read" in err


def test_an_ambiguous_module_note_shows_what_differs(fleet_db):
    result = run("query", "modules", "-p", "module=jit_randint", "--db", fleet_db, "-f", "csv")
    assert result.exit_code == 0
    assert "note: 'jit_randint' matches 3 modules" in result.stderr
    lines = [x for x in result.stderr.splitlines() if x.startswith("  ")]
    assert len(lines) == 3
    for version in ("jax-0.6.2", "jax-0.7.2", "jax-0.10.2"):
        assert sum(f"/{version}/" in line for line in lines) == 1, lines
    assert all("path " in line and "format " in line for line in lines)


def test_a_result_showing_both_peaks_says_how_they_differ(tmp_path):
    """heap_peak_bytes beside xla_peak_bytes (150 MB against 27 MB for a CPU step) gets a
    note on stderr saying which is which; stdout stays the data alone."""
    db = tmp_path / "w.duckdb"
    run("ingest", SAMPLES, "--db", db, "-q")
    both = run(
        "sql", "SELECT module_name, xla_peak_bytes, heap_peak_bytes FROM modules",
        "--db", db, "-f", "csv",
    )  # fmt: skip
    assert both.exit_code == 0, both.output
    assert "note: heap_peak_bytes and xla_peak_bytes are different peaks" in both.stderr
    assert "no temporaries" in both.stderr
    rows = list(csv.DictReader(io.StringIO(both.stdout)))
    assert len(rows) == 5 and set(rows[0]) == {"module_name", "xla_peak_bytes", "heap_peak_bytes"}
    one = run("sql", "SELECT heap_peak_bytes FROM modules", "--db", db, "-f", "csv")
    assert "note:" not in one.stderr
