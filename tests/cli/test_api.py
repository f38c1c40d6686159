"""The public Python API as a notebook uses it (see also test_duckdb_versions.py)."""

from __future__ import annotations

import inspect

import pytest

import bufferhouse
from bufferhouse.load import ingest_paths


@pytest.mark.parametrize("read_only", [True, False])
def test_connect_hands_out_a_connection_with_no_unfinished_result(samples_db, read_only):
    """duckdb 2 refuses any statement while a result is unfinished (issue 18): the
    README's example, con.sql(...) right after connect, must work."""
    with bufferhouse.connect(samples_db, read_only=read_only) as con:
        assert len(con.sql("FROM bh_top_modules(top := 2)").fetchall()) == 2
        assert con.sql("SELECT count(*) FROM modules").fetchall() == [(5,)]


def test_ingest_takes_the_options_of_ingest_paths():
    shown = inspect.signature(bufferhouse.ingest).parameters
    shared = inspect.signature(ingest_paths).parameters
    assert list(shown)[2:] == [n for n in shared if n not in ("paths", "db", "after_open")]
    with pytest.raises(TypeError, match="unexpected keyword arguments: after_open, nope"):
        bufferhouse.ingest("x", nope=1, after_open=None)
