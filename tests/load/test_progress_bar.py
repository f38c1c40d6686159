"""DuckDB draws its progress bar on stdout once a query runs for about two
seconds; `query --format csv > file` then carried it into the data. Every
connection the library opens has it off."""

from __future__ import annotations

import bufferhouse
from bufferhouse.schema import warehouse


def _bar(con) -> bool:
    return con.execute("SELECT current_setting('enable_progress_bar')").fetchone()[0]


def test_no_connection_draws_a_progress_bar(samples_db):
    with bufferhouse.connect(samples_db) as con:
        assert _bar(con) is False
    with warehouse.open_connection(samples_db, read_only=False) as con:
        assert _bar(con) is False
    with warehouse.connect_sealed(samples_db) as con:
        assert _bar(con) is False
