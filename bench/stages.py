"""Where one ingest's time goes, by stage: py-spy samples of `bufferhouse ingest --jobs 1`.

    python bench/stages.py DUMP_DIR [--checkout PATH] [--rate 200] [--keep FILE]

Samples every Python thread of the ingest process (py-spy, `pip install py-spy`; not a
dependency of the package) and counts each sample once, in the first stage its stack
enters: start-up imports, hashing, the dump-line scan, the instruction texts, the rest
of finish, derive, the writer (DuckDB's work on the writer thread included: the thread
waits in `execute` while DuckDB runs the insert), other. A sample is a thread on the
CPU, so the shares add the threads' CPU, not wall time. `--checkout` runs another
worktree's package on the same venv (PYTHONPATH first), for a before/after.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

#: (stage, function, file): a sample is in the stage of its innermost frame listed.
STAGES = (
    ("imports at start-up", "_find_and_load", "<frozen importlib._bootstrap>"),
    ("hashing", "module_identity", "bufferhouse/parse/reader.py"),
    ("dump-line scan", "scan", "bufferhouse/parse/text/vector.py"),
    ("dump-line scan", "read", "bufferhouse/parse/text/scan.py"),
    ("instruction texts", "instructions", "bufferhouse/parse/text/columns.py"),
    ("finish (the rest)", "finish", "bufferhouse/parse/text/finish.py"),
    ("derive", "derive", "bufferhouse/parse/derive/__init__.py"),
    ("writer", "write", "bufferhouse/load/writer.py"),
    ("writer", "_derive_batch", "bufferhouse/load/writer.py"),
)


def stage_of(stack: str) -> str:
    """The stage of one sample's stack (py-spy raw frames: `function (file:line)`)."""
    for frame in reversed(stack.split(";")):
        function, _, where = frame.partition(" (")
        file = where.rsplit(":", 1)[0]
        for stage, name, suffix in STAGES:
            if function.rpartition(".")[2] == name and file.endswith(suffix):
                return stage
    return "other"


def profile(dump: Path, checkout: Path | None, rate: int, keep: Path | None) -> Counter:
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    cli = str(Path(sys.executable).with_name("bufferhouse"))
    env = dict(os.environ)
    if checkout is not None:
        env["PYTHONPATH"] = str(checkout)
    with tempfile.TemporaryDirectory(prefix="bufferhouse-stages-") as tmp:
        raw = keep or Path(tmp) / "profile.txt"
        cmd = [spy, "record", "-f", "raw", "-r", str(rate), "-o", str(raw), "--",
               cli, "ingest", str(dump), "--db", f"{tmp}/w.duckdb", "--jobs", "1", "--quiet"]  # fmt: skip
        subprocess.run(cmd, check=True, env=env, capture_output=True)
        counts: Counter = Counter()
        for line in raw.read_text().splitlines():
            stack, _, n = line.rpartition(" ")
            counts[stage_of(stack)] += int(n)
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dump", type=Path)
    parser.add_argument("--checkout", type=Path)
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--keep", type=Path, help="keep py-spy's raw samples here")
    args = parser.parse_args(argv)
    counts = profile(args.dump, args.checkout, args.rate, args.keep)
    total = sum(counts.values())
    print(f"{'stage':22} {'CPU-s':>7} {'share':>6}")
    for stage, n in counts.most_common():
        print(f"{stage:22} {n / args.rate:7.2f} {n / total:6.1%}")
    print(f"{'all threads':22} {total / args.rate:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
