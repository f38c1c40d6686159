"""A user's first hour (issue 27): each mistake gets one clear line and its exit
status, never a traceback, an empty exit-0 result or a stray file."""

from __future__ import annotations

import os
import subprocess
import sys
from subprocess import PIPE

import pytest
from click.testing import CliRunner

import bufferhouse
from bufferhouse.cli import main
from tests.conftest import ROOT


def run(*args: str | os.PathLike[str]):
    return CliRunner().invoke(main, [str(a) for a in args])


def assert_one_line_error(result, exit_code: int, text: str) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == exit_code, result.output
    assert result.stdout == ""
    assert result.stderr.splitlines() == [f"bufferhouse: error: {text}"]


def test_report_into_a_missing_directory_is_one_line(oom_db, tmp_path):
    pytest.importorskip("matplotlib")  # the report draws: the plot extra
    target = tmp_path / "nodir" / "r.html"
    result = run("report", "-o", target, "--db", oom_db)
    assert_one_line_error(result, 2, f"cannot write {target}: no directory {target.parent}")
    assert not target.parent.exists()


def test_plot_into_a_missing_directory_is_one_line(oom_db, tmp_path):
    target = tmp_path / "nodir" / "x.png"
    result = run("plot", "timeline", "jit_train_step", "-o", target, "--db", oom_db)
    assert_one_line_error(result, 2, f"cannot write {target}: no directory {target.parent}")


