"""modules.xla_peak_bytes against memory_analysis().peak_memory_in_bytes, and the heap
sweep's rule that tuple-shaped temp values (never heap-simulated) stay out of the peak.

Oracles: tests/data/heaprule (25 fresh jax 0.10.2 CPU compiles, make_dumps.py) and the
corpus manifest (jax 0.7.2 and 0.10.2 record peak_memory_in_bytes).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import duckdb
import pytest

import bufferhouse
from bufferhouse.check import check_warehouse
from bufferhouse.schema import SCHEMA_VERSION
from bufferhouse.schema.warehouse import schema_version
from tests.conftest import CORPUS, DATA, drop_version_7

HEAPRULE = DATA / "heaprule"


@pytest.fixture(scope="module")
def heaprule_manifest() -> dict:
    return json.loads((HEAPRULE / "manifest.json").read_text())["entries"]


@pytest.fixture(scope="module")
def heaprule_db(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("heaprule") / "heaprule.duckdb"
    report = bufferhouse.ingest([HEAPRULE], db=db, jobs=1)
    assert report.ok, [o.error for o in report.failed]
    return db


def _key(path: str, root: Path) -> str:
    rel = os.path.relpath(path, root)
    return rel[:-3] if rel.endswith(".gz") else rel


def _peaks(db: Path) -> list[tuple[str, str, int | None]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("SELECT paths[1], backend, xla_peak_bytes FROM modules").fetchall()


def test_fresh_compiles_equal_memory_analysis(heaprule_db, heaprule_manifest):
    """Every fixture module: the text figure is exactly peak_memory_in_bytes, and the
    premise of the rule held (memory_analysis()'s buffer assignment had no trace)."""
    checked = 0
    for path, backend, got in _peaks(heaprule_db):
        entry = heaprule_manifest[_key(path, HEAPRULE)]
        ma = entry["memory_analysis"]
        assert ma["buffer_assignment_heap_traces"] == 0, path
        assert backend == "cpu" and got == ma["peak_memory_in_bytes"], (path, got)
        checked += 1
    assert checked == len(heaprule_manifest) == 25


def test_corpus_equals_memory_analysis(fleet_db, manifest):
    """Corpus modules whose manifest records peak_memory_in_bytes (jax 0.7.2, 0.10.2 CPU)."""
    checked = 0
    for path, backend, got in _peaks(fleet_db):
        entry = manifest.get(_key(path, CORPUS))
        if entry is None or "peak_memory_in_bytes" not in (entry["memory_analysis"] or {}):
            assert got is None or backend == "cpu", path
            continue
        assert got == entry["memory_analysis"]["peak_memory_in_bytes"], (path, got)
        checked += 1
    recorded = [e for e in manifest.values() if "peak_memory_in_bytes" in e["memory_analysis"]]
    assert checked == len(recorded) == 126


def test_not_claimed_off_cpu(fleet_db):
    """TPU/GPU/unnamed modules: memory_analysis() there may replay a trace the text lacks."""
    with duckdb.connect(str(fleet_db), read_only=True) as con:
        rows = con.execute(
            "SELECT backend, count(*), count(xla_peak_bytes) FROM modules GROUP BY ALL"
        ).fetchall()
    counts = {backend: (n, filled) for backend, n, filled in rows}
    assert counts["cpu"][0] == counts["cpu"][1] > 0
    assert any(b != "cpu" for b in counts)
    assert all(filled == 0 for b, (_, filled) in counts.items() if b != "cpu")


def _slow_temp_peak(con, module_id: int, with_tuples: bool) -> int:
    """Most temp bytes of color 0 in use at once, byte by byte and step by step."""
    (length,) = con.execute(
        "SELECT coalesce(schedule_length, 0) FROM modules WHERE module_id = ?", [module_id]
    ).fetchone()
    rows = con.execute(
        """
        SELECT allocation_index, byte_offset, size, coalesce(start_time, 0),
          coalesce(end_time, ?), shape
        FROM value_facts WHERE module_id = ? AND category = 'temp' AND color = 0 AND size > 0
        """,
        [length, module_id],
    ).fetchall()
    rows = [r for r in rows if with_tuples or not r[5].startswith("(")]
    best = 0
    for t in range(length + 1):
        used = {(a, b) for a, o, n, s, e, _ in rows if s <= t <= e for b in range(o, o + n)}
        best = max(best, len(used))
    return best


@pytest.mark.slow
def test_heap_sweep_leaves_tuple_values_out(heaprule_db):
    """temp_peak_bytes = the union-of-byte-ranges sweep over non-tuple temp values; on
    some fixture modules counting the tuples would raise it (the rule has an effect)."""
    with duckdb.connect(str(heaprule_db), read_only=True) as con:
        bufferhouse.queries.use_package_views(con)
        peaks = con.execute(
            "SELECT module_id, temp_peak_bytes FROM heap_peaks WHERE color = 0"
        ).fetchall()
        raised = 0
        for module_id, got in peaks:
            assert got == _slow_temp_peak(con, module_id, with_tuples=False), module_id
            raised += _slow_temp_peak(con, module_id, with_tuples=True) > got
        listed = con.execute(
            """
            SELECT count(*) FROM heap_peak_buffers b JOIN hlo_values v USING (module_id, value_id)
            WHERE b.category = 'temp' AND v.is_tuple
            """
        ).fetchone()[0]
    assert len(peaks) == 25 and raised >= 5
    assert listed == 0


@pytest.mark.slow
def test_a_writer_upgrades_version_3_in_place(tmp_path):
    """3 -> 4 adds xla_peak_bytes and fills it by the same rule as the parser."""
    db = tmp_path / "v3.duckdb"
    assert bufferhouse.ingest([HEAPRULE, CORPUS / "jax-0.10.2"], db=db, jobs=1).ok
    query = "SELECT content_hash, xla_peak_bytes FROM modules ORDER BY content_hash"
    with duckdb.connect(str(db)) as con:
        before = con.execute(query).fetchall()
        # what version 3 lacked: this column, and version 5's (issue 16) after it
        for column in ("source_kind", "assignment_fingerprint", "trace_peak_bytes"):
            con.execute(f"ALTER TABLE modules DROP COLUMN {column}")
        con.execute("DROP TABLE heap_events")
        con.execute("ALTER TABLE modules DROP COLUMN xla_peak_bytes")
        drop_version_7(con)
        con.execute("UPDATE schema_info SET value = '3' WHERE key = 'schema_version'")
    bufferhouse.connect(db, read_only=False).close()
    with duckdb.connect(str(db), read_only=True) as con:
        assert schema_version(con) == SCHEMA_VERSION
        assert con.execute(query).fetchall() == before
    assert sum(x is not None for _, x in before) == len(before) > 80
    assert check_warehouse(db).ok, check_warehouse(db).lines()
