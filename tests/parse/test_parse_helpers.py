"""One large module, more than one core: with cores to spare its column reader reads
ahead on threads and its instruction texts are parsed by several threads
(columns.parse_batch), and what they parse must be what one thread parses: the same
rows, the same warnings in the same order, the same first error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

import bufferhouse
from bufferhouse.errors import ParseError
from bufferhouse.load import schedule
from bufferhouse.parse import parse_module
from bufferhouse.parse.discover import discover
from bufferhouse.parse.text import columns
from tests.conftest import CORPUS

#: The corpus modules with the most instructions, one per release.
LARGE = [
    max(
        (g for g in discover([CORPUS / release]) if g.buffer_assignment and not g.problems),
        key=lambda g: os.path.getsize(g.buffer_assignment),
    )
    for release in ("jax-0.6.2", "jax-0.7.2", "jax-0.10.2")
]


@pytest.mark.parametrize("files", LARGE, ids=[Path(g.display).parent.parent.name for g in LARGE])
@pytest.mark.slow
def test_threads_parse_a_module_as_one_thread_does(files, monkeypatch):
    monkeypatch.setattr(columns, "_PARSE_BATCH", 7)  # many batches, shared out
    alone = parse_module(files.dump_files(), files.hlo)
    shared = parse_module(files.dump_files(), files.hlo, threads=3)
    assert len(alone.tables["instructions"]) > 10 * 7
    assert shared.rows() == alone.rows()
    assert shared.facts == alone.facts
    assert [(w.path, w.line, w.message) for w in shared.warnings] == [
        (w.path, w.line, w.message) for w in alone.warnings
    ]


def _texts(n: int, bad: dict[int, str]) -> tuple[pa.Array, pa.Array]:
    texts = [bad.get(i, f"%a{i} = f32[2]{{0}} add(%b, %c)") for i in range(n)]
    return pa.array(texts, pa.string()), pa.array(range(100, 100 + n), pa.int64())


def _batches(texts: pa.Array, lines: pa.Array, size: int) -> list[tuple[pa.Array, pa.Array]]:
    return [(texts.slice(i, size), lines.slice(i, size)) for i in range(0, len(texts), size)]


def test_warnings_come_in_the_order_one_thread_gives_them():
    texts, lines = _texts(200, {3: "%x = garbage", 150: "%y = f32[] nonsense", 190: "junk"})
    batches = _batches(texts, lines, 10)
    alone = columns._parse_batches(batches, "dump.txt", 0)
    shared = columns._parse_batches(batches, "dump.txt", 3)
    assert [t.to_pylist() for t, _ in shared] == [t.to_pylist() for t, _ in alone]
    warned = [(w.line, w.message) for _, ws in shared for w in ws]
    assert warned == [(w.line, w.message) for _, ws in alone for w in ws]
    assert [line for line, _ in warned] == [103, 250, 290]


def test_the_error_raised_is_that_of_the_first_failing_batch():
    """Two numbers too large for their column, in batches far apart: whichever process
    meets its batch first, the error is the earlier line's, as in one thread."""
    big = "%a{} = f32[] add(%b), metadata={{source_line=99999999999}}"
    texts, lines = _texts(200, {42: big.format(42), 187: big.format(187)})
    batches = _batches(texts, lines, 10)
    with pytest.raises(ParseError) as alone:
        columns._parse_batches(batches, "dump.txt", 0)
    with pytest.raises(ParseError) as shared:
        columns._parse_batches(batches, "dump.txt", 3)
    assert (shared.value.line, shared.value.message) == (alone.value.line, alone.value.message)
    assert shared.value.line == 142


@pytest.mark.parametrize(
    ("sizes", "jobs", "cores", "expected"),
    [
        ([200 << 20], None, 2, 1),  # one large module, all cores by default: one more thread
        ([200 << 20], 2, 2, 1),
        ([200 << 20], 8, 64, 3),  # at most MAX_THREADS
        ([200 << 20], None, 64, 3),
        ([200 << 20], 1, 2, 0),  # --jobs 1: one process, nothing more
        ([200 << 20], None, 1, 0),  # one core
        ([1 << 20], None, 2, 0),  # a small module: too little to share
        ([200 << 20, 200 << 20], 2, 2, 0),  # two modules: two parser processes instead
    ],
)
def test_more_threads_only_where_one_parser_leaves_cores_idle(
    monkeypatch, sizes, jobs, cores, expected
):
    monkeypatch.setattr(schedule, "input_bytes", lambda group: sizes[group])
    monkeypatch.setattr(schedule.os, "cpu_count", lambda: cores)
    assert schedule.spare_threads(list(range(len(sizes))), jobs) == expected


def _table(db: Path, name: str) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(f"SELECT * EXCLUDE (module_id) FROM {name} ORDER BY ALL").fetchall()


@pytest.mark.slow
def test_an_ingest_with_spare_cores_stores_what_one_thread_stores(tmp_path, monkeypatch):
    files = LARGE[1]
    monkeypatch.setattr(schedule, "THREADS_MIN_BYTES", 0)
    monkeypatch.setattr(columns, "_PARSE_BATCH", 9)
    seen: list[int] = []
    original = columns._parse_batches

    def spy(batches, used_path, threads):
        seen.append(threads)
        return original(batches, used_path, threads)

    monkeypatch.setattr(columns, "_parse_batches", spy)
    one = bufferhouse.ingest([files.directory], tmp_path / "one.duckdb", jobs=1)
    two = bufferhouse.ingest([files.directory], tmp_path / "two.duckdb", jobs=2)
    assert len(one.loaded) == len(two.loaded) == 1
    assert seen == [0, 1]
    for name in ("instructions", "hlo_values", "uses", "allocations"):
        assert _table(tmp_path / "two.duckdb", name) == _table(tmp_path / "one.duckdb", name)


@pytest.mark.slow
def test_the_warehouse_holds_everything_once_the_ingest_is_over(tmp_path):
    """The write-ahead log may grow during an ingest (pipeline.CHECKPOINT_LOG); when the
    ingest ends it is folded into the warehouse file, which can then be copied alone."""
    db = tmp_path / "w.duckdb"
    report = bufferhouse.ingest([CORPUS / "jax-0.7.2"], db)
    assert len(report.loaded) > 20
    assert not Path(f"{db}.wal").exists()
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM modules").fetchone()[0] == len(report.loaded)


@pytest.mark.parametrize(
    ("module", "absent"),
    [
        ("bufferhouse.parse", ("duckdb", "sqlglot", "pandas", "pyarrow.dataset", "matplotlib")),
        ("bufferhouse.load.workers", ("sqlglot", "pandas", "pyarrow.dataset", "matplotlib")),
        ("bufferhouse.cli", ("sqlglot", "pandas", "pyarrow.dataset", "matplotlib")),
    ],
)
def test_parsers_and_the_cli_start_without_what_they_do_not_use(module, absent):
    """Each parser process and each command imports these; what only exports, plots
    and transpiles need (0.3-0.4 s to import) waits until they are used."""
    code = f"import sys, {module}; print(sorted(m for m in {absent!r} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/"
    )
    assert out.stdout.strip() == "[]"