@pytest.mark.parametrize("tree", ["logs", "venv"])
def test_ingest_of_files_without_dumps_leaves_no_warehouse(tmp_path, tree):
    """Logs without OOM messages (and a venv's .txt files) are scanned, found empty:
    no warehouse may stay behind."""
    root = tmp_path / "in"
    if tree == "logs":
        (root / "sub").mkdir(parents=True)
        (root / "sub" / "notes.txt").write_text("nothing here\n")
        (root / "train.log").write_text("step 1 loss 0.5\nstep 2 loss 0.4\n")
    else:
        site = root / "lib" / "python3.12" / "site-packages" / "pkg-1.0.dist-info"
        site.mkdir(parents=True)
        (site / "LICENSE.txt").write_text("Apache License\n" * 50)
        (site / "entry_points.txt").write_text("[console_scripts]\npkg = pkg:main\n")
        (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    db = tmp_path / "w.duckdb"
    result = run("ingest", root, "--db", db, "-q")
    assert_one_line_error(
        result,
        1,
        f"no XLA dump files or OOM messages found under {root} "
        "(directories are searched recursively)",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]


def test_plot_of_a_misspelt_module_suggests_the_name(oom_db, tmp_path):
    result = run("plot", "timeline", "jit_trainstep", "-o", tmp_path / "x.png", "--db", oom_db)
    assert_one_line_error(
        result,
        1,
        "no module matches 'jit_trainstep' (a module name, file stem, module_id or "
        "12-digit hash prefix); did you mean jit_train_step?",
    )
    assert not (tmp_path / "x.png").exists()


def test_an_event_that_matches_nothing_is_an_error(oom_db):
    result = run("query", "oom-vs-peak", "-p", "event=zzz", "--db", oom_db)
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert "no OOM event matches 'zzz'" in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_query_takes_top_as_report_diff_and_plot_do(samples_db):
    by_option = run("query", "top-modules", "--top", "2", "--db", samples_db, "-f", "csv")
    by_param = run("query", "top-modules", "-p", "top=2", "--db", samples_db, "-f", "csv")
    assert by_option.exit_code == 0, by_option.output
    assert by_option.stdout == by_param.stdout
    assert len(by_option.stdout.splitlines()) == 3  # header and two modules
    without = run("query", "memory-spaces", "--top", "2", "--db", samples_db)
    assert without.exit_code == 2
    assert "query memory-spaces has no top parameter" in without.stderr


def test_the_sql_help_example_runs_in_bash(samples_db, tmp_path):
    """The example of `sql --help`, pasted into bash, must reach bufferhouse with its
    $name intact (double quotes let bash expand it to nothing)."""
    help_text = run("sql", "--help").stdout
    example = " ".join(help_text.split("Example:")[1].split("Options:")[0].split())
    shim = tmp_path / "bufferhouse"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m bufferhouse.cli "$@"\n')
    shim.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{tmp_path}:{os.environ['PATH']}",
        "BUFFERHOUSE_DB": str(samples_db),
    }
    done = subprocess.run(
        ["bash", "-c", example], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("module_id,")


def test_ingest_prints_each_failure_once(tmp_path, scratch):
    (scratch / "broken-buffer-assignment.txt").write_text(
        "BufferAssignment:\nallocation 0: size x:\n"
    )
    result = run("ingest", scratch, "--db", tmp_path / "w.duckdb")
    assert result.exit_code == 1
    assert result.stderr.count("broken-buffer-assignment.txt:2: expected") == 1, result.stderr


#: A writer that holds the warehouse until told to let go (one line on stdin).
HOLD = """
import sys, duckdb
con = duckdb.connect(sys.argv[1])
print("holding", flush=True)
sys.stdin.readline()
con.close()
"""


QUERY = [sys.executable, "-m", "bufferhouse.cli", "query", "top-modules"]


def test_a_reader_waits_for_a_writer(samples_db, tmp_path):
    """A query while an ingest holds the file waits for it, as ingest does (--wait),
    instead of failing at once. No sleeps: the reader says it waits, then the
    writer lets go."""
    db = tmp_path / "w.duckdb"
    db.write_bytes(samples_db.read_bytes())
    holding = [sys.executable, "-c", HOLD, str(db)]
    with subprocess.Popen(holding, stdin=PIPE, stdout=PIPE, text=True) as holder:
        assert holder.stdout.readline() == "holding\n"
        reading = [*QUERY, "--db", str(db), "-p", "top=1", "-f", "csv", "--wait", "120"]
        with subprocess.Popen(reading, stdout=PIPE, stderr=PIPE, text=True, cwd=ROOT) as reader:
            first = reader.stderr.readline()
            holder.stdin.write("\n")  # let go, whatever the reader said
            holder.stdin.flush()
            out, err = reader.communicate(timeout=120)
        assert "waiting up to 120s for it (--wait)" in first, first + err
        assert reader.returncode == 0, err
        assert out.splitlines()[1].startswith("1,")


@pytest.mark.parametrize("command", [[], ["ingest"]])
def test_help_names_every_input_form(command):
    text = " ".join(run(*command, "--help").stdout.split())
    for form in (".hlo.pb", ".xplane.pb", "RESOURCE_EXHAUSTED", "--xla_dump_to"):
        assert form in text, form


def test_the_notebook_pattern_with_a_connection_open(samples_db, tmp_path):
    """connect, then sql and query (sealed) in one process: the user's connection keeps
    working and unsealed, and every later sealed call works (any number of them)."""
    mine = tmp_path / "mine.csv"
    mine.write_text("a\n1\n")
    con = bufferhouse.connect(samples_db, allow_files=True)  # to read a file of one's own
    other = bufferhouse.connect(samples_db)
    try:
        for _ in range(2):
            assert bufferhouse.sql("SELECT count(*) AS n FROM modules", samples_db).to_pylist() == [
                {"n": 5}
            ]
            assert bufferhouse.query("top-modules", samples_db, top=2).num_rows == 2
        assert con.sql("SELECT count(*) FROM modules").fetchall() == [(5,)]
        # The user's own connection is not sealed by the calls above.
        assert con.execute("SELECT a FROM read_csv(?)", [str(mine)]).fetchall() == [(1,)]
        with pytest.raises(bufferhouse.errors.BufferhouseError, match="Permission"):
            bufferhouse.sql(f"SELECT * FROM read_csv('{mine}')", samples_db)
        assert other.sql("SELECT count(*) FROM modules").fetchall() == [(5,)]
    finally:
        con.close()
        other.close()
