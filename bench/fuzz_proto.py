"""A fuzz profile of the protobuf readers, run by hand (issue 31): `.hlo.pb` and `.xplane.pb`
mutants of the committed fixtures, every outcome counted.

    python bench/fuzz_proto.py [--inputs 50000] [--seed 0] [--xplane 0.3] [--timeout 20]
                               [--bomb-gib 1] [--json out.json]

Each input is a fixture (tests/data/proto: the six proto_only HloProtos, the
profile) with 1-4 edits: a bit flipped, a byte replaced, bytes cut or inserted,
a run of zeros written, a varint length patched to a huge value. An `.hlo.pb`
mutant is decoded and parsed (parse/proto: decode_hlo_proto, parse_hlo_proto);
a profile mutant is listed and read (xplane.list_programs, read_programs, from
memory) and each program whose HloProto changed is parsed. Outcomes: parsed (and
then the invariants `check` runs must hold on its rows: schema/invariants),
refused with a DumpError (counted by kind; one without a byte offset or a field
path is "unlocated"), or anything else: a traceback, or a hang (past
`--timeout` seconds, by SIGALRM). With `--bomb-gib`, a .hlo.pb.gz of that many
GiB of zeros (alone, and after a field header whose length covers them) is read
in a fresh process and its peak RSS reported.

The CI keeps a small derandomized sample of the same (tests/parse/proto/test_proto.py).
"""

from __future__ import annotations

import argparse
import collections
import gzip
import io
import json
import os
import random
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bufferhouse.errors import DumpError  # noqa: E402
from bufferhouse.parse.proto import decode, parse_xplane_program, wire, xplane  # noqa: E402
from bufferhouse.schema.invariants import violations  # noqa: E402

PROTO = ROOT / "tests" / "data" / "proto"
PBS = [p.read_bytes() for p in sorted(PROTO.glob("proto_only/*/*after_optimizations.hlo.pb"))]
XPLANE = PROTO / "profile" / "plugins" / "profile" / "run1" / "host.xplane.pb.gz"

#: The error kinds, by a phrase of their message (first match wins).
KINDS = (
    "field number 0",
    "past protobuf's largest",
    "groups are not used",
    "which protobuf does not have",
    "has wire type",
    "varint",
    "not UTF-8",
    "needs",
    "bytes long but",
    "runs past",
    "file ends",
    "is listed",
    "is assigned",
    "past the size",
    "does not exist",
    "negative",
    "a cycle",
    "freed more often",
    "is not in",
    "without HloProtos",
    "without a buffer assignment",
    "no hlo_module",
    "does not parse",
    "Error parsing",
)
_LOCATED = re.compile(r"at byte \d+|[a-z_]+\[\d+\]|hlo_module|buffer_assignment")


def mutate(data: bytes, rng: random.Random) -> bytes:
    raw = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not raw:
            break
        at = rng.randrange(len(raw))
        how = rng.choice(("bit", "byte", "cut", "insert", "zeros", "length"))
        if how == "bit":
            raw[at] ^= 1 << rng.randrange(8)
        elif how == "byte":
            raw[at] = rng.randrange(256)
        elif how == "cut":
            del raw[at : at + rng.choice((1, 8, 64, 4096))]
        elif how == "insert":
            raw[at:at] = rng.randbytes(rng.randint(1, 16))
        elif how == "zeros":
            raw[at : at + 64] = bytes(64)
        else:
            raw[at : at + 1] = wire.encode_varint(rng.choice((1 << 31, 1 << 63, (1 << 64) - 1)))
    return bytes(raw)


def kind_of(message: str) -> str:
    return next((k for k in KINDS if k in message), "other: " + re.sub(r"\d+", "N", message)[:80])


class Hang(Exception):
    pass


def _alarm(*_):
    raise Hang


def run_pb(data: bytes) -> list[object]:
    proto = decode.decode_hlo_proto(data, "m.hlo.pb")
    return [decode.parse_hlo_proto(proto, "m.hlo.pb")]


def run_xplane(data: bytes, original: dict[str, bytes]) -> list[object]:
    xplane.open_dump = lambda _path: io.BytesIO(data)  # read from memory, not a file
    programs = xplane.list_programs("x.xplane.pb")
    got = xplane.read_programs("x.xplane.pb", [(p.name, p.offset) for p in programs])
    parsed = []
    for p in programs:
        hlo = got.get((p.name, p.offset))
        if hlo is None or original.get(p.name) == hlo:
            continue  # missing (counted by the ingest), or unchanged: parsed once already
        parsed.append(parse_xplane_program("x.xplane.pb", p.name, hlo))
    return parsed


