"""Parser worker processes: results in completion order, and a worker that dies.

`parse_in_workers` hands results over as modules finish (a large module must
not hold back the small ones queued behind it), and a worker killed mid-run
costs nothing: the modules its pool held are parsed again and every module
lands exactly once, whether the death shows in a future or in the next submit.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest

import bufferhouse
from bufferhouse.check import check_warehouse
from bufferhouse.load import handoff, parse_in_workers, workers
from bufferhouse.load.schedule import input_bytes, largest_first
from bufferhouse.parse import parse_files
from bufferhouse.parse.discover import discover
from bufferhouse.parse.results import Failed, ParsedModule
from tests import synth
from tests.conftest import CORPUS, SAMPLES
from tests.load.test_faults import _snapshot

pytestmark = pytest.mark.slow  # kills and replaces parser processes


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """Small real modules, then a 16 MB synth module last in discovery order: its parse
    outlasts a second worker's start even on a loaded machine (at 6 MB it did not, 1 run in 30)."""
    root = tmp_path_factory.mktemp("workers")
    shutil.copytree(SAMPLES, root / "a_samples")
    for program in sorted(p for p in (CORPUS / "jax-0.10.2").iterdir() if p.is_dir())[:6]:
        shutil.copytree(program, root / "b_small" / program.name)
    synth.synthesize(root / "z_large", 16.0, "combined", name="jit_large")
    # Files an hour old: file_stats records every module in every run, rather than
    # leaving out those written within RACY_NS of the first ingest (a timing flake).
    old = time.time() - 3600
    for f in root.rglob("*"):
        os.utime(f, (old, old))
    return root


def test_the_largest_modules_are_parsed_first(tree):
    groups = discover([tree])
    assert "jit_large" in groups[-1].stem  # last in input order
    # One worker takes the modules in the order they are handed out.
    order = [files for files, _ in parse_in_workers(groups, 1, frozenset(), None)]
    assert order[0].stem == groups[-1].stem
    sizes = [input_bytes(files) for files in order]
    assert sizes == sorted(sizes, reverse=True)


def test_one_process_also_writes_the_largest_module_first(tree, tmp_path):
    db = tmp_path / "one.duckdb"
    assert bufferhouse.ingest([tree], db=db, jobs=1).ok
    with bufferhouse.connect(db) as con:
        stems = [
            r[0] for r in con.execute("SELECT file_stem FROM modules ORDER BY module_id").fetchall()
        ]
    size = {files.stem: input_bytes(files) for files in discover([tree])}
    assert "jit_large" in stems[0]
    assert [size[s] for s in stems] == sorted(size.values(), reverse=True)


#: Longest a held task waits for its gate: a guard against a hang should results come
#: in submission order (the test then fails), not a timing the test relies on.
GATE_GUARD = 300.0


def _held(gate: str, files):
    """Parse `files` in a worker once the test opens the FIFO `gate` for writing."""
    fd = os.open(gate, os.O_RDONLY | os.O_NONBLOCK)
    try:
        while True:  # readable once a writer has come and gone (EOF) or written
            ready, _, _ = select.select([fd], [], [], GATE_GUARD)
            if not ready or os.read(fd, 1):
                break
    finally:
        os.close(fd)
    return workers._work(files)


def _gated_pool(gate: Path, stem: str) -> type[ProcessPoolExecutor]:
    """A real pool in which the module `stem`, the first time it is submitted, is parsed
    only once the gate opens (a retry goes through)."""

    class GatedPool(ProcessPoolExecutor):
        held = False

        def submit(self, fn, files):
            if files.stem == stem and not GatedPool.held:
                GatedPool.held = True
                return super().submit(_held, str(gate), files)
            return super().submit(fn, files)

    return GatedPool


