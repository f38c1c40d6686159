"""What the README promises about ingest, each tested as the README words it.

- a module that kills its parser twice is reported as failed and the rest load;
- a path may be one `-buffer-assignment.txt` file, or a `.gz` of one;
- `--max-bytes N` fails any module with more than N bytes of text (the CLI, plain text);
- what the vectorized scanner does not expect (a lone CR) is read line by line
  by the reader that words every error.
"""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import bufferhouse
from bufferhouse.check import check_warehouse
from bufferhouse.parse import VECTOR_MIN_BYTES, parse_files
from bufferhouse.parse.discover import discover
from bufferhouse.parse.results import Failed, ParsedModule
from bufferhouse.parse.text import vector
from tests import synth
from tests.conftest import CORPUS, SAMPLES

pytestmark = pytest.mark.slow  # ingests in subprocesses, parser kills

#: `bufferhouse ingest` whose parser processes die (SIGKILL, as the kernel's OOM
#: killer or a crash in a native library would end them) on any module named
#: `poison`. The fork server imports this script as the main module, so every
#: worker it forks has the patch; the parent's recovery code is the real one.
POISONED_INGEST = """\
import os, signal, sys
import bufferhouse.load.workers as workers

real = workers.parse_files


def dying(files, *args, **kwargs):
    if "poison" in files.stem:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(files, *args, **kwargs)


workers.parse_files = dying

if __name__ == "__main__":
    from bufferhouse.cli import main

    sys.argv[0] = "bufferhouse"
    main()
"""


def _stems(db: Path) -> list[str]:
    with duckdb.connect(str(db), read_only=True) as con:
        return sorted(r[0] for r in con.execute("SELECT file_stem FROM modules").fetchall())


def test_a_module_that_kills_its_parser_twice_is_reported_failed(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(SAMPLES, tree)
    poison = tree / "poison-buffer-assignment.txt"
    shutil.copy(SAMPLES / "004_d7988b213309ef7a.txt", poison)
    script = tmp_path / "poisoned_ingest.py"
    script.write_text(POISONED_INGEST)
    db = tmp_path / "w.duckdb"
    ran = subprocess.run(
        [sys.executable, str(script), "ingest", str(tree), "-j", "2", "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 1, ran.stderr  # a failed module: exit 1, not a crash
    # Listed once, in the summary (issue 27).
    assert f"\n  {poison}: the parser process died (out of memory?); module skipped" in ran.stderr
    assert "5 loaded, 0 already present, 1 failed" in ran.stderr
    assert _stems(db) == sorted(p.stem for p in SAMPLES.glob("*.txt"))
    with duckdb.connect(str(db), read_only=True) as con:
        recorded = con.execute("SELECT path, severity, message FROM diagnostics").fetchall()
    assert recorded == [
        (str(poison), "error", "the parser process died (out of memory?); module skipped")
    ]
    assert check_warehouse(db).ok


def _module_rows(db: Path) -> list[tuple]:
    """Each module's name and row counts: what a module loaded from any path must equal."""
    with duckdb.connect(str(db), read_only=True) as con:
        return sorted(
            con.execute(
                "SELECT module_name, map_entries(row_counts)::VARCHAR, total_bytes FROM modules"
            ).fetchall()
        )


def test_a_single_file_or_a_gz_of_one_as_the_path(tmp_path):
    """A combined dump, the same gzipped, and the -buffer-assignment.txt.gz of a split
    set (its siblings beside it) load as they do from their directories."""
    sample = SAMPLES / "003_186bba49641ec33a.txt"
    gz = tmp_path / "gz" / "jit_copy-buffer-assignment.txt.gz"
    gz.parent.mkdir()
    gz.write_bytes(gzip.compress(sample.read_bytes()))
    split = tmp_path / "split"
    shutil.copytree(CORPUS / "jax-0.10.2" / "bool_mask_ops", split)
    (split_ba,) = split.glob("*-buffer-assignment.txt.gz")

    whole = tmp_path / "whole.duckdb"
    assert bufferhouse.ingest([SAMPLES, split], db=whole).ok
    want = {r[0]: r for r in _module_rows(whole)}

    for path, name in ((sample, "003_186bba49641ec33a"), (gz, "jit_copy"), (split_ba, None)):
        db = tmp_path / f"{path.name}.duckdb"
        report = bufferhouse.ingest(path, db=db)  # a str or PathLike, not a list
        assert report.ok and len(report.loaded) == 1, [o.error for o in report.failed]
        (got,) = _module_rows(db)
        expected = want[got[0] if name is None else "003_186bba49641ec33a"]
        assert got[1:] == expected[1:], path
        if name is None:  # the split set's siblings came along (live ranges are in one)
            with duckdb.connect(str(db), read_only=True) as con:
                assert con.execute("SELECT count(*) FROM live_ranges").fetchone()[0] > 0


def test_max_bytes_through_the_cli_on_plain_text(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    small, large = SAMPLES / "000_3ae9b34c349c690e.txt", SAMPLES / "003_186bba49641ec33a.txt"
    limit = (small.stat().st_size + large.stat().st_size) // 2
    assert small.stat().st_size < limit < large.stat().st_size
    for sample in (small, large):
        shutil.copy(sample, tree)
    db = tmp_path / "w.duckdb"
    command = ["ingest", str(tree), "--db", str(db), "--max-bytes", str(limit)]
    ran = subprocess.run(
        [sys.executable, "-m", "bufferhouse.cli", *command],
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 1, ran.stderr
    message = f"more than --max-bytes {limit} bytes of text; skipped"
    assert f"\n  {tree / large.name}: {message}" in ran.stderr
    assert _stems(db) == [small.stem]


def _cut(text: bytes) -> bytes:
    """A lone CR in place of the line end after a value line: two lines glued."""
    at = text.index(b"\n value:", 1000)
    return text[:at] + b"\r" + text[at + 1 :]


def _in_instruction(text: bytes) -> bytes:
    """A lone CR inside an instruction's text (its metadata), the line end kept."""
    at = text.index(b"\n", text.index(b"from instruction:")) - 3
    return text[:at] + b"\r" + text[at:]


@pytest.mark.parametrize("mutate", [_cut, _in_instruction], ids=["cut", "in_instruction"])
def test_a_lone_cr_is_read_by_the_line_reader(tmp_path, mutate):
    """A dump big enough for the vectorized scanner, with a lone CR: the scanner hands
    it to the line reader, whose result (rows, or an error at the CR's line) is what
    ingest gives."""
    synth.synthesize(tmp_path / "dump", 0.2, "combined", name="jit_cr")
    (files,) = discover([tmp_path / "dump"])
    path = Path(files.buffer_assignment)
    assert path.stat().st_size > VECTOR_MIN_BYTES
    assert vector.scan(files.dump_files(), 0) is not None  # read in bulk before
    text = mutate(path.read_bytes())
    path.write_bytes(text)
    assert vector.scan(files.dump_files(), 0) is None  # not after

    got, reference = parse_files(files), parse_files(files, accelerate=False)
    assert type(got) is type(reference)
    if mutate is _cut:
        line = text[: text.index(b"\r")].count(b"\n") + 1
        assert isinstance(got, Failed) and (got.error.path, got.error.line) == (str(path), line)
        assert got.error.describe() == reference.error.describe()
        assert "expected 'allocation N: size S" in got.error.message
    else:
        assert isinstance(got, ParsedModule)
        assert got.tables.keys() == reference.tables.keys()
        for name, table in got.tables.items():
            assert table.equals(reference.tables[name]), name
