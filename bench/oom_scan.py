"""Scan a 1 GB training log for OOM messages, next to DuckDB reading the same lines.

    python bench/oom_scan.py [--size-mb 1000] [--repeat 2] [--gzip] [--json FILE]
    python bench/oom_scan.py --markers 10000,20000,100000

With --markers: the time to scan a log of one line holding N markers (`RESOURCE_EXHAUSTED`
and `Unpadded size:`, starting no message), then a GPU message; it was quadratic in N
(issue 31: 20,000 took 299 s), it is linear: the seconds per marker stay flat.

The log is generated once under bench/_work/oom/ (gitignored): training-loop
lines of the kinds real jobs print (step/loss/throughput lines, glog lines,
progress bars, warnings) with the OOM fixtures of tests/data/oom (every form:
GPU Peak buffers, TPU compile and run time, the one-line form, a cut excerpt,
per-line prefixes) pasted in at fixed places. The scan must find exactly
those events at exactly the lines they were written to, or the run fails.

Timed, warm page cache, alternating, best of --repeat:
- `bufferhouse.parse.oom.scan_file(path)`: what ingest runs per log (one process);
- DuckDB's line read of the same file in the same run: `read_csv` with one
  VARCHAR column and no delimiter, quote or escape (every line read, all
  cores), counting the lines that contain RESOURCE_EXHAUSTED.
MB = 10^6 bytes of (uncompressed) log.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import random
import sys
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bufferhouse.parse.oom import scan_file  # noqa: E402

WORK = ROOT / "bench" / "_work" / "oom"
FIXTURES = ROOT / "tests" / "data" / "oom"
#: Fixtures pasted into the log, and how many events each holds.
PASTED = {
    "gpu-peak-buffers.log": 1,
    "tpu-compile.log": 1,
    "tpu-runtime.log": 1,
    "one-line.txt": 1,
    "prefixed-rank.out": 1,
    "glog-every-line.log": 1,
    "cut-short.txt": 1,
}
VERSION = 1  # of the generator: a change rebuilds the log


def _noise(rng: random.Random, step: int) -> str:
    kind = rng.random()
    if kind < 0.55:
        return (
            f"2026-11-20 09:{step // 3600 % 60:02d}:{step % 60:02d}.{rng.randrange(1000):03d} "
            f"step {step} loss={rng.uniform(1.5, 3.5):.4f} lr=3.0e-4 "
            f"throughput={rng.uniform(900, 1100):.1f} tok/s grad_norm={rng.uniform(0.1, 2):.3f}\n"
        )
    if kind < 0.8:
        return (
            f"I1120 09:14:{step % 60:02d}.{rng.randrange(10**6):06d} {rng.randrange(100, 999)} "
            f"trainer.cc:{rng.randrange(10, 900)}] checkpoint shard {step % 64} of 64 "
            f"written in {rng.uniform(0.1, 3):.2f}s ({rng.randrange(10**9)} bytes)\n"
        )
    if kind < 0.92:
        bar = "#" * (step % 40)
        return f"Epoch {step // 1000}: {step % 1000 / 10:.1f}%|{bar:<40}| {step}/100000 [eta 01:02:03]\n"
    return (
        f"W1120 09:14:{step % 60:02d}.000000 77 data.py:88] slow input pipeline: "
        f"batch {step} waited {rng.uniform(0.1, 9):.2f}s for host memory (prefetch=4)\n"
    )


def build(size: int, compress: bool) -> tuple[Path, list[tuple[int, str]]]:
    """The log (cached) and the (line, fixture) of every pasted message's first line."""
    name = f"train-{size // 10**6}mb-v{VERSION}.log" + (".gz" if compress else "")
    path = WORK / name
    index = path.with_suffix(path.suffix + ".json")
    if path.exists() and index.exists():
        return path, [tuple(x) for x in json.loads(index.read_text())]
    WORK.mkdir(parents=True, exist_ok=True)
    rng = random.Random(17)
    places = sorted(rng.sample(range(size // 20, size - size // 20), len(PASTED) * 2))
    pastes = [(at, fx) for at, fx in zip(places, [*PASTED, *PASTED], strict=True)]
    firsts: list[tuple[int, str]] = []
    written, line, step = 0, 1, 0
    tmp = path.with_suffix(path.suffix + ".tmp")
    opener = gzip.open if compress else open
    with opener(tmp, "wb") as f:
        buf: list[bytes] = []
        pending = 0
        while written < size:
            if pastes and written >= pastes[0][0]:
                fixture = pastes.pop(0)[1]
                data = (FIXTURES / fixture).read_bytes()
                first = next(iter(scan_file(str(FIXTURES / fixture)).events)).line
                firsts.append((line + first - 1, fixture))
            else:
                data = _noise(rng, step).encode()
                step += 1
            buf.append(data)
            pending += len(data)
            written += len(data)
            line += data.count(b"\n")
            if pending > 8 << 20:
                f.write(b"".join(buf))
                buf, pending = [], 0
        f.write(b"".join(buf))
    os.replace(tmp, path)
    index.write_text(json.dumps(firsts))
    return path, firsts


def duckdb_lines(path: Path) -> tuple[float, int]:
    con = duckdb.connect()
    try:
        started = time.perf_counter()
        hits = con.execute(
            "SELECT count(*) FROM read_csv(?, columns = {'line': 'VARCHAR'}, delim = '\\x01',"
            " quote = '', escape = '', header = false, auto_detect = false,"
            " strict_mode = false, null_padding = true)"
            " WHERE contains(line, 'RESOURCE_EXHAUSTED')",
            [str(path)],
        ).fetchone()[0]
        return time.perf_counter() - started, hits
    finally:
        con.close()


def bufferhouse_scan(path: Path) -> tuple[float, list]:
    started = time.perf_counter()
    scan = scan_file(str(path))
    return time.perf_counter() - started, scan.events


def markers_on_one_line(counts: list[int], repeat: int) -> dict:
    """Seconds to scan `noise line of N markers + one message`, best of `repeat`."""
    WORK.mkdir(parents=True, exist_ok=True)
    message = (FIXTURES / "gpu-peak-buffers.log").read_text()
    rows = []
    for n in counts:
        path = WORK / f"markers-{n}.log"
        path.write_text("x RESOURCE_EXHAUSTED Unpadded size: " * n + "\n" + message)
        best = min(bufferhouse_scan(path)[0] for _ in range(repeat))
        events = bufferhouse_scan(path)[1]
        if [len(e.buffers) for e in events] != [4]:
            sys.exit(f"{path}: expected the one message of 4 buffers, found {events}")
        rows.append(
            {
                "markers": 2 * n,
                "seconds": round(best, 3),
                "us_per_marker": round(best / (2 * n) * 1e6, 2),
            }
        )
        path.unlink()
    return {"machine": machine(), "one_line_markers": rows}


def machine() -> str:
    model = ""
    try:
        for row in Path("/proc/cpuinfo").read_text().splitlines():
            if row.startswith("model name"):
                model = row.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model or platform.processor()}, {os.cpu_count()} cores, Python {platform.python_version()}, DuckDB {duckdb.__version__}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mb", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--gzip", action="store_true", help="a .gz log (DuckDB reads it too)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--markers", help="comma-separated marker counts: time one-line logs")
    args = ap.parse_args()
    if args.markers:
        result = markers_on_one_line([int(n) for n in args.markers.split(",")], args.repeat)
        print(json.dumps(result, indent=2))
        return
    path, firsts = build(args.size_mb * 10**6, args.gzip)
    size = args.size_mb * 10**6 if not args.gzip else None
    if size is None:
        with gzip.open(path, "rb") as f:
            size = sum(len(c) for c in iter(lambda: f.read(16 << 20), b""))
    duck, ours, events = [], [], []
    for _ in range(args.repeat):
        seconds, hits = duckdb_lines(path)
        duck.append(seconds)
        seconds, events = bufferhouse_scan(path)
        ours.append(seconds)
    got = [(e.line, e.form) for e in events]
    want_lines = [line for line, _ in firsts]
    if [line for line, _ in got] != want_lines:
        sys.exit(f"scan found events at {got}, expected first lines {firsts}")
    mb = size / 1e6
    result = {
        "machine": machine(),
        "log": path.name,
        "mb": round(mb, 1),
        "events": len(events),
        "duckdb_lines_with_marker": hits,
        "bufferhouse_s": round(min(ours), 3),
        "bufferhouse_mb_s": round(mb / min(ours), 1),
        "duckdb_s": round(min(duck), 3),
        "duckdb_mb_s": round(mb / min(duck), 1),
        "ratio_to_duckdb": round(min(duck) / min(ours), 2),
    }
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
