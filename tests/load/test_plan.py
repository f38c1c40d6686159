"""The run planned once (load/schedule.plan) and the one walk offered to every source."""

from __future__ import annotations

import gzip
import os

from bufferhouse.load import schedule
from bufferhouse.parse.discover import (
    ModuleFiles,
    discover,
    discover_logs,
    discover_profiles,
    is_companion,
)
from bufferhouse.parse.sources import SOURCES, discover_all
from tests.conftest import DATA


def _proto_tree(tmp_path, sizes):
    for i, size in enumerate(sizes):
        (tmp_path / f"module_{i:04d}.jit_f.cpu_after_optimizations.hlo.pb").write_bytes(
            b"\0" * size
        )
    return discover([tmp_path])


def test_an_hloproto_counts_its_bytes_and_the_largest_goes_first(tmp_path):
    groups = _proto_tree(tmp_path, [10, 3000, 200])
    run = schedule.plan(groups, jobs=1)
    assert run.sizes == (3000, 200, 10)  # were 0, 0, 0: the plan saw an empty tree
    assert [g.stem[:11] for g in run.order] == ["module_0001", "module_0002", "module_0000"]
    assert run.parsers == 1 and run.threads == 0


def test_a_gzipped_hloproto_counts_as_eight_times_its_stored_bytes(tmp_path):
    path = tmp_path / "module_0000.jit_f.cpu_after_optimizations.hlo.pb.gz"
    with gzip.open(path, "wb") as f:
        f.write(os.urandom(4000))
    (group,) = discover([tmp_path])
    assert schedule.input_bytes(group) == 8 * path.stat().st_size


def test_a_profile_program_counts_its_share_of_the_profile(tmp_path):
    profile = tmp_path / "host.xplane.pb"
    profile.write_bytes(b"\0" * 900)
    groups = [
        ModuleFiles(str(tmp_path), f"host.xplane.pb#p{i}", xplane=str(profile), program=f"p{i}")
        for i in range(3)
    ]
    assert schedule.plan(groups, jobs=1).sizes == (300, 300, 300)


def test_the_plan_agrees_with_the_figures_it_replaces(tmp_path):
    groups = _proto_tree(tmp_path, [5, 50, 500])
    for jobs in (None, 1, 2, 5):
        run = schedule.plan(groups, jobs)
        assert run.parsers == schedule.parser_processes(groups, jobs)
        assert run.threads == schedule.spare_threads(groups, jobs)
        assert list(run.order) == schedule.largest_first(groups)


def test_one_walk_gives_what_the_three_walks_gave():
    data = os.path.join(DATA)
    old = [*discover([data]), *discover_logs([data]), *discover_profiles([data])]
    assert [s.name for s in SOURCES] == ["dumps", "oom logs", "device memory profiles"]
    assert discover_all([data]) == old
    assert len(old) > 100


def test_a_file_given_by_name_is_walked_with_its_siblings(tmp_path):
    stem = "module_0000.jit_f.cpu_after_optimizations"
    (tmp_path / f"{stem}-buffer-assignment.txt").write_text("BufferAssignment:\n")
    (tmp_path / f"{stem}-buffer-assignment-values.txt").write_text("")
    (group,) = discover([tmp_path / f"{stem}-buffer-assignment.txt"])
    assert group.values == str(tmp_path / f"{stem}-buffer-assignment-values.txt")


COMPANIONS = os.path.join(DATA, "companions", "tpu-v5e")


def test_the_files_beside_a_module_of_todays_xla_are_no_modules():
    names = sorted(os.listdir(COMPANIONS))
    assert any(n.endswith("_after_buffer_assignment.hlo.pb") for n in names)
    assert all(is_companion(n) for n in names if os.path.isfile(os.path.join(COMPANIONS, n)))
    # libtpu's module copies were taken for modules of their own and skipped at parse time.
    assert discover_all([COMPANIONS]) == []


def test_a_companion_given_by_name_is_one_located_error(tmp_path):
    path = os.path.join(COMPANIONS, "module_0000.jit_mlp_step.cl_1004524046.after_codegen.hlo.pb")
    (group,) = discover_all([path])
    (problem,) = group.problems
    assert problem.path == path
    assert "beside a module, without its buffer assignment" in problem.message


def test_a_file_given_by_name_that_no_source_claims_is_one_located_error(tmp_path):
    path = tmp_path / "weights.pb"
    path.write_bytes(b"\x08\x01")
    (group,) = discover_all([path])
    (problem,) = group.problems
    assert (problem.path, problem.line) == (str(path), 0)
    assert "not a form bufferhouse reads" in problem.message
