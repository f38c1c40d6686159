"""tests/synth must keep producing dumps that ingest cleanly and satisfy the
invariants XLA guarantees, so the benchmarks measure real work (issue 5).

Each format is tiled to a few MB from the committed seeds, ingested, and checked
against oracles that do not use the generator's own arithmetic: the totals
against the allocations, the printed peak list against the live ranges, the
peak time against a fresh sweep over the instruction shapes, and the
stack-trace tree and memory-usage report against their own invariants.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

import bufferhouse
from bufferhouse.parse import shapes
from tests import synth
from tests.conftest import SAMPLES
from tests.parse.test_ingest_oracles import _recomputed_peak, peak_list_problems

pytestmark = pytest.mark.slow  # synthetic modules of many MB

FORMATS = ("combined", "stacktrace", "split")


def test_every_seed_reproduces_itself(tmp_path):
    """One copy of a seed is the seed, byte for byte: every recomputed section
    (peak, cumulative sums, stack-trace tree, memory-usage report) matches XLA."""
    for fmt in FORMATS:
        paths = synth.find_seeds(fmt)
        seeds = synth.usable_seeds(paths, tmp_path)
        # only the modules too small to tile (no allocations, < 2 steps) drop out
        assert len(seeds) >= len(paths) - 3, fmt
    samples = synth.usable_seeds(synth.sample_seeds(), tmp_path)
    assert len(samples) == len(list(SAMPLES.glob("*.txt")))


def test_number_formats():
    assert synth.human(4282880) == "4.08MiB"
    assert synth.human(52288) == "51.1KiB"
    assert synth.human(40) == "40B"
    assert synth.spaced(1619208) == "1 619 208"
    assert synth.spaced(17) == "17"
    assert synth.split_params("params['layer/fc'].q") == ["params", "layer", "fc", "q"]
    assert synth.split_params("params[1]['w']") == ["params[1]['w']"]
    assert synth.split_params("d['x']") == ["d", "x"]


@pytest.fixture(scope="module")
def synth_db(tmp_path_factory) -> Path:
    """One tiled module per format (and one from the TPU samples), ingested together."""
    root = tmp_path_factory.mktemp("synth")
    for fmt in FORMATS:
        synth.synthesize(root / fmt, 2.0, fmt, name=f"jit_synth_{fmt}")
    synth.synthesize(
        root / "tpu",
        0.5,
        "combined",
        picks=["samples/004", "samples/00"],
        name="jit_synth_tpu",
        number=1,
    )
    db = root / "synth.duckdb"
    report = bufferhouse.ingest([root], db=db, jobs=2)
    assert report.ok, [o.error for o in report.failed]
    assert len(report.loaded) == 4
    return db


def _con(db: Path) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(str(db), read_only=True)


def test_no_diagnostics(synth_db):
    with _con(synth_db) as con:
        assert con.execute("SELECT count(*) FROM diagnostics").fetchone()[0] == 0
        layouts = con.execute(
            "SELECT layout, count(*) FROM modules GROUP BY 1 ORDER BY 1"
        ).fetchall()
        sections = con.execute("SELECT module_name, sections FROM modules ORDER BY 1").fetchall()
    assert layouts == [("combined", 3), ("split", 1)]
    by_name = dict(sections)
    assert "stack_trace" in by_name["jit_synth_stacktrace"]
    assert "stack_trace" in by_name["jit_synth_split"]
    assert "usage_report" in by_name["jit_synth_combined"]


def test_total_is_sum_of_allocations_and_report(synth_db):
    with _con(synth_db) as con:
        rows = con.execute(
            """
            SELECT m.module_name, m.total_bytes, sum(a.size), count(*), m.allocation_count
            FROM modules m JOIN allocations a USING (module_id) GROUP BY ALL
            """
        ).fetchall()
        report_bad = con.execute(
            """
            WITH per_color AS (
              SELECT module_id, color, sum(size) AS bytes FROM allocations GROUP BY ALL)
            SELECT count(*) FROM usage_report r JOIN modules m USING (module_id)
            LEFT JOIN per_color p ON p.module_id = r.module_id AND p.color = r.color
            WHERE (r.report_version = 'A' AND r.total_bytes <> m.total_bytes)
               OR (r.report_version = 'B' AND r.total_bytes <> p.bytes)
            """
        ).fetchone()[0]
        outputs = con.execute(
            "SELECT count(*) FROM allocations WHERE output_shape IS NOT NULL GROUP BY module_id"
        ).fetchall()
    for name, total, summed, n, counted in rows:
        assert total == summed, name
        assert n == counted > 100, name
    assert report_bad == 0
    assert outputs == [(1,)] * 4


def test_renumbered_parameters_and_stack_frames(synth_db):
    """Entry parameter numbers stay unique and agree with the instruction text; the
    merged stack-frame tables still resolve every frame id (split seeds carry them)."""
    with _con(synth_db) as con:
        dup = con.execute(
            """
            SELECT count(*) FROM (
              SELECT module_id, parameter_number, parameter_shape_index FROM allocations
              WHERE is_parameter GROUP BY ALL HAVING count(*) > 1)
            """
        ).fetchall()[0][0]
        agree, disagree = con.execute(
            """
            SELECT count(*) FILTER (WHERE i.parameter_number = a.parameter_number),
                   count(*) FILTER (WHERE i.parameter_number <> a.parameter_number)
            FROM allocations a
            JOIN assignments s USING (module_id) JOIN hlo_values v USING (module_id, value_id)
            JOIN instructions i ON i.module_id = a.module_id AND i.instruction = v.instruction
            WHERE a.is_parameter AND s.allocation_index = a.allocation_index
            """
        ).fetchall()[0]
        frames = con.execute(
            """
            SELECT count(*) FILTER (WHERE source_file IS NOT NULL),
                   count(*) FILTER (WHERE source_file IS NULL)
            FROM instructions WHERE stack_frame_id IS NOT NULL
            """
        ).fetchall()[0]
    assert dup == 0
    assert agree > 500 and disagree == 0
    assert frames[0] > 1000 and frames[1] == 0


def test_peak_list_is_the_live_set_at_the_peak(synth_db):
    with _con(synth_db) as con:
        mismatches, wrong_bytes = peak_list_problems(con)
        printed = con.execute(
            """
            SELECT module_id, list(struct_pack(i := ordinal, n := instruction,
                                               x := shape_index, b := bytes,
                                               c := cumulative_bytes) ORDER BY ordinal)
            FROM peak_values GROUP BY 1
            """
        ).fetchall()
        peaks = dict(con.execute("SELECT module_id, logical_peak_bytes FROM modules").fetchall())
    assert mismatches == 0
    assert wrong_bytes == 0
    assert len(printed) == 4
    for module_id, rows in printed:
        order = [(-r["b"], r["n"].encode(), shapes.parse_shape_index(r["x"])) for r in rows]
        assert order == sorted(order), module_id
        running = 0
        for r in rows:
            running += r["b"]
            assert r["c"] == running
        assert running == peaks[module_id]


def test_peak_time_recomputed_from_instruction_shapes(synth_db):
    with _con(synth_db) as con:
        modules = con.execute("SELECT module_id, logical_peak_time FROM modules").fetchall()
        ranges = con.execute(
            """
            SELECT lr.module_id, lr.start_time, lr.end_time, i.shape
            FROM live_ranges lr JOIN instructions i
              ON i.module_id = lr.module_id AND i.instruction = lr.instruction
            """
        ).fetchall()
        counts = dict(
            con.execute("SELECT module_id, count(*) FROM live_ranges GROUP BY 1").fetchall()
        )
        schedule = dict(con.execute("SELECT module_id, schedule_length FROM modules").fetchall())
        seq = dict(con.execute("SELECT module_id, count(*) FROM sequence GROUP BY 1").fetchall())
    by_module: dict[int, list] = {}
    for module_id, start, end, shape in ranges:
        by_module.setdefault(module_id, []).append(
            (start, end, shapes.byte_size(shapes.parse_shape(shape)))
        )
    for module_id, printed_t in modules:
        events = by_module[module_id]
        assert len(events) == counts[module_id]
        assert _recomputed_peak(events)[0] == printed_t, module_id
        assert seq[module_id] == schedule[module_id]
        assert max(e for _, e, _ in events) == schedule[module_id]


def test_stack_trace_tree(synth_db):
    """I41-I46 on the recomputed tree."""
    with _con(synth_db) as con:
        modules = con.execute(
            """
            SELECT module_id, logical_peak_bytes FROM modules
            WHERE list_contains(sections, 'stack_trace')
            """
        ).fetchall()
        nodes = con.execute(
            """
            SELECT module_id, ordinal, parent_ordinal, percent, total_bytes, current_bytes,
                   remaining_bytes
            FROM stack_trace ORDER BY module_id, ordinal
            """
        ).fetchall()
    assert len(modules) == 3  # stacktrace, split and the sample-004 copies
    by_module: dict[int, list] = {}
    for row in nodes:
        by_module.setdefault(row[0], []).append(row[1:])
    for module_id, peak in modules:
        rows = by_module[module_id]
        total = sum(r[3] for r in rows if r[1] is None)
        assert total == peak
        assert rows[-1][5] == 0
        running = 0
        children: dict[int, int] = {}
        for _ordinal, parent, _pct, node_total, _current, _remaining in rows:
            if parent is not None:
                children[parent] = children.get(parent, 0) + node_total
        for ordinal, _parent, pct, node_total, current, remaining in rows:
            running += current
            assert remaining == total - running
            assert abs(pct - round(100 * node_total / total, 1)) < 0.051
            assert node_total == current + children.get(ordinal, 0)


def test_a_glued_module_reads_as_the_same_module(tmp_path, monkeypatch):
    """`--glued` prints a module as XLA did from 2024-01-16 to 2024-11-01. The
    vectorized scanner reads it, in chunks that cut it anywhere, into the rows of
    the same module printed with newlines, and it ingests without a diagnostic."""
    from bufferhouse.parse import parse_module
    from bufferhouse.parse.text import vector

    plain = synth.synthesize(tmp_path / "plain", 1.0, "stacktrace", name="jit_glued")
    glued = synth.synthesize(tmp_path / "glued", 1.0, "stacktrace", name="jit_glued", glued=True)
    ba = glued.paths["-buffer-assignment.txt"]
    assert ba.read_text().count(" from instruction: %") > 1000
    assert ba.read_text().count("\n<") == 1

    def files(result):
        return [
            (role, str(result.paths[suffix]))
            for suffix, role in synth._ROLES
            if suffix in result.paths
        ]

    monkeypatch.setattr(vector, "_CHUNK", 1 << 16)
    assert vector.scan(files(glued)) is not None
    rows = parse_module(files(glued), vector_min_bytes=0).rows()
    assert rows == parse_module(files(plain), accelerate=False).rows()
    report = bufferhouse.ingest([tmp_path / "glued"], db=tmp_path / "g.duckdb", jobs=1)
    assert report.ok and len(report.loaded) == 1
    with _con(tmp_path / "g.duckdb") as con:
        assert con.execute("SELECT count(*) FROM diagnostics").fetchone()[0] == 0