def test_results_come_in_completion_order(tree, tmp_path, monkeypatch):
    """The large module, handed out first, is held in its worker until a small module's
    result has come back: a result is handed over when it is ready, not in turn."""
    groups = discover([tree])
    large = groups[-1].stem
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    monkeypatch.setattr(workers, "ProcessPoolExecutor", _gated_pool(gate, large))
    order = []
    for files, _ in parse_in_workers(groups, 2, frozenset(), None):
        order.append(files.stem)
        if len(order) == 1:
            with open(gate, "wb") as writer:  # blocks until the held task has it open
                writer.write(b"go")
    assert sorted(order) == sorted(g.stem for g in groups)  # each module once
    assert order[0] != large and large in order, order


def _children() -> dict[int, list[int]]:
    """Every running process's children, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                ppid = int(stat[stat.rfind(")") + 2 :].split()[1])
                children.setdefault(ppid, []).append(int(entry))
    return children


def _workers_of(pid: int) -> list[int]:
    """Grandchildren of `pid`: the pool's workers (children of the forkserver)."""
    children = _children()
    return [w for child in children.get(pid, []) for w in children.get(child, [])]


def test_a_worker_killed_mid_ingest_loses_no_module(tree, tmp_path, monkeypatch):
    """kill -9 of a worker while it parses the large module (held until the kill): the
    ingest rebuilds its pool and the warehouse equals one made without the kill."""
    clean = tmp_path / "clean.duckdb"
    assert bufferhouse.ingest([tree], db=clean, jobs=2).ok
    want = _snapshot(clean)

    large = discover([tree])[-1].stem
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    killed: list[int] = []

    class KillingPool(_gated_pool(gate, large)):
        def submit(self, fn, files):
            future = super().submit(fn, files)
            if self.held and not killed:
                # Opening the gate for writing returns once the large module's task holds
                # it open in a worker: it is being parsed. Kill every worker, unopened.
                writer = os.open(gate, os.O_WRONLY)
                for pid in list(self._processes):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                os.close(writer)
            return future

    monkeypatch.setattr(workers, "ProcessPoolExecutor", KillingPool)
    db = tmp_path / "killed.duckdb"
    report = bufferhouse.ingest([tree], db=db, jobs=2)
    assert killed and report.ok, [o.error for o in report.failed]
    assert _snapshot(db) == want
    assert check_warehouse(db).ok


def _dying_pool(die_at: int | None = None) -> type[ProcessPoolExecutor]:
    """A real process pool whose workers die where the test says, deterministically.

    A module whose stem names `poison` runs as os._exit(1): its worker dies, as under
    the OOM killer, in every pool (the one it is parsed alone in too). With `die_at`,
    the die_at-th submit to the first pool makes a worker exit that way first. The
    submit after a death waits until the pool has seen it, so that submit raises
    BrokenProcessPool: the death falls between the ingest's wait and its next
    submit, the race a loaded machine hit 1 run in 13.
    """

    class DyingPool(ProcessPoolExecutor):
        pools = 0
        raised = 0  # submits that raised BrokenProcessPool

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.number, self.submits = DyingPool.pools, 0
            self.death: Future | None = None
            DyingPool.pools += 1

        def submit(self, fn, files):
            self.submits += 1
            if self.number == 0 and self.submits == die_at:
                self.death = super().submit(os._exit, 1)
            if self.death is not None:
                self.death.exception()  # returns once the pool has seen the death
                try:
                    return super().submit(fn, files)
                except BrokenProcessPool:
                    DyingPool.raised += 1
                    raise
            if "poison" in files.stem:
                self.death = super().submit(os._exit, 1)
                return self.death
            return super().submit(fn, files)

    return DyingPool


def _parse_with(pool: type[ProcessPoolExecutor], groups, monkeypatch) -> tuple[dict, str]:
    """Each module's outcome from parse_in_workers with `pool`, and its hand-off directory."""
    made = []

    def make_directory():
        made.append(real())
        return made[-1]

    real = handoff.make_directory
    monkeypatch.setattr(handoff, "make_directory", make_directory)
    monkeypatch.setattr(workers, "ProcessPoolExecutor", pool)
    outcomes: dict[str, list] = {}
    for files, result in parse_in_workers(groups, 2, frozenset(), None):
        outcomes.setdefault(files.stem, []).append(result)
    assert sorted(outcomes) == sorted(g.stem for g in groups)
    assert all(len(results) == 1 for results in outcomes.values()), outcomes  # once each
    (directory,) = made
    return {stem: results[0] for stem, results in outcomes.items()}, directory


