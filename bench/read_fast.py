"""Time the compiled instruction-text reader (parse/text/instructions.read_fast).

    python bench/read_fast.py [--mb 200] [--format stacktrace] [--rounds 5] [DUMP ...]

Inputs: the distinct ` from instruction:` texts of the given buffer-assignment dumps, or
of one tests/synth module of --mb MB (built once under bench/_work/ by bench/ingest.py's
build_module, reused after), in batches of parse_batch's size, as ingest hands them over.
Reported: CPU seconds of read_fast over all of them (time.process_time, best and median
of --rounds), and how many texts it reads (the rest go to hlo.parse_instruction).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.ingest import build_module
from bufferhouse.parse.text import columns, instructions, native

MARK = " from instruction:"


def distinct_texts(paths: list[Path]) -> list[str]:
    """Each distinct instruction text, as the column reader takes it from its line."""
    texts: dict[str, None] = {}
    for path in paths:
        with open(path, encoding="utf-8", newline="") as f:
            for line in f:
                if MARK in line:
                    texts[line.rstrip("\r\n").partition(MARK)[2][1:]] = None
    return list(texts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dumps", nargs="*", type=Path, help="buffer-assignment dumps")
    ap.add_argument("--mb", type=float, default=200.0, help="size of the synth module")
    ap.add_argument("--format", default="stacktrace", help="tests/synth format")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    if native.MISSING:
        print(native.MISSING)
        return 1
    paths = args.dumps or sorted(build_module(args.mb, args.format).glob("*-buffer-assignment.txt"))
    texts = pa.array(distinct_texts(paths), pa.string())
    size = columns._PARSE_BATCH
    batches = [texts.slice(at, size) for at in range(0, len(texts), size)]
    seconds, read = [], 0
    for _ in range(args.rounds):
        start = time.process_time()
        read = sum(len(instructions.read_fast(batch)[1]) for batch in batches)
        seconds.append(time.process_time() - start)
    print(
        f"{len(texts):,} distinct texts, {texts.nbytes / 1e6:.1f} MB: read_fast CPU "
        f"{min(seconds):.3f} s best, {statistics.median(seconds):.3f} s median; read "
        f"{read:,} ({read / max(len(texts), 1):.2%}), {len(texts) - read:,} to parse_instruction"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
