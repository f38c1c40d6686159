"""The bad input catalog: every failure mode names its file and line, the rest
of the batch lands, and nothing of the bad module does.

Committed cases live in tests/data/bad (see its README); the ones that cannot be
committed (a 10 MB line, symlink loops, dangling links, odd file names) are
generated here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

import bufferhouse
from bufferhouse.check import check_warehouse
from bufferhouse.schema import MODULE_TABLES
from tests.conftest import DATA, SAMPLES

BAD = DATA / "bad"


@dataclass(frozen=True)
class Case:
    name: str
    inputs: tuple[Path, ...]
    expected: dict[str, str]

    @property
    def options(self) -> tuple[tuple[str, str], ...]:
        return tuple((k, v) for k, v in self.expected.items() if k == "max_bytes")

    @property
    def error_file(self) -> str:
        if "file" in self.expected:
            return self.expected["file"]
        return next(p.name for p in self.inputs if p.is_file())


def _read_expected(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition(":")
            out[key.strip()] = value.strip()
    return out


def _cases() -> list[Case]:
    cases = []
    for exp in sorted(BAD.glob("*.expected")):
        name = exp.name[: -len(".expected")]
        inputs = tuple(
            sorted(
                p
                for p in BAD.iterdir()
                if p.name == name or p.name.startswith(name + "-buffer-assignment")
            )
        )
        cases.append(Case(name, inputs, _read_expected(exp)))
    return cases


CASES = _cases()


def test_catalog_is_large_and_well_formed():
    assert len(CASES) >= 30
    for case in CASES:
        assert case.inputs, f"{case.name}.expected has no input beside it"
        if case.expected.get("outcome") != "loaded":
            assert {"line", "message"} <= case.expected.keys(), case.name


@dataclass
class Batch:
    db: Path
    report: bufferhouse.IngestReport
    root: Path


def _ingest_batch(root: Path, cases: list[Case], max_bytes: int | None) -> Batch:
    """Copy the cases and the samples into one tree and ingest it once."""
    root.mkdir()
    shutil.copytree(SAMPLES, root / "samples")
    for case in cases:
        for p in case.inputs:
            if p.is_dir():
                shutil.copytree(p, root / p.name)
            else:
                shutil.copy(p, root / p.name)
    db = root.parent / f"{root.name}.duckdb"
    report = bufferhouse.ingest(root, db=db, jobs=2, max_bytes=max_bytes)
    return Batch(db, report, root)


@pytest.fixture(scope="module")
def batches(tmp_path_factory) -> dict[tuple, Batch]:
    groups: dict[tuple, list[Case]] = {}
    for case in CASES:
        groups.setdefault(case.options, []).append(case)
    out = {}
    for i, (options, cases) in enumerate(sorted(groups.items())):
        max_bytes = int(dict(options)["max_bytes"]) if options else None
        out[options] = _ingest_batch(tmp_path_factory.mktemp("bad") / f"batch{i}", cases, max_bytes)
    return out


def _outcomes_of(batch: Batch, case: Case) -> list:
    """The outcomes of a case's module: its stem (file cases) or its directory."""
    found = []
    for o in batch.report.outcomes:
        directory = Path(o.files.directory)
        if (directory == batch.root and o.files.stem == case.name) or directory == (
            batch.root / case.name
        ):
            found.append(o)
    return found


def _rows(db: Path, sql: str, params: list | None = None) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case(batches, case: Case):
    batch = batches[case.options]
    outcomes = _outcomes_of(batch, case)
    assert len(outcomes) == 1, [o.files for o in outcomes]
    outcome = outcomes[0]
    if case.expected.get("outcome") == "loaded":
        assert outcome.status == "loaded", outcome.error
        _assert_same_rows(batch.db, outcome.module_id, case.expected["same_as"])
        if "warning" in case.expected:  # what a newer XLA wrote: kept, and said where
            said = [(w.line, case.expected["warning"] in w.message) for w in outcome.warnings]
            assert said == [(int(case.expected["warning_line"]), True)], outcome.warnings
        return
    assert outcome.status == "failed", f"{case.name} loaded: {outcome.warnings}"
    error = outcome.error
    line = int(case.expected["line"])
    assert os.path.basename(error.path) == case.error_file
    assert (error.line, case.expected["message"] in error.message) == (line, True), error.describe()
    shown = error.describe()
    assert shown.startswith(f"{error.path}:{line}: " if line else f"{error.path}: ")
    assert len(error.message) < 300
    # Recorded, and nothing of the module landed.
    diag = _rows(
        batch.db,
        "SELECT line, message FROM diagnostics WHERE severity = 'error' AND path = ?",
        [error.path],
    )
    assert diag == [(line, error.message)]
    stems = {r[0] for r in _rows(batch.db, "SELECT file_stem FROM modules")}
    assert outcome.files.stem not in stems


