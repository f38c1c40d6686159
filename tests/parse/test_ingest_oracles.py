"""Every figure checked against an oracle that is not our own computation:
the numbers XLA printed in the same dump, and memory_analysis() recorded when
the corpus was compiled."""

from __future__ import annotations

import gzip
import os
import re
from pathlib import Path

import duckdb
import pytest

import bufferhouse
from bufferhouse.parse import shapes
from bufferhouse.parse.discover import discover
from tests.conftest import CORPUS, SAMPLES


def _con(db: Path) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(str(db), read_only=True)


def _manifest_key(path: str) -> str:
    rel = os.path.relpath(path, CORPUS)
    return rel[:-3] if rel.endswith(".gz") else rel


def test_every_test_module_loaded(fleet_db, manifest):
    with _con(fleet_db) as con:
        n = con.execute("SELECT count(*) FROM modules").fetchone()[0]
        errors = con.execute("SELECT count(*) FROM diagnostics").fetchone()[0]
    assert n == len(manifest) + len(list(SAMPLES.glob("*.txt")))
    assert errors == 0


def test_memory_analysis_categories(fleet_db, manifest):
    """argument/output/alias/temp sums == memory_analysis() for every corpus module."""
    with _con(fleet_db) as con:
        bufferhouse.queries.use_package_views(con)
        rows = bufferhouse.queries.run(con, "categories").to_pylist()
        paths = dict(con.execute("SELECT module_id, paths[1] FROM modules").fetchall())
    sums: dict[int, dict[str, int]] = {}
    for r in rows:
        acc = sums.setdefault(r["module_id"], {})
        for k in ("parameter_bytes", "output_bytes", "alias_bytes", "temp_bytes"):
            acc[k] = acc.get(k, 0) + r[k]
    checked = 0
    for module_id, acc in sums.items():
        key = _manifest_key(paths[module_id])
        if key not in manifest:
            continue
        ma = manifest[key]["memory_analysis"]
        assert (
            acc["parameter_bytes"],
            acc["output_bytes"],
            acc["alias_bytes"],
            acc["temp_bytes"],
        ) == (
            ma["argument_size_in_bytes"],
            ma["output_size_in_bytes"],
            ma["alias_size_in_bytes"],
            ma["temp_size_in_bytes"],
        ), key
        checked += 1
    assert checked == len(manifest)


def test_peak_memory_in_bytes(fleet_db, manifest):
    """memory_analysis peak (0.7.2, 0.10.2) == parameter OR output OR constant allocations."""
    with _con(fleet_db) as con:
        rows = con.execute(
            """
            SELECT m.paths[1], sum(a.size) FILTER (
                WHERE a.is_parameter OR a.is_maybe_live_out OR a.is_constant)
            FROM modules m JOIN allocations a USING (module_id) GROUP BY ALL
            """
        ).fetchall()
    checked = 0
    for path, got in rows:
        entry = manifest.get(_manifest_key(path))
        if entry and "peak_memory_in_bytes" in entry["memory_analysis"]:
            assert (got or 0) == entry["memory_analysis"]["peak_memory_in_bytes"], path
            checked += 1
    assert checked > 100


def test_text_counts(fleet_db, manifest):
    with _con(fleet_db) as con:
        rows = con.execute(
            "SELECT paths[1], allocation_count, value_count, total_bytes FROM modules"
        ).fetchall()
    checked = 0
    for path, n_alloc, n_values, total in rows:
        entry = manifest.get(_manifest_key(path))
        if entry:
            tc = entry["text_counts"]
            assert (n_alloc, n_values, total) == (
                tc["n_allocations"],
                tc["n_assigned_values"],
                tc["total_bytes_used"],
            )
            checked += 1
    assert checked == len(manifest)  # every manifest module found and compared


