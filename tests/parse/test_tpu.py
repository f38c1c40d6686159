"""Real TPU compiles (tests/data/tpu, deviceless, jax 0.12 + libtpu 0.0.50.1): every form
loads, and the figures equal the compiler's own (memory_analysis(), libtpu's log).

Oracles: memory_analysis.json (compiled.memory_analysis() of the same compile),
libtpu-stderr.log (libtpu's memory summary), the proto's own is_tuple flags, and the
text and proto of one compile against each other.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

import bufferhouse
from bufferhouse.parse.derive.tpu import TPU_TEMP_STEP
from bufferhouse.parse.proto import hlo_pb2
from bufferhouse.parse.tpulog import parse_libtpu_log
from tests.conftest import DATA

DATA = DATA / "tpu"
PROGRAMS = sorted(p.name for p in DATA.iterdir() if p.is_dir())
FORMS = {
    "proto": ("*.hlo.pb",),
    "text": ("*.txt",),
    "text+proto": ("*.txt", "*.hlo.pb"),
}


def _analysis(program: str) -> dict:
    return json.loads((DATA / program / "memory_analysis.json").read_text())


@pytest.fixture(scope="module")
def warehouses(tmp_path_factory) -> dict[str, Path]:
    """One warehouse per form, each holding all five compiles."""
    out = {}
    for form, patterns in FORMS.items():
        root = tmp_path_factory.mktemp(form.replace("+", "_"))
        for program in PROGRAMS:
            (root / program).mkdir()
            for pattern in patterns:
                for f in (DATA / program).glob(pattern):
                    shutil.copy(f, root / program / f.name)
        db = root / "w.duckdb"
        report = bufferhouse.ingest([root], db=db, jobs=1)
        out[form] = (db, report)
    return out


def _rows(db: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).fetchall()


def _by_program(db: Path, sql: str) -> dict[str, tuple]:
    """{program: row} for a query whose first column is the module's first path."""
    return {Path(r[0]).parent.name: r[1:] for r in _rows(db, sql)}


@pytest.mark.parametrize("form", list(FORMS))
def test_every_compile_loads_with_memory_analysis_temp(warehouses, form):
    db, report = warehouses[form]
    assert report.ok, report
    got = _by_program(db, "SELECT paths[1], backend, xla_temp_bytes FROM modules")
    assert sorted(got) == PROGRAMS
    for program, (backend, temp) in got.items():
        assert backend == "tpu"
        if program == "v6e_scan_remat":  # loop counters only: the rule is not known (NULL)
            assert temp is None
            continue
        assert temp == _analysis(program)["temp_size_in_bytes"], program


@pytest.mark.parametrize("form", ["proto", "text+proto"])
def test_peak_argument_output_alias_equal_memory_analysis(warehouses, form):
    db, _ = warehouses[form]
    got = _by_program(
        db,
        """
        SELECT m.paths[1], m.xla_peak_bytes, s.parameter_bytes, s.output_bytes, s.alias_bytes
        FROM modules m JOIN space_totals s ON s.module_id = m.module_id AND s.color = 0
        """,
    )
    for program, (peak, argument, output, alias) in got.items():
        ma = _analysis(program)
        assert peak == ma["peak_memory_in_bytes"], program
        assert argument == ma["argument_size_in_bytes"], program
        assert output == ma["output_size_in_bytes"], program
        assert alias == ma["alias_size_in_bytes"], program


_PEAKS = """
    SELECT m.paths[1], list(h.color ORDER BY h.color), list(h.temp_peak_bytes ORDER BY h.color),
           list(h.heap_peak_bytes ORDER BY h.color)
    FROM heap_peaks h JOIN modules m USING (module_id) GROUP BY ALL
"""


def test_heap_peaks_are_one_figure_in_every_form(warehouses):
    """Per memory space: the text's live-range sweep equals the proto's trace."""
    proto = _by_program(warehouses["proto"][0], _PEAKS)
    assert all(None not in row[1] for row in proto.values())
    for form in ("text", "text+proto"):
        assert _by_program(warehouses[form][0], _PEAKS) == proto, form