def bomb_rss(gib: int, head: bytes) -> dict:
    """Peak RSS of a fresh process reading a .hlo.pb.gz of `head` then `gib` GiB of
    zeros (after its imports, and at the end: ru_maxrss keeps the high-water mark)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "module_0000.jit_bomb.cpu_after_optimizations.hlo.pb.gz"
        z = zlib.compressobj(9, zlib.DEFLATED, 31)
        block = bytes(1 << 20)
        with open(path, "wb") as f:
            f.write(z.compress(head))
            for _ in range(gib << 10):
                f.write(z.compress(block))
            f.write(z.flush())
        code = (
            "import resource, sys, time\n"
            "from bufferhouse.errors import DumpError\n"
            "from bufferhouse.parse.proto import parse_proto_file\n"
            "rss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024\n"
            "before, t = rss(), time.perf_counter()\n"
            "try:\n    parse_proto_file(sys.argv[1]); msg = 'parsed'\n"
            "except DumpError as exc:\n    msg = exc.message\n"
            "print(time.perf_counter() - t, before, rss())\n"
            "print(msg)\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code, str(path)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=True,
        ).stdout.splitlines()
        seconds, before, after = out[0].split()
        return {
            "gib_of_zeros": gib,
            "head": head.hex(),
            "gz_bytes": path.stat().st_size,
            "seconds": round(float(seconds), 3),
            "rss_after_imports_mb": int(before),
            "max_rss_mb": int(after),
            "message": out[1],
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--inputs", type=int, default=50_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--xplane", type=float, default=0.3, help="share of profile mutants")
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--bomb-gib", type=int, default=0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    rng = random.Random(args.seed)
    profile = gzip.decompress(XPLANE.read_bytes())
    xplane.open_dump = lambda _path: io.BytesIO(profile)
    wanted = [(p.name, p.offset) for p in xplane.list_programs("x")]
    original = {name: hlo for (name, _), hlo in xplane.read_programs("x", wanted).items()}
    signal.signal(signal.SIGALRM, _alarm)
    outcomes: collections.Counter[str] = collections.Counter()
    kinds: dict[str, collections.Counter[str]] = {
        "pb": collections.Counter(),
        "xplane": collections.Counter(),
    }
    examples: dict[str, str] = {}
    slowest = (0.0, "")
    start = time.perf_counter()
    for i in range(args.inputs):
        form = "xplane" if rng.random() < args.xplane else "pb"
        data = mutate(profile if form == "xplane" else rng.choice(PBS), rng)
        t = time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, args.timeout)
        try:
            parsed = run_xplane(data, original) if form == "xplane" else run_pb(data)
            outcome = f"{form} parsed"
            for module in parsed:
                if violations(module.tables):
                    outcome = f"{form} parsed, invariant broken"
                    examples.setdefault(outcome, f"input {i}")
        except DumpError as exc:
            outcome = f"{form} refused"
            kinds[form][kind_of(exc.message)] += 1
            if not _LOCATED.search(exc.message):
                outcome = f"{form} refused, unlocated"
                examples.setdefault(outcome, exc.message)
        except Hang:
            outcome = f"{form} hang"
            examples.setdefault(outcome, f"input {i}")
        except Exception as exc:  # what the profile is looking for
            outcome = f"{form} traceback"
            examples.setdefault(outcome, f"input {i}: {type(exc).__name__}: {exc}"[:300])
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        took = time.perf_counter() - t
        slowest = max(slowest, (took, f"{form} input {i}"))
        outcomes[outcome] += 1
        if (i + 1) % 5000 == 0:
            print(f"{i + 1} inputs, {time.perf_counter() - start:.0f} s", file=sys.stderr)
    result = {
        "inputs": args.inputs,
        "seed": args.seed,
        "seconds": round(time.perf_counter() - start, 1),
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        "slowest_input_s": round(slowest[0], 3),
        "slowest_input": slowest[1],
        "outcomes": dict(outcomes.most_common()),
        "kinds": {form: dict(c.most_common()) for form, c in kinds.items()},
        "examples": examples,
    }
    if args.bomb_gib:  # zeros alone, and one field whose length covers them
        result["bombs"] = [
            bomb_rss(args.bomb_gib, head)
            for head in (b"", wire.encode_varint(1 << 3 | wire.LEN) + wire.encode_varint(1 << 30))
        ]
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
