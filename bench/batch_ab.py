"""Small modules parsed as a batch or one at a time, alternated in one process: CPU seconds.

    python bench/batch_ab.py [DIR ...] [--rounds 2]

Each round ingests the same helper modules (default: the first four dump directories of
bench/fleet.py's 2,000-module fleet, 1,000 modules) into a fresh warehouse, `jobs=1`, in
three ways, one after the other: `batch` (parse/batch.py with the batch's texts read
together: text/batch_scan.py, batch_finish.py), `batch-alone` (the batch of the Plan, but
each module's text read alone: parse.batch.BATCH_READING = False, as at 81e396c) and
`alone` (no batch: load.schedule.BATCH_MAX_BYTES = 0). The process's CPU time of each
ingest is printed, with the modules loaded (all three must load the same).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import fleet

MODES = ("batch", "batch-alone", "alone")


def _set(mode: str) -> None:
    from bufferhouse.load import schedule
    from bufferhouse.parse import batch

    batch.BATCH_READING = mode == "batch"
    schedule.BATCH_MAX_BYTES = 0 if mode == "alone" else 1 << 16


def run(paths: list[Path], mode: str) -> tuple[float, float, int]:
    """(CPU s, wall s, modules loaded) of one ingest in `mode`."""
    from bufferhouse.load.pipeline import ingest_paths

    _set(mode)
    with tempfile.TemporaryDirectory(prefix="bufferhouse-ab-") as tmp:
        cpu, wall = time.process_time(), time.perf_counter()
        report = ingest_paths(paths, os.path.join(tmp, "w.duckdb"), jobs=1)
        return time.process_time() - cpu, time.perf_counter() - wall, len(report.loaded)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", type=Path)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    paths = args.paths
    if not paths:
        root = fleet.build(fleet.WORK / "realfleet-2000", small=2000, large=(2.0,), log=print)
        paths = [root / f"dump-{i:02d}" for i in range(4)]
    run(paths[:1], "batch")  # warm: imports, the fork server, the page cache
    for r in range(args.rounds):
        for mode in MODES:
            cpu, wall, loaded = run(paths, mode)
            print(f"round {r + 1} {mode:12s} {cpu:6.2f} CPU-s {wall:6.2f} s wall, {loaded} modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
