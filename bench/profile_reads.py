"""How often an ingest reads an XProf profile that holds several programs, and what it costs.

    python bench/profile_reads.py [--programs 8] [--mb 200] [--repeat 2] [--jobs 1]
                                  [--metadata first|middle|last] [--checkout PATH]
                                  [--hlo PATH.hlo.pb]

A `.gz` profile of `--mb` MB (uncompressed) under bench/_work/profile_reads/
(gitignored): two planes of trace events (random bytes and zeros, so gzip has
work to do: about 1.5x) and the `/host:metadata` plane holding the HloProto of
`--hlo` (default: a fixture module, tests/data/proto donate_sgd, 10 KB, so
the time is the reading of the profile, not the parsing; bench/proto.py
makes larger ones) under `--programs` program names: before them
(`--metadata first`, where jax's profiler puts it: see
tests/data/proto/profile), between them or after them.

The CLI ingests it (a subprocess, fresh warehouse) with the package of
`--checkout` (default: this one; pass another worktree to measure before and
after): best wall time of `--repeat` runs, peak RSS of the ingest process,
and how many times the profile was opened (builtins.open of its path, counted
by a sitecustomize in the ingest process and, with `--jobs` > 1, its workers).
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.proto import timed_ingest  # noqa: E402

WORK = ROOT / "bench" / "_work" / "profile_reads"
PB = next((ROOT / "tests/data/proto/proto_only/donate_sgd").glob("*after_optimizations.hlo.pb"))


def make_profile(programs: int, mb: int, metadata: str, hlo: Path) -> Path:
    sys.path.insert(0, str(ROOT))
    from bufferhouse.parse.proto import xplane_pb2
    from bufferhouse.parse.proto.wire import encode_varint

    tag = hlo.name.split(".")[1]
    path = WORK / f"{tag}-p{programs}-{mb}mb-{metadata}" / "host.xplane.pb.gz"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = xplane_pb2.XPlane(id=0, name="/host:metadata")
    meta.stat_metadata[1].id, meta.stat_metadata[1].name = 1, "Hlo Proto"
    data = hlo.read_bytes()
    for k in range(programs):
        em = meta.event_metadata[k + 1]
        em.id, em.name = k + 1, f"{tag}({k})"
        em.stats.add(metadata_id=1, bytes_value=data)
    # Events of random bytes and zeros, from a pool larger than gzip's 32 KiB window:
    # about 2x compression, as trace events get, not the 1000x of repeated bytes.
    rng = random.Random(0)
    noise = rng.randbytes(1 << 19)
    pool = bytes(b for pair in zip(noise, bytes(len(noise))) for b in pair)
    events = [pool[i : i + 4096] for i in range(0, len(pool), 4096)]
    lines = [encode_varint(3 << 3 | 2) + encode_varint(len(e)) + e for e in events]
    n = mb * 1_000_000 // 2 // len(lines[0])
    with gzip.open(path, "wb", compresslevel=1) as f:
        planes = ["/host:CPU", "/device:CPU:0"]
        planes.insert({"first": 0, "middle": 1, "last": 2}[metadata], None)
        for which in planes:
            if which is None:
                body = meta.SerializeToString()
                f.write(encode_varint(1 << 3 | 2) + encode_varint(len(body)) + body)
                continue
            head = xplane_pb2.XPlane(id=1, name=which).SerializeToString()
            f.write(encode_varint(1 << 3 | 2) + encode_varint(len(head) + n * len(lines[0])) + head)
            for i in range(n):
                f.write(lines[i % len(lines)])
    return path


#: sitecustomize of every process of the ingest (PYTHONPATH): the ingest and its workers.
_SITE = """
import builtins, os
profile, log = os.environ["BENCH_PROFILE"], os.environ["BENCH_LOG"]
_open = builtins.open
def counting(file, *a, **k):
    if isinstance(file, (str, os.PathLike)) and os.path.realpath(file) == profile:
        with _open(log, "a") as out:
            out.write("open\\n")
    return _open(file, *a, **k)
builtins.open = counting
"""


def ingest(checkout: Path, profile: Path, jobs: int) -> tuple[float, int, int]:
    """Wall seconds, peak RSS (MiB) and opens of the profile of one CLI ingest."""
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site"
        site.mkdir()
        (site / "sitecustomize.py").write_text(_SITE)
        log = Path(tmp) / "opens.log"
        db = Path(tmp) / "bench.duckdb"
        env = dict(
            os.environ,
            PYTHONPATH=f"{checkout}{os.pathsep}{site}",
            BENCH_PROFILE=os.path.realpath(profile),
            BENCH_LOG=str(log),
        )
        seconds, rss = timed_ingest(profile.parent, db, jobs, cwd=Path(tmp), env=env)
        opens = len(log.read_text().splitlines()) if log.exists() else 0
    return seconds, rss, opens


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--programs", type=int, default=8)
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--metadata", choices=["first", "middle", "last"], default="first")
    ap.add_argument("--checkout", type=Path, default=ROOT)
    ap.add_argument("--hlo", type=Path, default=PB, help="the .hlo.pb of every program")
    args = ap.parse_args()
    profile = make_profile(args.programs, args.mb, args.metadata, args.hlo)
    runs = [ingest(args.checkout, profile, args.jobs) for _ in range(args.repeat)]
    best = min(r[0] for r in runs)
    print(
        f"{args.checkout}: {args.programs} programs of {args.hlo.stat().st_size / 1e6:.2f} MB,"
        f" {args.mb} MB profile"
        f" (metadata plane {args.metadata})"
        f" ({profile.stat().st_size / 1e6:.1f} MB .gz), --jobs {args.jobs}:"
        f" best of {args.repeat} {best:.2f} s, peak RSS {max(r[1] for r in runs)} MiB,"
        f" profile opened {runs[0][2]} times"
    )


if __name__ == "__main__":
    main()