#: Figures XLA printed, read from the raw files with patterns of the test's own,
#: not by the ingest's parser.
_ALLOCATION = re.compile(r"^allocation \d+: size (\d+)", re.MULTILINE)
_TOTAL = re.compile(r"^Total bytes used: (\d+)", re.MULTILINE)
_PEAK_HEADER = re.compile(r"^ *Live ranges at (\d+) \(peak\):$")
_PEAK_ENTRY = re.compile(r"^ +\S.*: (\d+) bytes(?: \(cumulative: (\d+) bytes\))?$")
_STACK_HEADER = re.compile(
    r"^ *Stack trace breakdown for peak usage: ([\d\s]+) bytes", re.MULTILINE
)


def _raw_texts(db: Path) -> dict[int, str]:
    """module_id -> the text of its dump files, as found on disk (discovery's grouping),
    without the memory-usage report (which repeats `Total bytes used:` in some eras)."""
    groups = {g.buffer_assignment: g for g in discover([SAMPLES, CORPUS])}
    with _con(db) as con:
        firsts = con.execute("SELECT module_id, paths[1] FROM modules").fetchall()
    texts = {}
    for module_id, first in firsts:
        parts = []
        for role, path in groups[first].dump_files():
            if role == "usage_report":
                continue
            with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
                parts.append(f.read())
        texts[module_id] = "\n".join(parts)
    return texts


def test_total_bytes_equals_the_allocation_lines_xla_printed(fleet_db):
    """modules.total_bytes and the allocations stored == the `allocation N: size S`
    lines and the `Total bytes used:` line of the raw text, for every module."""
    texts = _raw_texts(fleet_db)
    with _con(fleet_db) as con:
        stored = dict(
            con.execute(
                "SELECT m.module_id, [any_value(m.total_bytes), sum(a.size)] FROM modules m "
                "LEFT JOIN allocations a USING (module_id) GROUP BY m.module_id"
            ).fetchall()
        )
    checked = 0
    for module_id, text in texts.items():
        allocations = sum(int(size) for size in _ALLOCATION.findall(text))
        (printed,) = _TOTAL.findall(text)
        assert int(printed) == allocations, module_id  # XLA's own two figures agree
        assert stored[module_id] == [allocations, allocations], module_id
        checked += 1
    assert checked == len(texts) > 190


def test_a_total_that_is_not_the_sum_of_allocations_is_refused_at_its_line(tmp_path):
    """The rule lives in the parser: a real module with its total changed fails there."""
    module = _copy_module(tmp_path, "jax-0.10.2/bool_mask_ops")
    values = next(module.glob("*-buffer-assignment-values.txt"))
    text = values.read_text()
    (printed,) = _TOTAL.findall(text)
    line = text[: text.index("Total bytes used:")].count("\n") + 1
    values.write_text(
        text.replace(f"Total bytes used: {printed}", f"Total bytes used: {int(printed) + 1}")
    )
    (failed,) = bufferhouse.ingest(module, db=tmp_path / "w.duckdb").failed
    assert (failed.error.path, failed.error.line) == (str(values), line)
    assert f"but the allocations add up to {printed}" in failed.error.message


def test_usage_report_totals(fleet_db):
    """The memory-usage report's totals agree with the allocations (A: all, B: per color)."""
    with _con(fleet_db) as con:
        bad = con.execute(
            """
            WITH per_color AS (
              SELECT module_id, color, sum(size) AS bytes FROM allocations GROUP BY ALL)
            SELECT r.module_id, r.report_version, r.color FROM usage_report r
            JOIN modules m USING (module_id)
            LEFT JOIN per_color p ON p.module_id = r.module_id AND p.color = r.color
            WHERE (r.report_version = 'A' AND r.total_bytes <> m.total_bytes)
               OR (r.report_version = 'B' AND r.total_bytes <> p.bytes)
            """
        ).fetchall()
        n = con.execute("SELECT count(DISTINCT module_id) FROM usage_report").fetchone()[0]
    assert bad == []
    assert n > 150


