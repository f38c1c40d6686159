"""How many processes parse, and in which order modules are handed out."""

from __future__ import annotations

import contextlib
import os

from bufferhouse.parse.discover import LogFile, ModuleFiles, ProfileFile
from bufferhouse.parse.reader import stored_size

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


def parser_processes(groups: list[ModuleFiles], jobs: int | None) -> int:
    """How many processes parse `groups`: `jobs`, or by default one per core left by the
    writer (one where that is fewer than two, or for small inputs: worker processes
    take about a second to start), never more than modules.

    With two cores, workers cost CPU and buy no wall: the writer holds the other core.
    Measured on 2 cores, whole process tree, --jobs 1 vs 2 alternated: the ten 21 MB
    modules 7.3-7.9 vs 9.6-9.7 CPU-s (wall 6.9 vs 7.0 s quiet, worse under load);
    756 corpus modules (29 MB) 9.2-10.0 vs 13.4-15.0 CPU-s, wall 13-19 vs 23-33 s.
    """
    if jobs is None:
        cores = (os.cpu_count() or 1) - WRITER_CORES
        small = (
            len(groups) < PARALLEL_MIN_MODULES
            and sum(map(input_bytes, groups)) < PARALLEL_MIN_BYTES
        )
        jobs = 1 if small or cores < 2 else cores
    return max(1, min(jobs, len(groups) or 1))


#: A module this large, parsed alone, is parsed with more threads when cores are spare
#: (spare_threads); below it there is too little to share.
THREADS_MIN_BYTES = PARALLEL_MIN_BYTES
#: At most this many more threads: the texts of a 200 MB module are ten batches.
MAX_THREADS = 3


def spare_threads(groups: list[ModuleFiles], jobs: int | None) -> int:
    """How many more threads the one parser may use on a large module (parse_module's
    `threads`): the cores that `jobs` (by default all) grants and one parser leaves idle."""
    if parser_processes(groups, jobs) != 1:
        return 0
    asked = jobs if jobs is not None else os.cpu_count() or 1
    if asked < 2 or max(map(input_bytes, groups), default=0) < THREADS_MIN_BYTES:
        return 0
    return min(asked - 1, MAX_THREADS)


def largest_first(groups: list[ModuleFiles]) -> list[ModuleFiles]:
    """The order modules are parsed and written in, by one process or many.

    With many, it keeps the run from ending on one large module. With one or
    many, the batches that follow the large modules are small, and the last
    transaction, whose rewritten row groups no later write reuses, frees
    little: on the 200 MB bench fleet, 46 MB of warehouse instead of 71 MB
    in input order (374 free blocks of 1,078). Stable: ties keep input order.
    """
    return sorted(groups, key=input_bytes, reverse=True)


def input_bytes(group: ModuleFiles | LogFile | ProfileFile) -> int:
    """About how many bytes of text a module's dump files hold (0 for any it cannot stat),
    or a log scanned for OOM messages (a tenth: it is searched, not parsed)."""
    total = 0
    if isinstance(group, LogFile):
        with contextlib.suppress(OSError):
            size = os.path.getsize(group.path)
            total = (size * 8 if group.path.endswith(".gz") else size) // 10
        return total
    if isinstance(group, ProfileFile):  # a few kB to a few MB, read in one go
        with contextlib.suppress(OSError):
            total = os.path.getsize(group.path)
        return total
    for _, path in group.dump_files():
        with contextlib.suppress(OSError):
            size = stored_size(path)
            total += size * 8 if path.endswith(".gz") else size  # gz: about 8x text
    return total
