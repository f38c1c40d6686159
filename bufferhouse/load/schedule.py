"""How many processes parse, and in which order modules are handed out."""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from bufferhouse.parse.batch import batchable
from bufferhouse.parse.discover import LogFile, ModuleFiles, ProfileFile
from bufferhouse.parse.reader import stored_size

Group = ModuleFiles | LogFile | ProfileFile

#: Below this many bytes of dump files and PARALLEL_MIN_MODULES modules, the
#: default is one process (see parser_processes).
PARALLEL_MIN_BYTES = 32 * 1024 * 1024
#: A small module costs a parser fixed work, so many small ones repaid the second the
#: worker processes take to start when the parse was 3x slower (1,134 corpus modules,
#: 22 MB: 14.8-17.6 s in one process, 11.3-12.6 s in two; on 2 cores no longer, below).
PARALLEL_MIN_MODULES = 256
#: Cores the writer keeps busy while workers parse: the main process receives the
#: tables, stages them and inserts them into DuckDB, one batch at a time.
WRITER_CORES = 1


def parser_processes(groups: Sequence[Group], jobs: int | None) -> int:
    """How many processes parse `groups` (plan: the same figure, from sizes it took once)."""
    return _parsers(len(groups), sum(map(input_bytes, groups)), jobs)


def _parsers(count: int, total_bytes: int, jobs: int | None) -> int:
    """How many processes parse `count` groups of `total_bytes`: `jobs`, or by default one
    per core left by the writer (one where that is fewer than two, or for small inputs:
    worker processes take about a second to start), never more than modules.

    With two cores, workers cost CPU and buy no wall: the writer holds the other core.
    Measured on 2 cores, whole process tree, --jobs 1 vs 2 alternated: the ten 21 MB
    modules 7.3-7.9 vs 9.6-9.7 CPU-s (wall 6.9 vs 7.0 s quiet, worse under load);
    756 corpus modules (29 MB) 9.2-10.0 vs 13.4-15.0 CPU-s, wall 13-19 vs 23-33 s.
    """
    if jobs is None:
        cores = (os.cpu_count() or 1) - WRITER_CORES
        small = count < PARALLEL_MIN_MODULES and total_bytes < PARALLEL_MIN_BYTES
        jobs = 1 if small or cores < 2 else cores
    return max(1, min(jobs, count or 1))


#: A module this large, parsed alone, is parsed with more threads when cores are spare
#: (spare_threads); below it there is too little to share.
THREADS_MIN_BYTES = PARALLEL_MIN_BYTES
#: At most this many more threads: the texts of a 200 MB module are ten batches.
MAX_THREADS = 3


def spare_threads(groups: Sequence[Group], jobs: int | None) -> int:
    """How many more threads the one parser may use on a large module (plan.threads)."""
    sizes = list(map(input_bytes, groups))
    return _threads(_parsers(len(sizes), sum(sizes), jobs), max(sizes, default=0), jobs)


def _threads(parsers: int, largest: int, jobs: int | None) -> int:
    """parse_module's `threads`: the cores that `jobs` (by default all) grants and one
    parser leaves idle, where the largest module is worth sharing out."""
    if parsers != 1:
        return 0
    asked = jobs if jobs is not None else os.cpu_count() or 1
    if asked < 2 or largest < THREADS_MIN_BYTES:
        return 0
    return min(asked - 1, MAX_THREADS)


#: A module of text dumps of at most this many bytes is parsed in a batch of small
#: modules (parse/batch.py): below VECTOR_MIN_BYTES the line reader reads it, and its
#: cost is calls a module, not bytes.
BATCH_MAX_BYTES = 1 << 16
#: At most this many modules a batch (the writer's batch holds 256 modules).
BATCH_MODULES = 128


@dataclass(frozen=True)
class Plan:
    """The run, planned once from the groups left to read: the order they are parsed
    and written in (largest first), about how many bytes each holds, how many processes
    parse them, how many more threads one parser may use, and how `order` is cut into
    units of parsing: `units[i]` groups in a row, one a module parsed alone, more a batch
    of small modules (parse.batch). Each file is stat'ed once."""

    order: tuple[Group, ...]
    sizes: tuple[int, ...]
    parsers: int
    threads: int
    units: tuple[int, ...]


def plan(groups: Sequence[Group], jobs: int | None) -> Plan:
    """Plan the run of `groups` with `jobs` parser processes (None: the default)."""
    programs = Counter(g.xplane for g in groups if isinstance(g, ModuleFiles) and g.xplane)
    sized = [(input_bytes(g, programs), g) for g in groups]
    sized.sort(key=lambda pair: pair[0], reverse=True)  # stable: ties keep input order
    sizes = tuple(size for size, _ in sized)
    parsers = _parsers(len(sizes), sum(sizes), jobs)
    order = tuple(g for _, g in sized)
    return Plan(
        order=order,
        sizes=sizes,
        parsers=parsers,
        threads=_threads(parsers, max(sizes, default=0), jobs),
        units=_units(order, sizes),
    )


def _units(order: Sequence[Group], sizes: Sequence[int]) -> tuple[int, ...]:
    """`order` cut into units: runs of up to BATCH_MODULES small batchable modules (of
    1..BATCH_MAX_BYTES bytes) are one unit each, every other group a unit alone."""
    units: list[int] = []
    run = 0
    for group, size in zip(order, sizes):
        if 0 < size <= BATCH_MAX_BYTES and batchable(group):
            run += 1
            if run == BATCH_MODULES:
                units.append(run)
                run = 0
            continue
        if run:
            units.append(run)
            run = 0
        units.append(1)
    if run:
        units.append(run)
    return tuple(units)


def largest_first(groups: list[ModuleFiles]) -> list[ModuleFiles]:
    """The order modules are parsed and written in, by one process or many.

    With many, it keeps the run from ending on one large module. With one or
    many, the batches that follow the large modules are small, and the last
    transaction, whose rewritten row groups no later write reuses, frees
    little: on the 200 MB bench fleet, 46 MB of warehouse instead of 71 MB
    in input order (374 free blocks of 1,078). Stable: ties keep input order.
    """
    return sorted(groups, key=input_bytes, reverse=True)


def input_bytes(group: Group, programs: Counter[str] | None = None) -> int:
    """About how many bytes of text a module's dump files hold (0 for any it cannot stat),
    or a log scanned for OOM messages (a tenth: it is searched, not parsed).

    An HloProto counts its bytes (it was counted as 0, so a proto-only tree was planned
    as an empty one); a program of an XProf profile its share of the profile's bytes
    (`programs`: how many of the run's groups read that profile; by default one)."""
    if isinstance(group, LogFile):
        return _stat(group.path) // 10
    if isinstance(group, ProfileFile):  # a few kB to a few MB, read in one go
        return _stat(group.path, gz_factor=1)
    if group.xplane is not None:
        return _stat(group.xplane) // max(1, (programs or {}).get(group.xplane, 1))
    return sum(_stat(path) for _, path in group.content_files())


def _stat(path: str, gz_factor: int = 8) -> int:
    """The bytes of `path` (a .gz: about `gz_factor` times the stored ones), 0 where it
    cannot be stat'ed."""
    with contextlib.suppress(OSError):
        size = stored_size(path)
        return size * gz_factor if path.endswith(".gz") else size
    return 0
