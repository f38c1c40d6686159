"""One hand-made fixture per edge case of docs/format.md §11 / §9, with expectations
worked out by hand from the format (not from the parser's output)."""

from __future__ import annotations

import duckdb
import pytest

import bufferhouse
from tests.conftest import DATA

EDGE = DATA / "edge"


@pytest.fixture(scope="module")
def edge_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("edge") / "edge.duckdb"
    report = bufferhouse.ingest(EDGE, db=db, jobs=1)
    assert report.ok, [o.error.describe() for o in report.failed]
    assert not [w for o in report.outcomes for w in o.warnings]
    with duckdb.connect(str(db), read_only=True) as con:
        yield con


def _module(con, stem: str) -> dict:
    cur = con.execute("SELECT * FROM modules WHERE file_stem = ?", [stem])
    names = [d[0] for d in cur.description]
    row = cur.fetchone()
    assert row is not None, stem
    return dict(zip(names, row))


def _count(con, table: str, module_id: int) -> int:
    return con.execute(
        f'SELECT count(*) FROM "{table}" WHERE module_id = ?', [module_id]
    ).fetchone()[0]


def test_crlf_parses_like_lf(edge_db):
    """CRLF line ends work, and give exactly the rows of the same text with LF (sample 000)."""
    from bufferhouse.parse import parse_module
    from tests.conftest import SAMPLES

    crlf = parse_module([("buffer_assignment", str(EDGE / "crlf-buffer-assignment.txt"))])
    lf = parse_module([("buffer_assignment", str(SAMPLES / "000_3ae9b34c349c690e.txt"))])
    assert crlf.rows() == lf.rows() and crlf.facts == lf.facts
    assert _module(edge_db, "crlf")["total_bytes"] == 40


def test_glued_instruction_text_2024(edge_db):
    m = _module(edge_db, "glued_2024")
    assert m["format_era"] == "2024-01-16"
    assert _count(edge_db, "positions", m["module_id"]) == 9
    assert _count(edge_db, "uses", m["module_id"]) == 10
    texts = [
        r[0]
        for r in edge_db.execute(
            "SELECT text FROM instructions WHERE module_id = ? ORDER BY instruction",
            [m["module_id"]],
        ).fetchall()
    ]
    assert len(texts) == 7 and not any("<" in t for t in texts)
    peak = edge_db.execute(
        "SELECT instruction, shape_index, bytes, cumulative_bytes, value_id IS NOT NULL "
        "FROM peak_values WHERE module_id = ? ORDER BY ordinal",
        [m["module_id"]],
    ).fetchall()
    assert peak[0] == ("Arg_0.1", None, 4, None, True)
    assert peak[-1] == ("tuple.149.0", None, 16, None, True)
    assert m["logical_peak_bytes"] == 40 and m["logical_peak_time"] == 6


def test_pointer_and_no_space_2022(edge_db):
    m = _module(edge_db, "pointer_nospace_2022")
    assert m["format_era"] == "2021-09-23"
    addresses = edge_db.execute(
        "SELECT address FROM allocations WHERE module_id = ? ORDER BY allocation_index",
        [m["module_id"]],
    ).fetchall()
    assert addresses[0] == ("0x7f3a1c000000",) and addresses[6] == ("0x7f3a1c000006",)
    ops = edge_db.execute(
        "SELECT opcode, op_name FROM instructions WHERE module_id = ? AND instruction = 'Arg_0.1'",
        [m["module_id"]],
    ).fetchall()
    assert ops == [("parameter", "args[0]")]


def test_uses_not_initialized(edge_db):
    m = _module(edge_db, "uses_not_initialized")
    assert _count(edge_db, "uses", m["module_id"]) == 0
    assert _count(edge_db, "positions", m["module_id"]) == 9


def test_no_instruction_text_no_live_range_2020(edge_db):
    m = _module(edge_db, "no_live_range_2020")
    assert m["format_era"] == "2019-10-14"
    assert m["sections"] == ["allocations", "totals", "used_values"]
    assert m["schedule_length"] is None and m["logical_peak_bytes"] is None
    assert _count(edge_db, "instructions", m["module_id"]) == 0
    # No temp allocation: the heap peak is the indefinite allocations alone.
    assert m["heap_peak_bytes"] == 40


def test_empty_schedule(edge_db):
    m = _module(edge_db, "empty_schedule")
    assert (m["schedule_length"], m["logical_peak_time"], m["logical_peak_bytes"]) == (0, 0, 0)
    for table in ("sequence", "live_ranges", "peak_values"):
        assert _count(edge_db, table, m["module_id"]) == 0