def test_trace_indices_are_pre_combine_and_traces_lie_in_one_space(warehouses):
    """XLA's trace index is the allocation's index before CombineTempAllocations (v6e: 17
    and 18 of 16 allocations), and a trace's color is its buffers' allocation's."""
    db, _ = warehouses["proto"]
    stale = _rows(
        db,
        """
        SELECT count(*) FROM (SELECT DISTINCT module_id, allocation_index FROM heap_events) e
        ANTI JOIN allocations a USING (module_id, allocation_index)
        """,
    )[0][0]
    assert stale >= 2
    wrong = _rows(
        db,
        """
        SELECT e.module_id, e.trace_index FROM heap_events e
        JOIN assignments s USING (module_id, value_id)
        JOIN allocations a ON a.module_id = s.module_id AND a.allocation_index = s.allocation_index
        WHERE a.color <> e.color
        """,
    )
    assert wrong == []
    colors = _rows(db, "SELECT DISTINCT color FROM heap_events ORDER BY 1")
    assert [c for (c,) in colors] == [0, 1, 2, 6]


def test_vmem_trace_counts_aliases_once(warehouses):
    """MSA's VMEM trace has no SHARE_WITH for a loop's aliases: the space's peak stays
    within its allocation (4,849,664 bytes on v6e), while memory_analysis() peak,
    XLA's replay, counts them twice (tested above)."""
    db, _ = warehouses["proto"]
    over = _rows(
        db,
        """
        SELECT h.module_id, h.color, h.temp_peak_bytes, h.temp_allocation_bytes
        FROM heap_peaks h WHERE h.temp_peak_bytes > h.temp_allocation_bytes
        """,
    )
    assert over == []
    v6e = _by_program(db, _PEAKS)["v6e_scan_remat"]
    assert dict(zip(v6e[0], v6e[1]))[1] == 4849664


def test_tuple_allocation_read_from_offset_zero_matches_the_proto_flag():
    """XLA's CombineTempAllocations keeps the first part's is_tuple flag (its values stay
    at offset 0): read from the values at offset 0, the flag matches the proto's."""
    checked = 0
    for program in PROGRAMS:
        proto = hlo_pb2.HloProto()
        proto.ParseFromString(next((DATA / program).glob("*.hlo.pb")).read_bytes())
        ba = proto.buffer_assignment
        instructions = {i.id: i for c in proto.hlo_module.computations for i in c.instructions}
        lbs = {lb.id: lb for lb in ba.logical_buffers}

        def tuple_shaped(value_id: int, lbs=lbs, instructions=instructions) -> bool:
            at = lbs[value_id].defined_at
            shape = instructions[at.instruction_id].shape
            for i in at.shape_index:
                shape = shape.tuple_shapes[i]
            return shape.element_type == 13

        for a in ba.buffer_allocations:
            at_zero = [s.logical_buffer_id for s in a.assigned if s.offset == 0]
            assert at_zero, (program, a.index)
            assert any(not tuple_shaped(v) for v in at_zero) == (not a.is_tuple), (
                program,
                a.index,
            )
            checked += 1
    assert checked > 60


