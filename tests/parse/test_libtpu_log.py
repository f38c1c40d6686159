"""libtpu's log beside a TPU dump (parse/libtpu.py, parse/tpulog.py): a companion of the
modules it names, whose summary decides memory_analysis()'s temp where the buffer
assignment alone cannot (every heap-simulated value a scalar) and states the generated
code size. Oracle: memory_analysis.json of the same compile (tests/data/jax012).
Never a wrong figure: a log that does not name the module unambiguously, or disagrees
with the dump, leaves the figure as the dump alone gives it, with a warning."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import bufferhouse
from bufferhouse.parse.tpulog import read_libtpu_log, slack, summary_for
from tests.conftest import DATA

DATA = DATA / "jax012"
LOG = "libtpu-stderr.log"
#: Every TPU compile of the fixtures: the program directories and both sides of the pairs.
TPU = sorted(
    p.parent
    for p in DATA.rglob("memory_analysis.json")
    if "sweep" not in p.parts
    and json.loads(p.read_text())["fixture"]["backend"] == "tpu"
    and json.loads(p.read_text())["memory_analysis"] is not None
)
#: A compile whose HBM temporaries are all scalars: only the log tells its temp.
SCALARS = DATA / "tpu-v5e" / "mlp_bf16_donate"


def _analysis(fixture: Path) -> dict:
    return json.loads((fixture / "memory_analysis.json").read_text())["memory_analysis"]


def _name(fixture: Path) -> str:
    return json.loads((fixture / "memory_analysis.json").read_text())["module_name"]


def _modules(db: Path, name: str = "jit_mlp_step") -> list[dict]:
    return bufferhouse.sql(
        "SELECT paths[1] AS path, xla_temp_bytes, generated_code_bytes FROM modules"
        " WHERE module_name = ?",
        db=db,
        params=[name],
    ).to_pylist()


def _warnings(db: Path) -> list[str]:
    rows = bufferhouse.sql(
        "SELECT message FROM diagnostics WHERE severity = 'warning' AND message LIKE '%libtpu%'",
        db=db,
    ).to_pylist()
    return [r["message"] for r in rows]


def test_every_tpu_compile_with_its_log_gets_memory_analysis_temp_and_code(tmp_path):
    """32 of 32 TPU compiles: xla_temp_bytes == memory_analysis() temp (20 of them NULL
    without the log); generated_code_bytes, where not NULL, == generated_code_size, and
    NULL only where the log prints no summary or a part of 1 MiB or more."""
    assert len(TPU) == 32 and all((f / LOG).is_file() for f in TPU)
    temps, codes, code_null = 0, 0, []
    for fixture in TPU:  # one warehouse each: a pair's sides may be one module
        db = _ingest_one(fixture, tmp_path)
        (row,) = _modules(db, _name(fixture))
        ma = _analysis(fixture)
        assert not _warnings(db), fixture
        # the log is no OOM event, though it is scanned as a log
        assert not bufferhouse.sql("SELECT * FROM oom_events", db=db).num_rows
        assert row["xla_temp_bytes"] == ma["temp_size_in_bytes"], fixture
        temps += 1
        if row["generated_code_bytes"] is None:
            code_null.append(fixture.relative_to(DATA))
        else:
            assert row["generated_code_bytes"] == ma["generated_code_size_in_bytes"], fixture
            codes += 1
    assert (temps, codes) == (32, 22), code_null


def _copy(fixture: Path, dest: Path, log: str | None = None) -> Path:
    shutil.copytree(fixture, dest)
    if log is not None:
        (dest / LOG).write_text(log)
    return dest


def _ingest_one(tree: Path, tmp: Path) -> Path:
    db = tmp / f"{tree.relative_to(tree.parents[1]).as_posix().replace('/', '-')}.duckdb"
    assert not bufferhouse.ingest([tree], db=db, jobs=1).failed
    return db


def test_without_the_log_the_scalar_only_temp_is_null(tmp_path):
    tree = _copy(SCALARS, tmp_path / "nolog")
    (tree / LOG).unlink()
    db = _ingest_one(tree, tmp_path)
    assert [(m["xla_temp_bytes"], m["generated_code_bytes"]) for m in _modules(db)] == [
        (None, None)
    ]


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        # a log that names a second module: which one its unnamed summary is, is not known
        (
            lambda t: t + "I1207 09:04:58.0 1 tpu_plumb_vmem_info.cc:677] for module: jit_x\n",
            "names modules jit_mlp_step, jit_x",
        ),
        # a log that names no module
        (lambda t: t.replace("for module: jit_mlp_step", "for module:"), "names no module"),
        # a Padded figure the dump does not have: the log is of another compile
        (lambda t: t.replace("Padded (4.0K)", "Padded (8.0K)"), "Padded (8,192 bytes)"),
        # two summaries of the module that differ
        (lambda t: t + t.replace("128.0K (87.6%", "144.0K (87.6%"), "different summaries"),
    ],
    ids=["names-two", "names-none", "disagrees", "two-summaries"],
)
def test_an_ambiguous_or_disagreeing_log_leaves_null_and_says_why(tmp_path, edit, why):
    text = (SCALARS / LOG).read_text()
    tree = _copy(SCALARS, tmp_path / "edited", edit(text))
    db = _ingest_one(tree, tmp_path)
    assert [m["xla_temp_bytes"] for m in _modules(db)] == [None]
    (warning,) = _warnings(db)
    assert why in warning and "xla_temp_bytes stays NULL" in warning, warning


def test_two_modules_of_one_name_in_the_directory_get_no_summary(tmp_path):
    tree = _copy(SCALARS, tmp_path / "twice")
    for f in list(tree.glob("module_0000.*after_optimizations*")):
        if f.is_file():
            shutil.copy(f, tree / f.name.replace("module_0000", "module_0007"))
    db = _ingest_one(tree, tmp_path)
    modules = _modules(db)
    assert len(modules) == 2 and all(m["xla_temp_bytes"] is None for m in modules)
    assert all("2 modules here are named jit_mlp_step" in w for w in _warnings(db))


def test_a_second_log_with_the_same_summary_is_no_ambiguity(tmp_path):
    tree = _copy(SCALARS, tmp_path / "copied")
    shutil.copy(tree / LOG, tree / "again.log")
    db = _ingest_one(tree, tmp_path)
    assert [m["xla_temp_bytes"] for m in _modules(db)] == [258_048]


def test_a_log_that_names_its_summaries_gives_each_module_its_own():
    """The `XLA::TPU module name:` line before a summary names it (an uncut log); a
    summary of another module in the same log is never taken."""
    one = (SCALARS / LOG).read_text()
    other = one.replace("HLO temp         128.0K", "HLO temp         144.0K")
    head = "I1207 09:04:57.340 1 deepsea_compiler_backend.cc:2247] XLA::TPU module name: "
    log = read_libtpu_log(f"{head}jit_other\n{other}{head}jit_mlp_step\n{one}")
    assert log.names == {"jit_other", "jit_mlp_step"}
    assert [p.module_name for p in log.programs] == ["jit_other", "jit_mlp_step"]
    mine = summary_for(log, "jit_mlp_step")
    assert mine.requirements["hbm"].hlo_temp.bytes == 128 * 1024
    assert summary_for(log, "jit_other").requirements["hbm"].hlo_temp.bytes == 144 * 1024
    assert "no summary of jit_y" in summary_for(log, "jit_y")


@pytest.mark.parametrize(
    ("printed", "bytes_either_way"),
    [("8B", 0), ("132.0K", 52), ("2.14M", 5243 + 1024), ("15.75G", 5368710 + 1024)],
)
def test_slack_of_a_printed_size(printed, bytes_either_way):
    assert slack(printed) == bytes_either_way


def test_the_log_given_by_name_beside_its_dump(tmp_path):
    """A dump file and the log both given by name: the log is the module's companion,
    and no failure for holding no OOM message."""
    tree = _copy(SCALARS, tmp_path / "named")
    (ba,) = tree.glob("*after_optimizations-buffer-assignment.txt")
    db = tmp_path / "named.duckdb"
    report = bufferhouse.ingest([ba, tree / LOG], db=db, jobs=1)
    assert not report.failed, [str(f.error) for f in report.failed]
    assert [m["xla_temp_bytes"] for m in _modules(db)] == [258_048]