def test_rest_of_each_batch_landed(batches):
    for batch in batches.values():
        stems = {r[0] for r in _rows(batch.db, "SELECT file_stem FROM modules")}
        assert {p.stem for p in SAMPLES.glob("*.txt")} <= stems
        loaded = {o.files.stem for o in batch.report.loaded}
        assert stems == loaded
        report = check_warehouse(batch.db)
        assert report.ok, report.lines()


def _table_rows(db: Path, module_id: int) -> dict[str, list[tuple]]:
    out = {}
    with duckdb.connect(str(db), read_only=True) as con:
        for table in MODULE_TABLES:
            cols = ", ".join(f'"{c}"' for c in table.column_names if c != "module_id")
            out[table.name] = sorted(
                con.execute(
                    f'SELECT {cols} FROM "{table.name}" WHERE module_id = ?', [module_id]
                ).fetchall(),
                key=repr,
            )
    return out


def _assert_same_rows(db: Path, module_id: int, sample_stem: str) -> None:
    (sample_id,) = _rows(db, "SELECT module_id FROM modules WHERE file_stem = ?", [sample_stem])[0]
    assert module_id != sample_id
    assert _table_rows(db, module_id) == _table_rows(db, sample_id)
    facts = "total_bytes, logical_peak_bytes, heap_peak_bytes, row_counts, bytes_read"
    got = _rows(db, f"SELECT {facts} FROM modules WHERE module_id = ?", [module_id])[0]
    want = _rows(db, f"SELECT {facts} FROM modules WHERE module_id = ?", [sample_id])[0]
    assert got[:4] == want[:4]
    assert got[4] > want[4]  # one more byte per line


# -- generated cases ----------------------------------------------------------

SAMPLE = SAMPLES / "004_d7988b213309ef7a.txt"


def _ingest(root: Path, **kwargs) -> tuple[bufferhouse.IngestReport, Path]:
    db = root.parent / (root.name + ".duckdb")
    return bufferhouse.ingest(root, db=db, jobs=1, **kwargs), db