def test_gpu_split_cross_color_dynamic(edge_db):
    m = _module(edge_db, "module_0042.jit_step.sm_9.0_gpu_after_optimizations")
    assert (m["backend"], m["target"], m["module_name"], m["module_number"]) == (
        "gpu",
        "sm_9.0",
        "jit_step",
        42,
    )
    assert (m["layout"], m["format_era"], m["total_bytes"]) == ("split", "2026-06-17", 2328)
    assert m["logical_peak_time"] == 4 and m["logical_peak_bytes"] == 2064
    assert m["heap_peak_bytes"] == 8 + 2056
    mid = m["module_id"]
    cross = edge_db.execute(
        "SELECT value_id FROM assignments WHERE module_id = ? AND reused_cross_color", [mid]
    ).fetchall()
    assert cross == [(13,)]
    heap2 = edge_db.execute(
        "SELECT temp_allocation_bytes, temp_peak_bytes, peak_time FROM heap_peaks "
        "WHERE module_id = ? AND color = 2",
        [mid],
    ).fetchone()
    assert heap2 == (264, 16, 2)
    dyn = edge_db.execute(
        "SELECT dims, is_dynamic, logical_bytes FROM hlo_values WHERE module_id = ? AND value_id = 14",
        [mid],
    ).fetchone()
    assert dyn == ([128, 4], True, 2048)
    src = edge_db.execute(
        "SELECT instruction, source_file, source_line, custom_call_target FROM instructions "
        "WHERE module_id = ? ORDER BY instruction",
        [mid],
    ).fetchall()
    assert ("exp.1", "step.py", 11, None) in src
    assert ("dyn.3", None, None, "PadToStatic") in src
    report = edge_db.execute(
        "SELECT report_version, color, space_name, total_bytes FROM usage_report "
        "WHERE module_id = ? ORDER BY color",
        [mid],
    ).fetchall()
    assert report == [("B", 0, "default", 2064), ("B", 2, "color_2", 264)]
    tree = edge_db.execute(
        "SELECT depth, parent_ordinal, name, total_bytes FROM stack_trace "
        "WHERE module_id = ? ORDER BY ordinal",
        [mid],
    ).fetchall()
    assert tree[0] == (0, None, "main.5", 2064) and tree[1] == (1, 0, "jit(step)/pad", 2048)
    spaces = bufferhouse.query("memory-spaces", db=edge_db_path(edge_db), module=str(mid))
    assert ("gpu", 2, "temp") in {
        (r["backend"], r["color"], r["space_name"]) for r in spaces.to_pylist()
    }


def edge_db_path(con) -> str:
    return con.execute(
        "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
    ).fetchone()[0]


def test_live_range_not_available(edge_db):
    m = _module(edge_db, "module_0007.jit_g.cpu_after_optimizations")
    assert "live_range_unavailable" in m["sections"]
    assert m["schedule_length"] is None
    assert m["heap_peak_bytes"] == 16


def test_stdout_log_members_parse_like_files(edge_db):
    """`--xla_dump_to=-` logs: the files between `*** Begin/End NAME ***` lines load
    exactly as the same files on disk (docs/format.md §1.2, §11.17)."""
    from bufferhouse.parse import parse_module
    from bufferhouse.parse.discover import discover
    from tests.conftest import SAMPLES

    log = EDGE / "stdout_log_2026.log"
    groups = {g.stem: g for g in discover([log])}
    assert set(groups) == {
        "module_0001.jit_f.cpu_after_optimizations",
        "module_0042.jit_step.sm_9.0_gpu_after_optimizations",
    }
    gpu = groups["module_0042.jit_step.sm_9.0_gpu_after_optimizations"]
    on_disk = next(g for g in discover([EDGE / "gpu_split_2026"]) if g.stem == gpu.stem)
    from_log = parse_module(gpu.dump_files(), gpu.hlo)
    from_files = parse_module(on_disk.dump_files(), on_disk.hlo)
    assert from_log.rows() == from_files.rows() and "hlo" in from_log.sections
    cpu = groups["module_0001.jit_f.cpu_after_optimizations"]
    sample = parse_module([("buffer_assignment", str(SAMPLES / "000_3ae9b34c349c690e.txt"))])
    assert parse_module(cpu.dump_files()).rows() == sample.rows()
    # In a tree, the log's copy of module_0042 is the same content: loaded once.
    stems = [r[0] for r in edge_db.execute("SELECT file_stem FROM modules").fetchall()]
    assert stems.count("module_0042.jit_step.sm_9.0_gpu_after_optimizations") == 1
    assert "module_0001.jit_f.cpu_after_optimizations" in stems