def test_peak_list_is_exactly_the_values_live_at_peak(fleet_db):
    """I33/I34: printed peak list == live ranges covering T, bytes == logical size."""
    with _con(fleet_db) as con:
        mismatches, wrong_bytes = peak_list_problems(con)
        unresolved = con.execute(
            "SELECT count(*) FROM peak_values WHERE value_id IS NULL"
        ).fetchone()[0]
    assert mismatches == 0
    assert wrong_bytes == 0
    assert unresolved == 0


def peak_list_problems(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """(entries of the printed peak list that differ from the live ranges covering
    the peak time, either way; entries whose bytes are not the value's logical size)."""
    mismatches = con.execute(
        """
        WITH live AS (
          SELECT lr.module_id, lr.instruction, lr.shape_index
          FROM live_ranges lr JOIN modules m USING (module_id)
          WHERE m.logical_peak_time BETWEEN lr.start_time AND lr.end_time),
        printed AS (
          SELECT module_id, instruction, shape_index FROM peak_values)
        SELECT count(*) FROM (
          (SELECT * FROM live EXCEPT SELECT * FROM printed)
          UNION ALL
          (SELECT * FROM printed EXCEPT SELECT * FROM live))
        """
    ).fetchone()[0]
    wrong_bytes = con.execute(
        """
        SELECT count(*) FROM peak_values p JOIN hlo_values v
          ON v.module_id = p.module_id AND v.value_id = p.value_id
        WHERE p.bytes <> v.logical_bytes
        """
    ).fetchone()[0]
    return mismatches, wrong_bytes


def _recomputed_peak(events: list[tuple[int, int, int]]) -> tuple[int, int]:
    """HloLiveRange::ComputePeakMemoryMoment: (start,+b), (end+1,-b); adds first; first max."""
    timeline = []
    for start, end, nbytes in events:
        timeline.append((start, 0, nbytes))
        timeline.append((end + 1, 1, -nbytes))
    timeline.sort(key=lambda e: (e[0], e[1]))
    best, best_t, current = 0, 0, 0
    for t, _, delta in timeline:
        current += delta
        if current > best:
            best, best_t = current, t
    return best_t, best


def test_logical_peak_time_recomputed_from_instruction_shapes(fleet_db):
    """I37: the sweep over live ranges with the defining instruction's full shape
    (parsed from the instruction text) finds the printed peak time."""
    with _con(fleet_db) as con:
        modules = con.execute(
            "SELECT module_id, logical_peak_time FROM modules WHERE logical_peak_time IS NOT NULL"
        ).fetchall()
        ranges = con.execute(
            """
            SELECT lr.module_id, lr.start_time, lr.end_time, i.shape
            FROM live_ranges lr JOIN instructions i
              ON i.module_id = lr.module_id AND i.instruction = lr.instruction
            """
        ).fetchall()
        all_ranges = dict(
            con.execute("SELECT module_id, count(*) FROM live_ranges GROUP BY 1").fetchall()
        )
    by_module: dict[int, list] = {}
    for module_id, start, end, shape in ranges:
        by_module.setdefault(module_id, []).append(
            (start, end, shapes.byte_size(shapes.parse_shape(shape)))
        )
    checked = 0
    for module_id, printed_t in modules:
        events = by_module.get(module_id, [])
        if len(events) != all_ranges.get(module_id, 0):
            continue  # a live value without an instruction text (no allocation)
        assert _recomputed_peak(events)[0] == printed_t, module_id
        checked += 1
    assert checked > 150


def _printed_peak(text: str) -> tuple[int, list[int], list[int]] | None:
    """(peak time, bytes and cumulative figures of each entry) of the printed peak list."""
    lines = iter(text.splitlines())
    for line in lines:
        header = _PEAK_HEADER.match(line)
        if header:
            sizes, cumulative = [], []
            indent = len(line) - len(line.lstrip())
            for entry in lines:
                m = _PEAK_ENTRY.match(entry)
                if not m or len(entry) - len(entry.lstrip()) <= indent:  # the next section
                    break
                sizes.append(int(m.group(1)))
                if m.group(2) is not None:
                    cumulative.append(int(m.group(2)))
            return int(header.group(1)), sizes, cumulative
    return None


def test_logical_peak_equals_the_figures_xla_printed(fleet_db):
    """modules.logical_peak_bytes/time == the peak list's sum and last cumulative figure
    and the stack-trace breakdown's header, read from the raw text."""
    texts = _raw_texts(fleet_db)
    with _con(fleet_db) as con:
        stored = dict(
            con.execute(
                "SELECT module_id, [logical_peak_time, logical_peak_bytes] FROM modules"
            ).fetchall()
        )
    checked = with_stack = 0
    for module_id, text in texts.items():
        printed = _printed_peak(text)
        if printed is None:
            assert stored[module_id][1] is None, module_id
            continue
        time, sizes, cumulative = printed
        assert stored[module_id] == [time, sum(sizes)], module_id
        if cumulative:
            assert cumulative[-1] == sum(sizes), module_id
        header = _STACK_HEADER.findall(text)
        if header:
            assert int(re.sub(r"\s", "", header[0])) == sum(sizes), module_id
            with_stack += 1
        checked += 1
    assert checked > 150 and with_stack > 60


def test_a_peak_list_that_does_not_add_up_is_refused_at_its_line(tmp_path):
    module = _copy_module(tmp_path, "jax-0.10.2/bool_mask_ops")
    live = next(module.glob("*-live-range.txt"))
    text = live.read_text()
    _, sizes, cumulative = _printed_peak(text)
    last = f"(cumulative: {cumulative[-1]} bytes)"
    line = text[: text.index(last)].count("\n") + 1
    live.write_text(text.replace(last, f"(cumulative: {cumulative[-1] + 1} bytes)"))
    (failed,) = bufferhouse.ingest(module, db=tmp_path / "w.duckdb").failed
    assert (failed.error.path, failed.error.line) == (str(live), line)
    want = f"cumulative {cumulative[-1] + 1} bytes, but the running sum is {sum(sizes)}"
    assert want in failed.error.message


def _copy_module(tmp_path: Path, program: str) -> Path:
    """A corpus module's files, unzipped into a directory of their own."""
    out = tmp_path / "module"
    out.mkdir()
    for path in (CORPUS / program).iterdir():
        if path.name.endswith(".gz"):
            (out / path.name[:-3]).write_bytes(gzip.decompress(path.read_bytes()))
        else:
            (out / path.name).write_bytes(path.read_bytes())
    return out


def test_stack_trace_invariants(fleet_db):
    """I41-I46 on every module with a stack-trace breakdown."""
    with _con(fleet_db) as con:
        modules = con.execute(
            """
            SELECT module_id, logical_peak_bytes FROM modules
            WHERE list_contains(sections, 'stack_trace')
            """
        ).fetchall()
        nodes = con.execute(
            """
            SELECT module_id, ordinal, depth, parent_ordinal, percent, total_bytes,
                   current_bytes, remaining_bytes
            FROM stack_trace ORDER BY module_id, ordinal
            """
        ).fetchall()
    assert len(modules) > 60
    by_module: dict[int, list] = {}
    for row in nodes:
        by_module.setdefault(row[0], []).append(row[1:])
    for module_id, peak in modules:
        rows = by_module.get(module_id, [])
        if not rows:  # a zero-byte peak prints the header and no nodes
            assert peak == 0
            continue
        total = sum(r[4] for r in rows if r[1] == 0)
        assert total == peak  # I41, I46
        assert rows[-1][6] == 0  # I42
        running = 0
        for ordinal, _depth, _parent, pct, node_total, current, remaining in rows:
            running += current
            assert remaining == total - running  # I43
            if total:
                assert abs(pct - round(100 * node_total / total, 1)) < 0.051  # I44
            children = sum(r[4] for r in rows if r[2] == ordinal)
            assert node_total == current + children  # I45


def test_stack_frame_ids_resolve_to_source_lines(fleet_db):
    with _con(fleet_db) as con:
        resolved, unresolved = con.execute(
            """
            SELECT count(*) FILTER (WHERE source_file IS NOT NULL),
                   count(*) FILTER (WHERE source_file IS NULL)
            FROM instructions WHERE stack_frame_id IS NOT NULL
            """
        ).fetchone()
    assert resolved > 500
    assert unresolved == 0


def test_sample_003_fragmentation_and_heap_peak(fleet_db):
    """metrics.md c.6: arena 4 of 66048 bytes has 1056 bytes live at most, 512 + 512 + the
    32-byte tuple fusion.36{}; a tuple-shaped value is a pointer table XLA never
    heap-simulates (its own allocation, merged into the temp one by
    CombineTempAllocations), so the heap peak leaves it out: 1024 (docs/metrics.md)."""
    table = bufferhouse.query("fragmentation", db=fleet_db, module="003_186bba49641ec33a")
    rows = {r["allocation_index"]: r for r in table.to_pylist()}
    assert rows[4]["size"] == 66048
    assert rows[4]["max_live_bytes"] == 1056 - 32
    assert rows[4]["waste_bytes"] == 64992 + 32
    modules = bufferhouse.query("modules", db=fleet_db, module="003_186bba49641ec33a")
    assert modules.column("heap_peak_bytes").to_pylist() == [4195328 + 1056 - 32]
    assert modules.column("total_bytes").to_pylist() == [4282880]
    assert modules.column("logical_peak_bytes").to_pylist() == [4210772]


@pytest.mark.slow
def test_heap_timeline_maximum_is_heap_peak(fleet_db):
    """The SQL sweep (heap-timeline) and the ingest-time sweep agree for every module."""
    with _con(fleet_db) as con:
        bufferhouse.queries.use_package_views(con)
        targets = con.execute(
            """
            SELECT CAST(module_id AS VARCHAR), color, heap_peak_bytes, peak_time
            FROM heap_peaks WHERE heap_peak_bytes IS NOT NULL
            """
        ).fetchall()
        checked = 0
        for module, color, heap_peak, peak_time in targets:
            t = bufferhouse.queries.run(con, "heap-timeline", {"module": module, "space": color})
            live = t.column("live_bytes").to_pylist()
            assert max(live) == heap_peak, (module, color)
            if peak_time is not None:
                assert live.index(max(live)) == peak_time
            checked += 1
    assert checked > 190


@pytest.mark.slow
def test_reingest_adds_nothing(tmp_path):
    db = tmp_path / "w.duckdb"
    first = bufferhouse.ingest([SAMPLES, CORPUS / "jax-0.10.2"], db=db, jobs=2)
    counts = _table_counts(db)
    second = bufferhouse.ingest([SAMPLES, CORPUS / "jax-0.10.2"], db=db, jobs=2)
    assert len(first.loaded) > 0 and not first.failed
    assert len(second.loaded) == 0 and len(second.present) == len(first.loaded)
    after = _table_counts(db)
    assert after == counts  # not even a `runs` row: the second run wrote nothing
    third = bufferhouse.ingest(SAMPLES, db=db, jobs=1, labels={"seen": "again"})
    assert len(third.present) == 5
    labelled = _table_counts(db)
    assert labelled["labels"] == counts["labels"] + 5
    assert labelled["runs"] == counts["runs"] + 1


def _table_counts(db: Path) -> dict[str, int]:
    with _con(db) as con:
        names = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
        return {n: con.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for n in names}


@pytest.mark.parametrize("jobs", [1, 2])
def test_row_counts_recorded_match_tables(tmp_path, jobs):
    db = tmp_path / "w.duckdb"
    bufferhouse.ingest(SAMPLES, db=db, jobs=jobs)
    with _con(db) as con:
        recorded = con.execute(
            "SELECT module_id, unnest(map_keys(row_counts)), unnest(map_values(row_counts)) FROM modules"
        ).fetchall()
        for module_id, table, count in recorded:
            actual = con.execute(
                f'SELECT count(*) FROM "{table}" WHERE module_id = ?', [module_id]
            ).fetchone()[0]
            assert actual == count, (table, module_id)
