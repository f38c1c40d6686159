"""What the derived tables (bufferhouse/ingest/derive.py) cost at ingest.

    python bench/derive_cost.py TREE... [--rounds 2]

Ingests the same dump trees into fresh warehouses in-process (`jobs=1`),
alternately with the derive step and with it patched out, so both arms run
the same code on the same machine minutes apart. Reports wall time, process
CPU time (self and reaped children), the time spent inside the derive
statements and the warehouse size. CPU time and the derive time are the
figures to compare on a shared machine; wall time is noise under load.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import bufferhouse
from bufferhouse.load import writer as load


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trees", nargs="+", type=Path)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    real = load._derive_batch
    spent: list[float] = []

    def timed(con, module_ids):
        started = time.perf_counter()
        real(con, module_ids)
        spent.append(time.perf_counter() - started)

    print("| round | derive | modules | wall s | CPU s | in derive s | warehouse MB |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="bh-derive-cost-") as scratch:
        for n in range(args.rounds):
            for derive in (False, True):
                load._derive_batch = timed if derive else (lambda con, module_ids: None)
                spent.clear()
                db = Path(scratch) / f"{n}-{derive}.duckdb"
                cpu, wall = _cpu(), time.perf_counter()
                report = bufferhouse.ingest(args.trees, db=db, jobs=1)
                wall, cpu = time.perf_counter() - wall, _cpu() - cpu
                print(
                    f"| {n} | {'with' if derive else 'without'} | {len(report.loaded)} "
                    f"| {wall:.2f} | {cpu:.2f} | {sum(spent):.2f} "
                    f"| {os.path.getsize(db) / 1e6:.1f} |",
                    flush=True,
                )
    load._derive_batch = real
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