def test_ten_megabyte_line(tmp_path):
    root = tmp_path / "dumps"
    root.mkdir()
    shutil.copy(SAMPLE, root)
    lines = SAMPLE.read_text().splitlines(keepends=True)
    big = "allocation 1: size 2152, " + "maybe-live-out " * (10 * 2**20 // 15) + ":\n"
    (root / "huge-line-buffer-assignment.txt").write_text("".join([lines[0], big, *lines[2:]]))
    report, db = _ingest(root)
    (failed,) = report.failed
    assert (failed.files.stem, failed.error.line) == ("huge-line", 2)
    assert "malformed allocation attribute" in failed.error.message
    assert len(failed.error.message) < 300
    assert len(failed.error.describe()) < 500
    assert [o.files.stem for o in report.loaded] == [SAMPLE.stem]
    assert check_warehouse(db).ok


def test_directory_symlink_loop(tmp_path):
    root = tmp_path / "dumps"
    (root / "a" / "b").mkdir(parents=True)
    shutil.copy(SAMPLE, root / "a" / "b")
    (root / "a" / "b" / "up").symlink_to(root / "a")
    (root / "a" / "self").symlink_to(".")
    report, db = _ingest(root)
    assert [o.files.stem for o in report.outcomes] == [SAMPLE.stem]
    assert report.ok
    assert _rows(db, "SELECT count(*) FROM modules") == [(1,)]


def test_a_file_reached_by_several_names_is_one_module(tmp_path):
    root = tmp_path / "dumps"
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    (root / "c").mkdir()
    shutil.copy(SAMPLE, root / "a")
    (root / "b" / SAMPLE.name).symlink_to(root / "a" / SAMPLE.name)
    os.link(root / "a" / SAMPLE.name, root / "c" / SAMPLE.name)
    report, db = _ingest(root)
    assert [o.files.stem for o in report.outcomes] == [SAMPLE.stem]
    assert [o.files.directory for o in report.outcomes] == [str(root / "a")]
    assert _rows(db, "SELECT count(*) FROM modules") == [(1,)]


def test_unreadable_entries_are_named(tmp_path):
    """As root every permission bit is ignored, so the entries that cannot be read
    are links: one to nothing, and one that points at itself."""
    root = tmp_path / "dumps"
    root.mkdir()
    shutil.copy(SAMPLE, root)
    (root / "gone-buffer-assignment.txt").symlink_to(tmp_path / "nowhere.txt")
    (root / "loop-buffer-assignment.txt").symlink_to("loop-buffer-assignment.txt")
    report, _ = _ingest(root)
    failed = {o.files.stem: o.error for o in report.failed}
    assert set(failed) == {"gone", "loop"}
    assert failed["gone"].line == 0 and "dangling symbolic link" in failed["gone"].message
    assert failed["loop"].line == 0 and "symbolic links" in failed["loop"].message
    for stem, error in failed.items():
        assert error.path == str(root / f"{stem}-buffer-assignment.txt")
    assert [o.files.stem for o in report.loaded] == [SAMPLE.stem]


#: Linux capabilities that let root read any file whatever its mode.
_DAC_CAPABILITIES = (1, 2)  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
_PR_CAPBSET_DROP = 24

_REPORT_FAILURES = (
    "import json, sys, bufferhouse\n"
    "r = bufferhouse.ingest(sys.argv[1], db=sys.argv[2], jobs=1)\n"
    "print(json.dumps([[o.error.path, o.error.line, o.error.message] for o in r.failed]))\n"
)


def _drop_dac_capabilities() -> None:
    """In the child before exec: drop root's power to read any file from the bounding
    set, so the ingest runs as a root that file modes bind (as CI runs the tests)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for capability in _DAC_CAPABILITIES:
        if libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def test_file_without_read_permission(tmp_path):
    """Mode 000 fails that module alone, with the path and 'permission denied'. As
    root (CI), the ingest runs in a process without CAP_DAC_OVERRIDE and
    CAP_DAC_READ_SEARCH, the capabilities that let root ignore the mode."""
    root = tmp_path / "dumps"
    root.mkdir()
    bad = root / "locked-buffer-assignment.txt"
    shutil.copy(SAMPLE, bad)
    shutil.copy(SAMPLE, root / "readable-buffer-assignment.txt")
    bad.chmod(0)
    try:
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            try:
                ran = subprocess.run(
                    [sys.executable, "-c", _REPORT_FAILURES, str(root), str(tmp_path / "w.duckdb")],
                    preexec_fn=_drop_dac_capabilities,
                    capture_output=True,
                    text=True,
                )
            except subprocess.SubprocessError as exc:  # prctl refused (no CAP_SETPCAP)
                pytest.skip(f"cannot drop root's file capabilities here ({exc})")
            assert ran.returncode == 0, ran.stderr
            failed = [tuple(f) for f in json.loads(ran.stdout)]
        else:
            report, _ = _ingest(root)
            failed = [(o.error.path, o.error.line, o.error.message) for o in report.failed]
    finally:
        bad.chmod(0o644)
    ((path, line, message),) = failed  # the readable copy loaded
    assert (path, line) == (str(bad), 0)
    assert "permission denied" in message


ODD_NAMES = [
    "with spaces in it",
    "quotes \"double\" and 'single'",
    "new\nline",
    "ünïcödé_模块_😀",
    "semi;colon $(echo no) `tick` %s {}",
]


def test_odd_file_names_load(tmp_path):
    root = tmp_path / "dumps"
    root.mkdir()
    for name in ODD_NAMES:
        shutil.copy(SAMPLE, root / f"{name}-buffer-assignment.txt")
    (root / "bad\nname 'x'-buffer-assignment.txt").write_text("")
    report, db = _ingest(root)
    assert sorted(o.files.stem for o in report.loaded) == sorted(ODD_NAMES)
    (failed,) = report.failed
    assert failed.error.path == str(root / "bad\nname 'x'-buffer-assignment.txt")
    assert failed.error.message == "empty file"
    stems = sorted(r[0] for r in _rows(db, "SELECT file_stem FROM modules"))
    assert stems == sorted(ODD_NAMES)
    paths = {r[0] for r in _rows(db, "SELECT unnest(paths) FROM modules")}
    assert paths == {str(root / f"{n}-buffer-assignment.txt") for n in ODD_NAMES}
    assert _rows(db, "SELECT path FROM diagnostics") == [(failed.error.path,)]
    assert check_warehouse(db).ok


def test_file_name_that_is_not_utf8(tmp_path):
    """Linux file names are bytes; one that is not UTF-8 still loads, shown as \\xNN."""
    root = tmp_path / "dumps"
    root.mkdir()
    raw = os.fsencode(root) + b"/caf\xe9 \xff-buffer-assignment.txt"
    with open(raw, "wb") as f:
        f.write(SAMPLE.read_bytes())
    with open(os.fsencode(root) + b"/\xfe-buffer-assignment.txt", "wb") as f:
        f.write(b"garbage\n")
    report, db = _ingest(root)
    assert len(report.loaded) == 1 and len(report.failed) == 1
    assert _rows(db, "SELECT file_stem FROM modules") == [("caf\\xe9 \\xff",)]
    assert _rows(db, "SELECT path, line FROM diagnostics") == [
        (f"{root}/\\xfe-buffer-assignment.txt", 1)
    ]
