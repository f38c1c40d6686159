"""Parser worker processes: a pool that survives the death of a worker.

Each worker parses one module per task and hands its tables back through
shared memory (`handoff`). A profile's program comes with its HloProto, read
here with the profile's other programs in one pass (`with_programs`): a worker
never reopens a profile. A worker that dies fails only the module it was
parsing; the pool is rebuilt around it. A worker whose ingest process is gone
(killed) exits within a second.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import select
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ALL_COMPLETED, FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from bufferhouse.errors import DumpError
from bufferhouse.load import handoff
from bufferhouse.load.schedule import largest_first
from bufferhouse.parse import parse_files, with_programs
from bufferhouse.parse.discover import ModuleFiles
from bufferhouse.parse.results import Failed, ParsedModule, ParseResult

_known: frozenset[str] = frozenset()
_max_bytes: int | None = None
_handoff: str | None = None


def without_pandas() -> None:
    """Keep pandas out of a process of ours that never uses it (a parser worker, the
    CLI's ingest). pyarrow imports pandas, where it is installed, at its first `pa.array`
    of Python objects, only to ask whether the object is a pandas one: 0.14-0.27 s a
    process. With pandas marked absent it answers no at once. Never in a user's process
    (the API): their notebook may import pandas after us."""
    import sys

    if "pandas" not in sys.modules and not any(isinstance(f, _NoPandas) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoPandas())


class _NoPandas:
    """A meta-path finder that finds no pandas (an entry of None in sys.modules would
    be read by pyarrow as an imported pandas)."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def _init_worker(
    known: frozenset[str], max_bytes: int | None, directory: str | None, parent: int
) -> None:
    global _known, _max_bytes, _handoff
    _known, _max_bytes, _handoff = known, max_bytes, directory
    without_pandas()
    _follow(parent)


#: How often a worker without pidfd looks for its ingest process.
WATCH_SECONDS = 0.5


def _follow(parent: int) -> None:
    """Exit this worker as soon as the ingest process `parent` is gone.

    A worker's parent is the fork server, not the ingest, so the ingest's death
    reaches it through nothing the pool provides: after a kill -9 of the ingest
    its workers went on parsing for seconds, holding their shared memory. A
    daemon thread waits on a pidfd of the ingest (readable when it exits), or
    polls it every WATCH_SECONDS where pidfds are missing.
    """

    def watch() -> None:
        try:
            pidfd = os.pidfd_open(parent)
        except (AttributeError, OSError):
            pidfd = None
        if pidfd is not None:
            select.select([pidfd], [], [])
        else:
            while handoff.alive(parent):
                time.sleep(WATCH_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="bufferhouse-parent-watch", daemon=True).start()


def _work(files: ModuleFiles, program: bytes | None = None) -> ParseResult:
    result = parse_files(files, _known, _max_bytes, program=program)
    for module in _modules(result):
        module.tables = handoff.ship(module.tables, _handoff)
    return result


def _modules(result: ParseResult) -> list[ParsedModule]:
    """The modules a result holds: none, one, or one and its companion."""
    if not isinstance(result, ParsedModule):
        return []
    return [result] if result.companion is None else [result, result.companion[1]]


