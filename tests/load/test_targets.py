"""Each module knows its target and capacity (issue 38 item 2), and the sweep helper
(examples/sweep.py) runs where libtpu is installed.

Oracles: the E1000 text of the same target's failed compile (its "available HBM"),
the GPU target config's device_memory_size, and memory_analysis.json of each compile.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

import bufferhouse
from bufferhouse.errors import QueryError
from bufferhouse.parse.chips import chip
from bufferhouse.parse.oom import read_log
from bufferhouse.parse.target import read_target
from tests.conftest import ROOT

SWEEP = ROOT / "tests" / "data" / "jax012" / "sweep"


def _target(directory: Path):
    (ba,) = directory.glob("*-buffer-assignment.txt")
    return read_target(str(directory), ba.name)


@pytest.mark.parametrize(
    ("target", "kind", "failed"),
    [("v5e_1x1", "TPU v5 lite", "batch=524288"), ("v6e_1x1", "TPU v6 lite", "batch=2097152")],
)
def test_tpu_target_from_topology_and_capacity_as_e1000_states_it(target, kind, failed):
    (event,) = read_log(str(SWEEP / target / failed / "compile-oom.log")).events.to_pylist()
    for directory in sorted((SWEEP / target).glob("batch=*")):
        if (directory / "compile-oom.log").exists():
            continue
        t = _target(directory)
        assert (t.platform, t.device_kind, t.chips) == ("tpu", kind, 1)
        # the documented table's usable figure is the one the compiler states
        assert t.capacity_source == "table"
        assert t.capacity_bytes == event["capacity_bytes"]


def test_gpu_capacity_from_the_target_config_and_past_it_still_compiles():
    seen = 0
    for directory in sorted((SWEEP / "gpu_h100").glob("batch=*")):
        t = _target(directory)
        config = next(directory.glob("*.gpu_target_config.pbtxt")).read_text()
        assert f"device_memory_size: {t.capacity_bytes}" in config
        assert (t.platform, t.device_kind, t.capacity_source) == (
            "gpu",
            "NVIDIA H100 80GB HBM3",
            "dump",
        )
        memory = json.loads((directory / "memory_analysis.json").read_text())["memory"]
        seen += memory["peak_memory_in_bytes"] > t.capacity_bytes
    assert seen == 1  # batch=4194304: XLA:GPU compiled a program past the device


def test_the_chip_table():
    assert chip("TPU v5 lite").name == "v5e" and chip("v6e:2x2").name == "v6e"
    assert chip("gpu:h100").hbm_bytes == 84_942_979_072
    assert chip("TPU v99") is None and chip(None) is None


def test_ingest_records_the_target_beside_a_module(tmp_path):
    src = ROOT / "tests" / "data" / "runtime" / "run" / "dumps"
    dump = tmp_path / "dump"
    shutil.copytree(src, dump)
    config = next((SWEEP / "gpu_h100" / "batch=262144").glob("*.gpu_target_config.pbtxt"))
    shutil.copy(config, dump / "module_0000.jit_step.gpu_target_config.pbtxt")
    db = tmp_path / "t.duckdb"
    bufferhouse.ingest([dump], db=db, jobs=1)
    rows = bufferhouse.sql(
        "SELECT m.module_name, t.platform, t.device_kind, t.capacity_bytes, t.capacity_source"
        " FROM module_targets t JOIN modules m USING (module_id)",
        db=db,
    ).to_pylist()
    assert rows == [
        {
            "module_name": "jit_step",
            "platform": "gpu",
            "device_kind": "NVIDIA H100 80GB HBM3",
            "capacity_bytes": 84_942_979_072,
            "capacity_source": "dump",
        }
    ]
    bufferhouse.ingest([dump], db=db, jobs=1)  # again: no second row
    assert bufferhouse.sql("SELECT count(*) AS n FROM module_targets", db=db).to_pylist() == [
        {"n": 1}
    ]


def test_the_sweep_helper_compiles_dumps_and_keeps_the_e1000(tmp_path, monkeypatch):
    if importlib.util.find_spec("jax") is None or importlib.util.find_spec("libtpu") is None:
        pytest.skip("jax with libtpu is not installed here (needs Python >= 3.12, jax[tpu])")
    sys.path.insert(0, str(ROOT / "examples"))
    import sweep

    for key, value in sweep.environment().items():
        monkeypatch.setenv(key, value)
    step, make_args = sweep._mlp_example()
    out = sweep.sweep(
        step, make_args, targets=["v5e:1x1"], sizes={"batch": [8192, 1048576]}, out=tmp_path
    )
    small, big = out
    assert small.error is None and small.memory["temp_size_in_bytes"] > 0
    assert "E1000: CompileTimeHbmOom" in big.error
    assert (Path(big.directory) / "compile-oom.log").exists()
    assert _target(Path(small.directory)).device_kind == "TPU v5 lite"


def test_device_budget_takes_the_step_not_a_jax_helper(tmp_path):
    """A run whose helper program (jit__multi_slice, compiled for a slice of a device_put
    array) has a transient as large as the step's: the step is taken, and named. (The
    helper is the step's dump under a helper's name: equal transients, so the old rule,
    largest then first by name, took the helper.)"""
    run = tmp_path / "run"
    shutil.copytree(ROOT / "tests" / "data" / "runtime" / "run", run)
    for path in list((run / "dumps").glob("module_0000.jit_step.*")):
        helper = path.name.replace("module_0000.jit_step.", "module_0001.jit__multi_slice.")
        shutil.copy(path, run / "dumps" / helper)
    db = tmp_path / "b.duckdb"
    bufferhouse.ingest([run], db=db, jobs=1)
    names = bufferhouse.sql("SELECT module_name FROM modules ORDER BY 1", db=db).to_pylist()
    assert [r["module_name"] for r in names] == ["jit__multi_slice", "jit_step"]
    rows = bufferhouse.query("device-budget", db=db, snapshot="after.prof").to_pylist()
    assert rows and {r["transient_module"] for r in rows} == {"jit_step"}
    helper = bufferhouse.query(
        "device-budget", db=db, snapshot="after.prof", module="jit__multi_slice"
    ).to_pylist()
    assert {r["transient_module"] for r in helper} == {"jit__multi_slice"}  # named: taken


def test_one_listing_of_a_directory_of_many_modules_gives_each_its_own_target(tmp_path):
    """record_targets lists a directory once (Listings), not once a module: two modules'
    files side by side (one GPU, one TPU, one with no target file), each its own target."""
    from bufferhouse.parse.target import Listings

    gpu, tpu = (
        next(p.parent for p in sorted((SWEEP / t).glob("batch=*/*-buffer-assignment.txt")))
        for t in ("gpu_h100", "v5e_1x1")
    )
    for i, source in enumerate((gpu, tpu)):
        for f in source.iterdir():
            if f.name.startswith("module_"):
                name = f"module_{i:04d}.{f.name.partition('.')[2]}"
                (shutil.copytree if f.is_dir() else shutil.copy)(f, tmp_path / name)
    (tmp_path / "module_0002.jit_x.cpu_after_optimizations-buffer-assignment.txt").write_text("")
    listings = Listings()
    got = []
    for ba in sorted(tmp_path.glob("*-buffer-assignment.txt")):
        one = read_target(str(tmp_path), ba.name, listings)
        assert one == read_target(str(tmp_path), ba.name)  # as a listing of its own says
        got.append(one and (one.platform, one.device_kind))
    assert got == [("gpu", "NVIDIA H100 80GB HBM3"), ("tpu", "TPU v5 lite"), None]


def test_device_budget_a_larger_helper_and_the_capacity_of_the_steps_target(tmp_path):
    """The run's helper program (a jit__multi_slice, here a sweep compile's buffer
    assignment under a helper's name) has a transient a thousand times the step's: the
    step is still taken, and named with its module_id. With no -p capacity the budget
    takes the capacity of the step's target (its GPU target config's device_memory_size,
    module_targets); -p capacity= overrides it; a step without target files has none."""
    run = tmp_path / "run"
    shutil.copytree(ROOT / "tests" / "data" / "runtime" / "run", run)
    big = SWEEP / "gpu_h100" / "batch=262144"
    for path in big.glob("module_*buffer-assignment*.txt"):
        name = path.name.replace("module_0001.jit_step.sm_9.0a", "module_0001.jit__multi_slice")
        shutil.copy(path, run / "dumps" / name)
    config = next(big.glob("*.gpu_target_config.pbtxt"))
    db = tmp_path / "b.duckdb"
    bufferhouse.ingest([run], db=db, jobs=1)
    transients = {
        r["module_name"]: r["t"]
        for r in bufferhouse.sql(
            "SELECT module_name, sum(size) AS t FROM allocations JOIN modules USING (module_id)"
            " WHERE color = 0 AND category IN ('temp', 'output') GROUP BY module_name",
            db=db,
        ).to_pylist()
    }
    assert transients["jit__multi_slice"] > 1000 * transients["jit_step"]
    (step_id,) = [
        r["module_id"]
        for r in bufferhouse.sql(
            "SELECT module_id FROM modules WHERE module_name = 'jit_step'", db=db
        ).to_pylist()
    ]
    bare = bufferhouse.query("device-budget", db=db, snapshot="after.prof").to_pylist()
    assert {(r["transient_module"], r["transient_module_id"]) for r in bare} == {
        ("jit_step", step_id)
    }
    assert {r["transient_bytes"] for r in bare} == {transients["jit_step"]}
    # the step's dump names no target: no capacity, nothing judged
    assert {(r["capacity_bytes"], r["capacity_source"], r["fits"]) for r in bare} == {
        (None, None, None)
    }
    named = bufferhouse.query(
        "device-budget", db=db, snapshot="after.prof", module="jit__multi_slice"
    ).to_pylist()
    assert {r["transient_module"] for r in named} == {"jit__multi_slice"}
    assert {r["transient_bytes"] for r in named} == {transients["jit__multi_slice"]}

    # the step compiled for an H100: its target config states the capacity
    run2 = tmp_path / "run2"
    shutil.copytree(run, run2)
    shutil.copy(config, run2 / "dumps" / "module_0000.jit_step.gpu_target_config.pbtxt")
    db2 = tmp_path / "c.duckdb"
    bufferhouse.ingest([run2], db=db2, jobs=1)
    stated = int(config.read_text().split("device_memory_size: ")[1].split()[0])
    rows = bufferhouse.query("device-budget", db=db2, snapshot="after.prof").to_pylist()
    assert {(r["transient_module"], r["device_kind"]) for r in rows} == {
        ("jit_step", "NVIDIA H100 80GB HBM3")
    }
    assert {(r["capacity_bytes"], r["capacity_source"], r["fits"]) for r in rows} == {
        (stated, "dump", True)
    }
    for r in rows:
        assert r["headroom_bytes"] == stated - r["need_bytes"]
    given = bufferhouse.query(
        "device-budget", db=db2, snapshot="after.prof", capacity="8KiB"
    ).to_pylist()
    assert {(r["capacity_bytes"], r["capacity_source"]) for r in given} == {(8192, "param")}
    with pytest.raises(QueryError, match="parameter capacity wants a size"):
        bufferhouse.query("device-budget", db=db2, capacity="8 KiBs")


def test_a_module_without_a_target_is_not_looked_for_again_until_its_directory_changes(
    tmp_path, monkeypatch
):
    """record_targets records "no target" (file_stats.targets_looked_ns): a no-op
    re-ingest lists no directory; a target file put beside the dump later changes the
    directory, and the next ingest finds it."""
    import os

    from bufferhouse.load import file_stats
    from bufferhouse.parse import target

    monkeypatch.setattr(file_stats, "RACY_NS", 0)  # the copies are fresh: settled at once
    monkeypatch.setattr("bufferhouse.load.targets.RACY_NS", 0)
    listed: list[str] = []
    real = target._listing

    def counted(directory):
        listed.append(directory)
        return real(directory)

    monkeypatch.setattr(target, "_listing", counted)
    dump = tmp_path / "dump"
    shutil.copytree(ROOT / "tests" / "data" / "runtime" / "run" / "dumps", dump)
    old = os.stat(dump).st_mtime_ns - 10**9
    os.utime(dump, ns=(old, old))
    db = tmp_path / "t.duckdb"
    n_targets = "SELECT count(*) AS n FROM module_targets"
    bufferhouse.ingest([dump], db=db, jobs=1)
    assert listed == [str(dump)]  # looked once, found none
    assert bufferhouse.sql(n_targets, db=db).to_pylist() == [{"n": 0}]
    looked = "SELECT targets_looked_ns AS ns FROM file_stats"
    assert bufferhouse.sql(looked, db=db).to_pylist() == [{"ns": old}]

    listed.clear()
    report = bufferhouse.ingest([dump], db=db, jobs=1)
    assert len(report.present) == 1 and listed == []  # nothing listed again

    config = next((SWEEP / "gpu_h100" / "batch=262144").glob("*.gpu_target_config.pbtxt"))
    shutil.copy(config, dump / "module_0000.jit_step.gpu_target_config.pbtxt")  # later
    report = bufferhouse.ingest([dump], db=db, jobs=1)
    assert len(report.present) == 1 and listed == [str(dump)]
    rows = bufferhouse.sql("SELECT device_kind FROM module_targets", db=db).to_pylist()
    assert rows == [{"device_kind": "NVIDIA H100 80GB HBM3"}]
