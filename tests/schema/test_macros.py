"""The shared SQL rules (bufferhouse/schema/macros.py) and their one Python copy.

The heap-peak rule is spelled in SQL once (bh_peak_first) and in Python once, by
parse/derive's trace sweep, which stores heap_peaks.peak_time and temp_peak_bytes
at ingest: these tests hold the Python copy to the macro on every traced fixture.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

import bufferhouse
from bufferhouse import queries
from bufferhouse.schema import macros
from tests.conftest import DATA

PROTO = DATA / "proto"


@pytest.fixture(scope="module")
def traced_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("macros") / "w.duckdb"
    report = bufferhouse.ingest([PROTO / "both", PROTO / "proto_only"], db=db, jobs=1)
    assert report.ok
    return db


def test_peak_first_is_the_first_event_at_the_highest():
    con = duckdb.connect()
    macros.install(con, temp=True)
    rows = [(0, 5), (1, 7), (2, 7), (3, 3)]
    got = con.execute(
        "SELECT bh_peak_first(pos, h) FROM (VALUES " + ", ".join(map(str, rows)) + ") t(pos, h)"
    ).fetchone()[0]
    assert got == 1  # the first of the two 7s, not the second
    pair = con.execute(
        "SELECT bh_peak_first({'trace_index': t, 'event_index': e}, h) "
        "FROM (VALUES (0, 0, 4), (1, 0, 9), (1, 1, 9), (0, 5, 9)) v(t, e, h)"
    ).fetchone()[0]
    assert pair == {"trace_index": 0, "event_index": 5}  # trace order: trace first


def test_live_at_is_inclusive_and_a_missing_range_is_live():
    con = duckdb.connect()
    macros.install(con, temp=True)
    got = con.execute(
        "SELECT bh_live_at(3, 3, 5), bh_live_at(5, 3, 5), bh_live_at(6, 3, 5), "
        "bh_live_at(2, 3, 5), bh_live_at(9, NULL, NULL)"
    ).fetchone()
    assert got == (True, True, False, False, True)


def test_python_trace_peak_is_the_macros(traced_db):
    """heap_peaks (the Python sweep of parse/derive) and bh_peak_first over heap_events
    name the same peak event, by its instruction's program-order step, and bytes."""
    with duckdb.connect(str(traced_db), read_only=True) as con:
        queries.use_package_views(con)
        rows = con.execute(
            """
            WITH peak AS (
              SELECT module_id, color, max(heap_bytes) AS top,
                bh_peak_first({'t': trace_index, 'e': event_index}, heap_bytes) AS at
              FROM heap_events GROUP BY module_id, color
            )
            SELECT h.module_id, h.color, h.temp_peak_bytes, h.peak_time, p.top, s.time
            FROM heap_peaks AS h
            JOIN peak AS p USING (module_id, color)
            JOIN heap_events AS e
              ON e.module_id = p.module_id AND e.color = p.color
              AND e.trace_index = p.at.t AND e.event_index = p.at.e
            LEFT JOIN sequence AS s
              ON s.module_id = e.module_id AND s.instruction = e.instruction
            WHERE h.peak_source = 'trace'
            """
        ).fetchall()
    assert len(rows) >= 5
    for module_id, color, temp_peak, peak_time, top, time in rows:
        assert temp_peak == top, (module_id, color)
        assert peak_time == time, (module_id, color)