def parse_in_workers(
    groups: list[ModuleFiles], jobs: int, known: frozenset[str], max_bytes: int | None
) -> Iterator[tuple[ModuleFiles, ParseResult]]:
    """Parse in worker processes, yielding each result as soon as it is ready.

    Results come in the order the modules finish, not the input order: with
    input order a large module at the head of the queue kept the other
    workers idle once the small modules behind it were done. The largest
    modules are handed out first, so the run does not end with one worker
    parsing a large module while the others wait (and its last batch, written
    after all parsing, holds small modules). At most
    2 x jobs modules are in flight, so memory stays bounded however large the
    tree. A worker that dies (out of memory, a crash in a native library)
    fails only the module it was parsing: the pool is rebuilt and each module
    the death took down is retried, the first alone, to tell the culprit from
    its neighbours. The death may show in a future or, when it falls between a
    wait and the next submit, in that submit (the module stays queued).
    """
    ctx = multiprocessing.get_context("forkserver" if os.name != "nt" else "spawn")
    if isinstance(ctx, multiprocessing.context.ForkServerContext):
        # The fork server imports the parser once and each worker is a fork of it; by
        # default it imports the main script, which (the CLI importing commands lazily)
        # holds no parser, and every worker imported it again.
        ctx.set_forkserver_preload([__name__])
    directory = handoff.make_directory()

    def new_pool(workers: int) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            workers,
            mp_context=ctx,
            initializer=_init_worker,
            initargs=(known, max_bytes, directory, os.getpid()),
        )

    def received(result: ParseResult) -> ParseResult:
        for module in _modules(result):
            module.tables = handoff.receive(module.tables)
        return result

    pool = new_pool(jobs)
    handoff.note_semaphores(directory)
    #: In submission order: each future's group, and the work submitted for it (a
    #: profile program's HloProto bound to it, for a retry after a death).
    pending: dict[Future[ParseResult], tuple[ModuleFiles, Callable]] = {}
    # Modules to submit: those a death took down (to retry) first, then the next fresh
    # one. Fresh ones are drawn one at a time: with_programs reads a profile's programs
    # when the first of them is drawn, and holds them no longer than that.
    fresh = with_programs(largest_first(groups))
    todo: deque[tuple[ModuleFiles, Callable]] = deque()
    try:
        while True:
            broken = False
            while len(pending) < 2 * jobs:
                if not todo:
                    nxt = next(fresh, None)
                    if nxt is None:
                        break
                    todo.append((nxt[0], functools.partial(_work, program=nxt[1])))
                try:
                    files, work = todo[0]
                    pending[pool.submit(work, files)] = todo[0]
                except BrokenProcessPool:
                    # A worker died since the last wait: the module stays queued.
                    broken = True
                    break
                todo.popleft()
            if not pending and not broken:
                return
            if not broken:
                done, _ = wait(pending, timeout=WATCH_SECONDS, return_when=FIRST_COMPLETED)
                broken = _is_broken(pool) or any(
                    isinstance(f.exception(), BrokenProcessPool) for f in done
                )
            if broken:
                # A broken pool fails each future it holds at once, but not one submitted
                # while it was breaking (CPython 3.11 fails them without its submit lock):
                # what is not done after BROKEN_GRACE is lost with the pool too.
                done, _ = wait(pending, timeout=BROKEN_GRACE, return_when=ALL_COMPLETED)
            lost: list[tuple[ModuleFiles, Callable]] = []  # taken down, in submission order
            for future in list(pending):
                if future in done and not isinstance(future.exception(), BrokenProcessPool):
                    yield pending.pop(future)[0], received(future.result())
                elif broken:
                    lost.append(pending.pop(future))
            if not broken:
                continue
            # The pool is gone, and every module it held with it: the first is parsed
            # alone (if it killed the worker, it fails alone), the rest in a new pool.
            pool.shutdown(wait=False, cancel_futures=True)
            todo.extendleft(reversed(lost[1:]))
            if lost:
                yield lost[0][0], received(_parse_alone(new_pool, *lost[0]))
            pool = new_pool(jobs)
            handoff.note_semaphores(directory)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        handoff.remove_directory(directory)  # with the files of results never read


#: How long the futures of a broken pool may take to be failed before they are taken
#: as lost with it.
BROKEN_GRACE = 5.0


def _is_broken(pool: ProcessPoolExecutor) -> bool:
    """Whether the pool has seen a worker die (CPython's flag, set before it fails the
    futures it holds)."""
    return bool(getattr(pool, "_broken", False))


def _parse_alone(
    new_pool: Callable[[int], ProcessPoolExecutor], files: ModuleFiles, work: Callable
) -> ParseResult:
    """Parse one module in a pool of its own; a second death fails only this module."""
    alone = new_pool(1)
    try:
        return alone.submit(work, files).result()
    except BrokenProcessPool:
        return Failed(
            error=DumpError(
                files.display, 0, "the parser process died (out of memory?); module skipped"
            ),
        )
    finally:
        alone.shutdown(wait=False, cancel_futures=True)