def _row_counts(result) -> dict[str, int]:
    return {name: table.num_rows for name, table in result.tables.items()}


@pytest.mark.parametrize("poisons", [1, 2])
def test_a_death_seen_by_submit_fails_only_its_module(tmp_path, monkeypatch, poisons):
    """The largest modules kill their worker, and the submit after each death raises
    BrokenProcessPool (the module it was for stays queued): each poison is parsed
    alone, dies again and is reported failed; every other module loads, once."""
    shutil.copytree(SAMPLES, tmp_path / "tree")
    sample = (SAMPLES / "003_186bba49641ec33a.txt").read_text()
    for n in range(poisons):  # never parsed: as large as it must be to go first
        padding = "\n" * (10_000 * (poisons - n))
        (tmp_path / "tree" / f"poison{n}-buffer-assignment.txt").write_text(sample + padding)
    groups = discover([tmp_path / "tree"])
    assert [g.stem for g in largest_first(groups)[:poisons]] == [
        f"poison{n}" for n in range(poisons)
    ]
    pool = _dying_pool()
    outcomes, directory = _parse_with(pool, groups, monkeypatch)
    assert pool.raised == poisons  # each death was seen by a submit
    for files in groups:
        result = outcomes[files.stem]
        if "poison" in files.stem:
            assert isinstance(result, Failed)
            assert result.error.message == (
                "the parser process died (out of memory?); module skipped"
            )
        else:
            assert isinstance(result, ParsedModule), result
            assert _row_counts(result) == _row_counts(parse_files(files))
    assert not Path(directory).exists()


def test_a_worker_dying_between_wait_and_submit_loses_no_module(tmp_path, monkeypatch):
    """A worker exits after the first wait, before the next submit, which raises
    BrokenProcessPool: the modules the death took down and the one not submitted
    are parsed in the rebuilt pool, and every module loads, once."""
    shutil.copytree(SAMPLES, tmp_path / "tree" / "samples")
    for program in sorted(p for p in (CORPUS / "jax-0.10.2").iterdir() if p.is_dir())[:6]:
        shutil.copytree(program, tmp_path / "tree" / program.name)
    groups = discover([tmp_path / "tree"])
    pool = _dying_pool(die_at=5)  # 4 in flight (2 x jobs), then one done, then submit 5
    outcomes, directory = _parse_with(pool, groups, monkeypatch)
    assert pool.raised == 1
    for files in groups:
        assert isinstance(outcomes[files.stem], ParsedModule), outcomes[files.stem]
        assert _row_counts(outcomes[files.stem]) == _row_counts(parse_files(files))
    assert not Path(directory).exists()


