"""Fuzz the OOM-log reader with mutants of the OOM logs under tests/data, by hand.

    python bench/oom_fuzz.py [--inputs 50000] [--seed 31] [--json FILE]

Seeds: tests/data/oom, tests/data/oom-codes (the catalogue's E0100-E1002 lines, a
real E1000 and libtpu's stderr) and tests/data/oom-join/train.log.
Each input is a fixture (or two spliced) changed in one to three ways: a byte
flipped, a marker, an absurd or negative number or a 20,000-character word pasted in, a line repeated,
dropped or cut, line ends made CR, the text cut anywhere or started mid-message.
Every input goes through what ingest runs per log (the scan, the folding of
repeats, the Arrow tables). It fails an input when an exception escapes, when
the reader reports an internal error of its own (a bug it contained), when a
stored size is negative (but a difference) or beyond 2^63-1, when an event's
lines or bytes lie outside the input, when the tables do not build or hold an
event without all its buffers (half-loaded), or past the time or memory bound of
bench/fuzzkit.py. Prints the counts, the slowest input's milliseconds and the
first failures.
"""

from __future__ import annotations

import io
import itertools
import random
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.fuzzkit import Check, arguments, fuzz, one_thread  # noqa: E402
from bufferhouse.parse.oom import SIGNED_FIGURES, LogScan, log_events  # noqa: E402
from bufferhouse.parse.oom.messages import merge_repeats  # noqa: E402
from bufferhouse.parse.oom.scan import CHUNK, scan_stream  # noqa: E402

DATA = ROOT / "tests" / "data"
FIXTURES = [DATA / "oom", DATA / "oom-codes", DATA / "oom-join"]
PASTE = [
    b"RESOURCE_EXHAUSTED",
    b"Out of memory while trying to allocate ",
    b"Unpadded size: ",
    b"  7. Size: 64.0K",
    b"\tBuffer 9:",
    b"XLA label: ",
    b"Peak buffers:",
    b"Total hbm usage >= 1.0G:",
    b"1" + b"0" * 30,
    b"9" * 400,
    b"8.00EiB",
    b"-6.00GiB",
    b"(,,, bytes)",
    b"\r",
    b"\xff\xfe",
    b"==========================",
    b"a" * 20_000,  # a long word: `\w+` tried from each offset of it was quadratic
    b"9" * 20_000,
    b"Size: " + b"7" * 5_000 + b"B",  # past Python's 4,300-digit int() limit
]


def mutate(rng: random.Random, data: bytes) -> bytes:
    kind = rng.randrange(9)
    at = rng.randrange(len(data) + 1)
    lines = data.split(b"\n")
    k = rng.randrange(len(lines))
    if kind == 0 and data:
        return data[: at - 1] + bytes([rng.randrange(256)]) + data[at:] if at else data
    if kind == 1:
        return data[:at] + rng.choice(PASTE) * rng.choice((1, 1, 2, 50)) + data[at:]
    if kind == 2:
        return b"\n".join(lines[:k] + [lines[k]] * rng.choice((2, 3, 100)) + lines[k + 1 :])
    if kind == 3:
        return b"\n".join(lines[:k] + lines[k + 1 :])
    if kind == 4:
        return data[:at]
    if kind == 5:
        return data[at:]
    if kind == 6:
        return data.replace(b"\n", b"\r") if rng.random() < 0.5 else data.replace(b"\n", b"\r\n")
    if kind == 7:  # a number made absurd or negative
        digits = [i for i in range(len(data)) if 48 <= data[i] <= 57]
        if digits:
            i = rng.choice(digits)
            return data[:i] + rng.choice((b"-", b"9" * 25, b"0.0.")) + data[i:]
        return data
    return data + b"\n" + data[at:]  # spliced with a tail of itself


def check(data: bytes) -> list[str]:
    result = LogScan("fuzz.log")
    # 4 KiB chunks put chunk ends inside messages; not for large inputs, where a message
    # read again at every chunk end (as it must be, to end it) is read len/chunk times
    chunk = 1 << 12 if len(data) < 1 << 20 else CHUNK
    result.events = list(scan_stream(io.BytesIO(data), result, chunk=chunk))
    result.events = merge_repeats(result.events)
    tables = log_events(result, "/fuzz/fuzz.log")
    bad = [p.message for p in result.problems if "internal error" in p.message]
    lines = data.count(b"\n") + data.count(b"\r") + 1
    for event in result.events:
        if not (1 <= event.line <= event.end_line <= lines):
            bad.append(f"lines {event.line}..{event.end_line} outside 1..{lines}")
        if event.byte_offset + len(event.raw) > len(data):
            bad.append(f"bytes {event.byte_offset}+{len(event.raw)} past {len(data)}")
        for key, value in event.figures.items():
            if (value < 0 and key.rsplit("/", 1)[-1] not in SIGNED_FIGURES) or value >= 1 << 63:
                bad.append(f"figure {key} = {value}")
        for buf in event.buffers:
            for key in ("size_bytes", "unpadded_bytes", "padding_bytes"):
                value = buf.get(key)
                if isinstance(value, int) and not 0 <= value < 1 << 63:
                    bad.append(f"buffer {key} = {value}")
    if tables.events.num_rows != len(result.events) - sum(
        "not stored" in p.message for p in tables.file_problems
    ):
        bad.append("events table lost a row")
    listed = sum(tables.events.column("buffer_count").to_pylist())
    if tables.buffers.num_rows != listed:  # an event stored without all its buffers
        bad.append(f"{tables.buffers.num_rows} buffer rows for {listed} listed")
    if bad:
        return bad
    return f"{min(len(result.events), 3)}{'+' if len(result.events) > 2 else ''} events"


def main(argv: list[str] | None = None) -> dict:
    ap = arguments(__doc__, 31)
    ap.add_argument(
        "--write", type=int, metavar="N", help="write input N to fuzz-N.log, check none"
    )
    args = ap.parse_args(argv)
    bases = [
        p.read_bytes()
        for d in FIXTURES
        for p in sorted(d.iterdir())
        if p.suffix in (".log", ".txt", ".out", ".err") and p.name != "no-oom.log"
    ]
    rng = random.Random(args.seed)
    inputs = (_input(rng, bases) for _ in range(args.inputs))
    if args.write is not None:
        data = next(itertools.islice(inputs, args.write, None), None)
        if data is not None:
            Path(f"fuzz-{args.write}.log").write_bytes(data)
        return {}
    total = [0]

    def checks() -> Iterator[Check]:
        for data in inputs:
            total[0] += len(data)
            yield lambda data=data: check(data)

    extra = lambda: {"seeds": len(bases), "mb": round(total[0] / 1e6, 1)}  # noqa: E731
    return fuzz("oom", args, checks(), extra)


def _input(rng: random.Random, bases: list[bytes]) -> bytes:
    data = rng.choice(bases)
    if rng.random() < 0.2:
        data += rng.choice(bases)
    for _ in range(rng.randrange(1, 4)):
        data = mutate(rng, data)
    return data


if __name__ == "__main__":
    one_thread()
    main()
