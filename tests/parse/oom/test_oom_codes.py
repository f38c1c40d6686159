"""XLA's error-coded OOMs (E0100, E0101, E1000, E1001, E1002): program, memory space,
required and available bytes, and the oom-* queries over them (issue 36 item 4).

e1000-v5e.log is the exception text of a real deviceless v5e compile
(tests/data/jax012/sweep/make_sweep.py, batch=524288); libtpu-stderr.log is libtpu
0.0.50's own log line of an E1000 (TPU_STDERR_LOG_LEVEL=0); catalogue.log holds the
samples of XLA's error catalogue (docs/errors/*.md).
"""

from __future__ import annotations

import pytest

import bufferhouse
from bufferhouse.parse.oom import read_log
from tests.conftest import DATA

DATA = DATA / "oom-codes"
G = 1 << 30


def _events(name: str) -> list[dict]:
    return read_log(str(DATA / name)).events.to_pylist()


def test_the_real_e1000_gives_program_space_required_and_available():
    (ev,) = _events("e1000-v5e.log")
    assert (ev["error_code"], ev["error_name"]) == ("E1000", "CompileTimeHbmOom")
    assert ev["form"] == "tpu_compile" and ev["family"] == "tpu"
    assert ev["program_name"] == "jit_step"
    assert ev["memory_space"] == "hbm"
    # printed rounded: 18.06G required for HLO temporaries, 15.75G available
    assert ev["used_bytes"] == round(18.06 * G) == ev["hlo_temp_bytes"]
    assert ev["capacity_bytes"] == round(15.75 * G)
    assert ev["error_type"] == "JaxRuntimeError"
    assert ev["problem_count"] == 0 and not ev["truncated"]


def test_every_oom_code_of_the_catalogue():
    by_code = {}
    for ev in _events("catalogue.log"):
        by_code.setdefault(ev["error_code"], []).append(ev)
    assert sorted(by_code) == ["E0100", "E0101", "E1000", "E1001", "E1002"]
    (e0100,) = by_code["E0100"]
    assert e0100["error_name"] == "RuntimeBufferAllocationFailure"
    assert (e0100["requested_bytes"], e0100["free_bytes"]) == (8 << 20, round(6.43 * (1 << 20)))
    assert e0100["memory_space"] == "hbm" and e0100["form"] == "tpu_runtime"
    (e0101,) = by_code["E0101"]
    assert e0101["program_name"] == "jit_embedding_pipeline_step_fn"
    assert e0101["requested_bytes"] == round(29.49 * G)
    compile_hbm, abort_early = by_code["E1000"]
    assert (compile_hbm["used_bytes"], compile_hbm["capacity_bytes"]) == (
        round(126.45 * G),
        round(94.75 * G),
    )
    assert (abort_early["used_bytes"], abort_early["capacity_bytes"]) == (
        round(3.84 * (1 << 40)),
        round(90.96 * G),
    )
    assert abort_early["memory_space"] == "hbm"
    (e1001,) = by_code["E1001"]
    assert (e1001["requested_bytes"], e1001["capacity_bytes"]) == (134217728, 67108864)
    assert e1001["memory_space"] == "vmem" and e1001["error_name"] == "CompileTimeScopedVmemOom"
    (e1002,) = by_code["E1002"]
    assert e1002["used_bytes"] == round(34.82 * G) + round(174.10 * G)
    assert e1002["capacity_bytes"] == round(95.74 * G)
    assert all(ev["problem_count"] == 0 for evs in by_code.values() for ev in evs)


def test_libtpu_long_form_names_its_module():
    (ev,) = _events("libtpu-stderr.log")
    assert ev["program_name"] == "jit_oom_step" and ev["error_code"] is None
    assert (ev["used_bytes"], ev["capacity_bytes"]) == (round(37.00 * G), round(15.75 * G))
    assert ev["exceeded_bytes"] == round(21.25 * G)


def test_a_code_without_its_message_is_not_made_up(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("RESOURCE_EXHAUSTED: E1000: CompileTimeHbmOom: something new about hbm\n")
    (ev,) = read_log(str(log)).events.to_pylist()
    assert ev["error_code"] == "E1000" and ev["form"] == "other"
    assert ev["used_bytes"] is None and ev["capacity_bytes"] is None


def test_the_cut_at_the_top_tpu_excerpt_keeps_its_tiled_shapes(tmp_path):
    log = tmp_path / "cut.log"
    log.write_text(
        "  2. Size: 3.00G\n"
        "     Shape: u32[6291456,1]{1,0:T(8,128)}\n"
        "     Unpadded size: 24.00M\n"
        "     XLA label: iota.4 = iota(), iota_dimension=0\n"
        "     Allocation type: HLO temp\n"
        "     ==========================\n"
    )
    scan = read_log(str(log))
    (buf,) = scan.buffers.to_pylist()
    assert buf["tiles"] == "(8,128)" and buf["dims"] == [6291456, 1]
    assert buf["padding_bytes"] == 3 * G - 24 * (1 << 20)


@pytest.fixture(scope="module")
def coded_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("codes") / "codes.duckdb"
    bufferhouse.ingest([DATA], db=db, jobs=1, labels={"topology": "v5e:1x1"})
    return db


def test_the_oom_queries_read_the_coded_events(coded_db):
    rows = bufferhouse.query("oom-events", db=coded_db, program="jit_step")
    (row,) = rows.to_pylist()
    assert row["form"] == "tpu_compile" and row["memory_space"] == "hbm"
    assert (row["total_bytes"], row["capacity_bytes"]) == (round(18.06 * G), round(15.75 * G))
    assert row["labels"] == "topology=v5e:1x1"
    every = bufferhouse.query("oom-events", db=coded_db).to_pylist()
    assert {r["program_name"] for r in every} >= {
        "jit_step",
        "jit_oom_step",
        "jit_embedding_pipeline_step_fn",
    }
    # the one-line E1001 lists its allocation, which has no op_name nor source line
    buffers = bufferhouse.sql("SELECT count(*) AS n FROM oom_buffers", db=coded_db).to_pylist()
    assert buffers == [{"n": 1}]
    assert bufferhouse.query("oom-culprits", db=coded_db).num_rows == 0
    # oom-vs-peak matches by program name: no module of that name here, no rows
    assert bufferhouse.query("oom-vs-peak", db=coded_db).num_rows == 0