def test_the_default_is_workers_for_many_modules_or_many_bytes_given_three_cores(tree, monkeypatch):
    ingest_stage = sys.modules["bufferhouse.load.schedule"]  # where the thresholds live
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    groups = discover([tree])
    assert len(groups) < ingest_stage.PARALLEL_MIN_MODULES
    assert ingest_stage.parser_processes(groups, None) == 1  # a few small modules
    assert ingest_stage.parser_processes(groups, 3) == 3  # as asked
    many = groups * (ingest_stage.PARALLEL_MIN_MODULES // len(groups) + 1)
    assert ingest_stage.parser_processes(many, None) == 3  # a core for the writer
    monkeypatch.setattr(ingest_stage, "PARALLEL_MIN_BYTES", 1)
    assert ingest_stage.parser_processes(groups, None) == 3
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # one parser: the writer has the other
    assert ingest_stage.parser_processes(many, None) == 1
    assert ingest_stage.parser_processes(many, 2) == 2  # as asked


def test_the_help_states_the_default_from_its_thresholds():
    from click.testing import CliRunner

    from bufferhouse.cli import main

    ingest_stage = sys.modules["bufferhouse.load.schedule"]
    out = CliRunner().invoke(main, ["ingest", "--help"], terminal_width=200).output
    assert f"one for fewer than {ingest_stage.PARALLEL_MIN_MODULES} modules" in out
    assert f"less than {ingest_stage.PARALLEL_MIN_BYTES >> 20} MiB of dumps" in out


def test_a_module_inside_a_log_counts_its_bytes(tmp_path):
    """The default --jobs and largest-first order see a log member's size, not 0."""
    log = tmp_path / "run.log"
    body = "BufferAssignment:\n" + "x" * 5000 + "\n"
    name = "module_0001.jit_f.cpu_after_optimizations-buffer-assignment.txt"
    log.write_text(f"I1124 start\n*** Begin /tmp/d/{name} ***\n{body}*** End /tmp/d/{name} ***\n")
    (group,) = discover([tmp_path])
    assert len(body) - 1 <= input_bytes(group) <= len(body)  # was 0: not a file


def _descendants(pid: int) -> list[int]:
    """Every process below `pid` (the fork server, the resource tracker, the workers)."""
    children = _children()
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _ingest_with_workers_up(tree: Path, db: Path, **popen) -> tuple[subprocess.Popen, list[int]]:
    """A `bufferhouse ingest -j 2` process, stopped (SIGSTOP) once both its workers are
    up and its hand-off directory is noted in /dev/shm: it can then neither finish nor
    clean up before the test kills it, however fast or slow the machine."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bufferhouse.cli", "ingest", str(tree), "-j", "2", "--db", str(db)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        **popen,
    )
    shm, noted = Path("/dev/shm"), f"bufferhouse-ingest-{proc.pid}-*/semaphores"
    while proc.poll() is None:
        if len(_workers_of(proc.pid)) == 2 and (not shm.is_dir() or list(shm.glob(noted))):
            os.kill(proc.pid, signal.SIGSTOP)
            return proc, _descendants(proc.pid)
        time.sleep(0.01)  # a condition polled, not a duration relied on
    pytest.fail("the ingest ended before its workers were up")


#: Longest the test waits for processes that should exit: a guard against a hang, far
#: beyond the second they take (they wait on a pidfd of the ingest).
EXIT_GUARD = 300.0


def _wait_for_exit(pids: list[int]) -> list[int]:
    """Wait until every process of `pids` has exited (on pidfds: no polling); those
    still alive after EXIT_GUARD."""
    fds = []
    for pid in pids:
        try:
            fds.append(os.pidfd_open(pid))
        except ProcessLookupError:
            continue  # gone already
        except (AttributeError, OSError):  # no pidfds here: poll
            end = time.monotonic() + EXIT_GUARD
            while time.monotonic() < end and any(map(handoff.alive, pids)):
                time.sleep(0.05)
            break
    try:
        for fd in fds:
            select.select([fd], [], [], EXIT_GUARD)
    finally:
        for fd in fds:
            os.close(fd)
    return [p for p in pids if handoff.alive(p)]


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the workers through /proc")
def test_workers_die_within_seconds_of_a_killed_ingest(tree, tmp_path):
    """kill -9 of the ingest alone: its workers notice (within a second) and exit, and
    with them the fork server and the resource tracker; nothing is left running."""
    proc, below = _ingest_with_workers_up(tree, tmp_path / "w.duckdb")
    assert len(below) >= 3  # fork server, two workers (and the resource tracker)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not _wait_for_exit(below), "processes outlived the ingest"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the workers through /proc")
def test_the_next_ingest_removes_what_a_killed_run_left_in_shared_memory(tree, tmp_path):
    """kill -9 of the whole process group (ingest, tracker and all): its hand-off
    directory and pool semaphores stay in /dev/shm until the next ingest removes them."""
    if not Path("/dev/shm").is_dir():
        pytest.skip("no /dev/shm")
    proc, _ = _ingest_with_workers_up(tree, tmp_path / "w.duckdb", start_new_session=True)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    (left,) = Path("/dev/shm").glob(f"bufferhouse-ingest-{proc.pid}-*")
    semaphores = [Path("/dev/shm", n) for n in (left / "semaphores").read_text().split()]
    assert semaphores and all(s.exists() for s in semaphores)  # the tracker died too
    assert bufferhouse.ingest([SAMPLES], db=tmp_path / "next.duckdb", jobs=1).ok
    assert not left.exists()
    assert not [s for s in semaphores if s.exists()]


def test_a_profiles_programs_are_read_once_and_sent_to_the_workers(tmp_path, monkeypatch):
    """The programs of a profile are read in the ingest process, all in one pass when
    the first is drawn, and parsed in workers from the bytes they are sent: the profile
    is gone once its first program is drawn, and every program still parses, those a
    worker's death took down too."""
    import gzip

    from tests.parse.proto.test_proto import _profile_of

    shutil.copytree(SAMPLES, tmp_path / "tree" / "samples")
    data, names = _profile_of(4)
    profile = tmp_path / "tree" / "profile" / "host.xplane.pb.gz"
    profile.parent.mkdir()
    profile.write_bytes(gzip.compress(data))
    groups = discover([tmp_path / "tree"])
    programs = [g for g in groups if g.xplane is not None]
    assert [g.program for g in programs] == names
    real = workers.with_programs

    def then_gone(groups):
        for files, program in real(groups):
            yield files, program
            if files.xplane is not None:
                profile.unlink(missing_ok=True)

    monkeypatch.setattr(workers, "with_programs", then_gone)
    # The programs go first (each sized by its share of the profile, larger than the
    # samples: the Plan); the 2nd submit, of the second program, finds a worker dead: it
    # goes to the rebuilt pool, after the profile is gone.
    pool = _dying_pool(die_at=2)
    submitted: list[str] = []
    submit = pool.submit

    def counted(self, fn, files):
        submitted.append(files.stem)
        return submit(self, fn, files)

    monkeypatch.setattr(pool, "submit", counted)
    outcomes, _ = _parse_with(pool, groups, monkeypatch)
    assert not profile.exists() and pool.raised == 1
    assert submitted.count(programs[1].stem) == 2, submitted
    for files in groups:
        assert isinstance(outcomes[files.stem], ParsedModule), outcomes[files.stem]
    for files in programs:  # the retry parsed the HloProto read before the profile went
        files.problems = []
    profile.write_bytes(gzip.compress(data))
    for files in programs:
        alone = parse_files(files)
        assert alone.content_hash == outcomes[files.stem].content_hash
        assert _row_counts(alone) == _row_counts(outcomes[files.stem])


def test_a_future_the_broken_pool_never_fails_is_lost_with_it(tmp_path, monkeypatch):
    """CPython 3.11 fails a broken pool's futures without holding its submit lock, so a
    submit that slips in as the pool breaks returns a future that nothing completes
    (a CI run's ingest waited on one until its 300 s timeout). Such a future's module
    is taken as lost after BROKEN_GRACE and parsed in the rebuilt pool: every module
    loads, once, and the ingest does not wait forever."""
    monkeypatch.setattr(workers, "BROKEN_GRACE", 0.2)

    class OrphaningPool(ProcessPoolExecutor):
        pools = 0
        orphans = 0

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.number, self.submits = OrphaningPool.pools, 0
            OrphaningPool.pools += 1

        def submit(self, fn, files):
            self.submits += 1
            if self.number == 0 and self.submits == 3:
                super().submit(os._exit, 1).exception()  # the pool has seen a death
                OrphaningPool.orphans += 1
                return Future()  # submitted as the pool broke: never completed
            return super().submit(fn, files)

    shutil.copytree(SAMPLES, tmp_path / "tree")
    groups = discover([tmp_path / "tree"])
    outcomes, directory = _parse_with(OrphaningPool, groups, monkeypatch)
    assert OrphaningPool.orphans == 1 and OrphaningPool.pools >= 2
    for files in groups:
        assert isinstance(outcomes[files.stem], ParsedModule), outcomes[files.stem]
        assert _row_counts(outcomes[files.stem]) == _row_counts(parse_files(files))
    assert not Path(directory).exists()
