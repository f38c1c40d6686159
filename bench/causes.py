"""`diff --show causes` on two large modules: seconds, against the plain diff.

    python bench/causes.py [--mb 200] [--repeat 3] [--peak heap]

Two `tests/synth` modules of `--mb` MB each, both named jit_synth: the base
tiles the jax-0.6.2 corpus (`combined`), the head the same programs compiled
by jax 0.7.2 (`stacktrace`), so the pair differs as a release upgrade does.
Each is made once under bench/_work/causes/ (gitignored) and ingested into a
warehouse of its own there. Then `bufferhouse.diff(base, head)` runs with and
without `causes=True`, alternated, `--repeat` times each, in this process;
printed: the median and best wall seconds of each and the median CPU
seconds of the process (all its threads), the causes' rows, and
whether they sum to the change (they must).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import bufferhouse

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "bench" / "_work" / "causes"


def module(side: str, fmt: str, number: int, mb: float) -> Path:
    """The side's warehouse, made (synth + ingest) if missing."""
    db = WORK / f"{side}-{mb:g}.duckdb"
    if db.exists():
        return db
    dump = WORK / f"{side}-{mb:g}"
    cmd = [sys.executable, str(ROOT / "bench" / "synth.py"), str(dump), "--mb", str(mb)]
    cmd += ["--format", fmt, "--name", "jit_synth", "--number", str(number)]
    subprocess.run(cmd, check=True)
    started = time.monotonic()
    report = bufferhouse.ingest(dump, db=db, jobs=2)
    assert report.ok and report.loaded, report
    print(f"{side}: ingested in {time.monotonic() - started:.1f}s", file=sys.stderr)
    return db


def exact(r) -> bool:
    """The causes of every measure sum to the module's change."""
    sums: dict[str, int] = {}
    for x in r.causes.to_pylist():
        sums[x["measure"]] = sums.get(x["measure"], 0) + (x["bytes"] or 0)
    changes = {x["metric"]: x["delta_bytes"] for x in r.changes.to_pylist()}
    return all(changes[m] == n for m, n in sums.items())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=200.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--peak", default="heap", choices=["heap", "logical", "total"])
    args = ap.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    base = module("base", "combined", 1, args.mb)
    head = module("head", "stacktrace", 2, args.mb)
    times: dict[bool, list[float]] = {False: [], True: []}
    cpu: dict[bool, list[float]] = {False: [], True: []}
    result = None
    for _ in range(args.repeat):
        for causes in (False, True):
            started, cpu_started = time.monotonic(), time.process_time()
            r = bufferhouse.diff(base, head, peak=args.peak, causes=causes)
            times[causes].append(time.monotonic() - started)
            cpu[causes].append(time.process_time() - cpu_started)
            result = r if causes else result
    assert result is not None and result.causes is not None
    values = {
        side: bufferhouse.sql("SELECT count(*) FROM hlo_values", db=db).column(0)[0].as_py()
        for side, db in (("base", base), ("head", head))
    }
    for causes, label in ((False, "diff"), (True, "diff --show causes")):
        t, c = times[causes], cpu[causes]
        print(
            f"{label}: wall median {statistics.median(t):.2f}s, best {min(t):.2f}s; "
            f"CPU median {statistics.median(c):.2f}s ({len(t)} runs)"
        )
    print(f"values: base {values['base']:,}, head {values['head']:,}")
    print(f"causes: {result.causes.num_rows} rows, exact sums: {exact(result)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
