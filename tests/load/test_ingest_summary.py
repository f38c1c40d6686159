"""The ingest summary says what its counts mean: a module found again in the same run
(jax's helper programs in every dump directory) is not one the warehouse held before;
IngestReport's repr is that one line, not every outcome."""

from __future__ import annotations

import shutil

from click.testing import CliRunner

import bufferhouse
from bufferhouse.cli import main
from tests.conftest import CORPUS, SAMPLES

DUMP = CORPUS / "jax-0.7.2" / "bool_mask_ops"


def _two_runs_of_one_program(root):
    """Two dump directories holding the same compile (as two jax processes write it)."""
    for sub in ("run-a", "run-b"):
        shutil.copytree(DUMP, root / sub)
    return root


def test_a_first_ingest_names_repeats_within_the_run_apart_from_modules_held(tmp_path):
    dumps = _two_runs_of_one_program(tmp_path / "dumps")
    db = tmp_path / "w.duckdb"
    first = CliRunner().invoke(main, ["ingest", str(dumps), "--db", str(db), "-q"])
    assert first.exit_code == 0, first.output
    assert "1 loaded, 0 already present, 1 repeated (the same content as another file" in (
        first.stderr
    )
    again = CliRunner().invoke(main, ["ingest", str(dumps), "--db", str(db), "-q"])
    assert "0 loaded, 2 already present, 0 failed" in again.stderr, again.stderr
    assert "repeated" not in again.stderr


def test_ingest_report_repr_is_the_cli_line(tmp_path):
    report = bufferhouse.ingest(SAMPLES, db=tmp_path / "w.duckdb", jobs=1)
    text = repr(report)
    assert "\n" not in text and len(text) < 300, text
    assert text.startswith(f"<IngestReport run {report.run_id}: 5 loaded, 0 already present")
    assert report.summary() in text
    assert not any(o.files.display in text for o in report.outcomes), "no paths listed"