def _round(n: int) -> int:
    return -(-n // TPU_TEMP_STEP) * TPU_TEMP_STEP


def _close(printed: int, exact: int) -> bool:
    """libtpu prints two decimals of the unit (`1.00M`, `512.6K`): within half of the
    last digit, 0.5% of the figure (or 512 bytes for sizes printed in K)."""
    return abs(printed - exact) <= max(exact * 5 // 1000, 512 if exact >= 1024 else 0)


def test_libtpu_log_agrees_with_the_derived_figures(warehouses):
    """libtpu's `Program hbm requirement` / `HLO temp`: R is the color-0 temp allocation
    rounded up to 16 KiB, Padded the most temp bytes in use plus the tuple tables, the
    fragmentation R - Padded; `Total hbm usage` program is the hbm requirement, and that
    less its HLO temp (overlays and globals) memory_analysis()'s generated code."""
    db, _ = warehouses["proto"]
    rows = _by_program(
        db,
        """
        SELECT m.paths[1], m.module_name, m.xla_temp_bytes,
          (SELECT max(size) FROM allocations a
            WHERE a.module_id = m.module_id AND a.color = 0 AND a.category = 'temp'),
          (SELECT sum(size) FROM allocations a
            WHERE a.module_id = m.module_id AND a.color = 1 AND a.category = 'temp')
        FROM modules m
        """,
    )
    for program, (module, temp, hbm_temp_alloc, vmem_alloc) in rows.items():
        ma = _analysis(program)
        (log,) = parse_libtpu_log((DATA / program / "libtpu-stderr.log").read_text())
        assert log.module_name == module
        hbm = log.requirements["hbm"]
        assert log.totals["hbm"].parts["program"] == hbm.bytes
        code = sum(v for k, v in hbm.parts.items() if k != "HLO temp")  # overlays, global
        assert _close(code, ma["generated_code_size_in_bytes"]), program
        assert _close(log.totals["hbm"].parts["arguments"], ma["argument_size_in_bytes"])
        assert _close(log.outputs["hbm"][0], ma["output_size_in_bytes"])
        assert _close(log.requirements["vmem"].hlo_temp.bytes, vmem_alloc), program
        hlo = log.requirements["hbm"].hlo_temp
        if not temp:  # tuples only (0), or loop scalars only (NULL): no HBM temp printed
            assert hlo is None, program
            continue
        r = _round(hbm_temp_alloc)
        assert _close(hlo.bytes, r), program
        assert _close(hlo.padded_bytes, 2 * r - temp), program
        assert _close(hlo.fragmentation_bytes, temp - r), program
        assert _close(hlo.bytes + hlo.fragmentation_bytes, temp), program


@pytest.mark.parametrize(
    ("text", "tiled", "logical"),
    [
        ("bf16[8192,1024]{1,0:T(8,128)(2,1)}", 8192 * 1024 * 2, 8192 * 1024 * 2),
        ("bf16[1001,1000]{1,0:T(8,128)(2,1)}", 1008 * 1024 * 2, 1001 * 1000 * 2),
        ("f32[1024]{0:T(1024)}", 4096, 4096),
        ("f32[1000]{0:T(1024)}", 4096, 4000),
        ("bf16[2048]{0:T(1024)(128)(2,1)}", 4096, 4096),
        ("bf16[]{:T(256)}", 512, 2),
        ("f32[]{:T(128)S(6)}", 512, 4),
        ("pred[]{:T(512)}", 512, 1),
        ("u32[]{:S(2)}", 4, 4),
        ("f32[1024,17]{0,1:T(8,128)}", 1024 * 24 * 4, 1024 * 17 * 4),
        ("bf16[6,128,512]{1,2,0:T(8,128)(2,1)S(1)}", 6 * 128 * 512 * 2, 6 * 128 * 512 * 2),
        ("s4[100]{0:T(1024)E(4)}", 512, 50),
    ],
)
def test_tiled_bytes_follow_array_size(text, tiled, logical):
    """ShapeUtil::ArraySize: the first tile rounds the minor dimensions up."""
    from bufferhouse.parse.shapes import byte_size, parse_shape, tiled_byte_size

    shape = parse_shape(text)
    assert (tiled_byte_size(shape), byte_size(shape)) == (tiled, logical)


def test_tiled_bytes_are_the_assigned_sizes(warehouses):
    """The independent figure: XLA's assigned slice size of every array value of the real
    compiles equals its tiled size, and the padding is size - logical_bytes."""
    db, _ = warehouses["proto"]
    n, equal, padded = _rows(
        db,
        """
        SELECT count(*), count(*) FILTER (WHERE v.tiled_bytes = s.size),
               count(*) FILTER (WHERE s.size > v.logical_bytes)
        FROM hlo_values v JOIN assignments s USING (module_id, value_id)
        WHERE NOT v.is_tuple
        """,
    )[0]
    assert n == equal > 150
    assert padded > 80


def test_memory_spaces_are_named(warehouses):
    """Every color of the real compiles has its TPU name (XProf's memory viewer)."""
    db, _ = warehouses["proto"]
    names = _rows(
        db,
        """
        SELECT DISTINCT h.color, s.name FROM heap_peaks h JOIN modules m USING (module_id)
        LEFT JOIN memory_spaces s ON s.backend = m.backend AND s.color = h.color ORDER BY 1
        """,
    )
    assert names == [(0, "HBM"), (1, "VMEM"), (2, "SFlag"), (6, "SparseCore")]
