"""Fuzz the device memory profile (pprof) reader with mutants of the committed profiles.

    python bench/fuzz_pprof.py [--inputs 50000] [--seed 41] [--json FILE]

Seeds: every gzipped profile under tests/data (tests/data/runtime/run, the jax 0.12
CPU profile, tests/data/runtime-bad). Each input is a seed's uncompressed Profile
message with 1-3 edits, then gzipped again (and one in ten has its gzip bytes
edited too): a bit or byte changed, bytes cut or inserted, a varint made 2^31,
2^63 or 2^64-1, a top-level field moved to the front (protobuf allows any order),
a field repeated, a string of the string table made 20,000 characters or empty,
or a sample's value made negative or past int64; or an unknown field of 4-64 MiB of
zeros appended (one input in 100: a gzip bomb of a few KiB compressed). Each goes through what ingest
runs per profile, in this process (parse_profile: gunzip, decode, resolve, the
Arrow tables) and the content sniff. Outcomes: read (and then its tables hold one
row per sample and no negative size) or refused with the project's DumpError
(counted by kind); a failure is any other exception, an "internal error", an error
that names no byte offset or field, a read whose tables disagree with the snapshot,
or an input past the time or memory bound (bench/fuzzkit.py).
"""

from __future__ import annotations

import gzip
import io
import random
import re
import sys
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.fuzzkit import Check, arguments, fuzz, one_thread  # noqa: E402
from bufferhouse.parse import parse_profile  # noqa: E402
from bufferhouse.parse.discover import ProfileFile  # noqa: E402
from bufferhouse.parse.pprof import is_profile  # noqa: E402
from bufferhouse.parse.proto import wire  # noqa: E402
from bufferhouse.parse.results import ParsedSnapshot  # noqa: E402

DATA = ROOT / "tests" / "data"
#: What a refusal names, so a reader can find the damage: an offset, a field or sample.
_LOCATED = re.compile(
    r"byte \d+|bytes \d+|offset|field \d+|sample \d+|location \d+|function \d+|string \d+"
    r"|string_table|sample_type|--max-bytes|inflate|gzip|kind"
)
_KINDS = (
    "gzip",
    "inflate",
    "not a pprof Profile",
    "not a device memory profile",
    "string",
    "location",
    "function",
    "negative",
    "sample",
    "kind",
    "type",
)


def seeds() -> list[bytes]:
    """The uncompressed Profile messages of every profile under tests/data that inflates."""
    out = []
    for path in sorted(DATA.rglob("*.prof")):
        try:
            out.append(gzip.decompress(path.read_bytes()))
        except (OSError, EOFError, zlib.error):
            continue
    return out


def _top_fields(data: bytes) -> list[bytes] | None:
    """The message cut into its top-level fields (each with its key), or None if it does not
    walk."""
    try:
        spans = []
        pos = 0
        for _, _, _, end in wire.fields(data):
            spans.append(data[pos:end])
            pos = end
        return spans
    except wire.WireError:
        return None


def _varint_field(number: int, value: int) -> bytes:
    return wire.encode_varint(number << 3 | wire.VARINT) + wire.encode_varint(value)


def _len_field(number: int, payload: bytes) -> bytes:
    return wire.encode_varint(number << 3 | wire.LEN) + wire.encode_varint(len(payload)) + payload


def mutate(rng: random.Random, data: bytes) -> bytes:
    raw = bytearray(data)
    how = rng.choice((0, 1, 2, 3, 4, 5, 5, 6, 6, 7, 7, 7, 8, 8, 8, 9))  # half of them structural
    at = rng.randrange(len(raw) + 1)
    if how == 0 and raw:
        raw[min(at, len(raw) - 1)] ^= 1 << rng.randrange(8)
    elif how == 1 and raw:
        raw[min(at, len(raw) - 1)] = rng.randrange(256)
    elif how == 2:
        del raw[at : at + rng.choice((1, 2, 8, 64))]
    elif how == 3:
        raw[at:at] = rng.randbytes(rng.randint(1, 12))
    elif how == 4:
        raw[at : at + 1] = wire.encode_varint(rng.choice((1 << 31, 1 << 63, (1 << 64) - 1)))
    elif how in (5, 6, 7, 8):
        spans = _top_fields(bytes(raw))
        if not spans:
            return bytes(raw)
        k = rng.randrange(len(spans))
        if how == 5:  # a field moved to the front
            spans.insert(0, spans.pop(k))
        elif how == 6:  # a field repeated
            spans.insert(k, spans[k])
        elif how == 7:  # a string of the string table changed
            strings = [i for i, s in enumerate(spans) if s[:1] == b"\x32"]
            if strings:
                text = rng.choice(("", "x" * 20_000, "\u202ekind", "buffer\x00", "\udcff"))
                spans[rng.choice(strings)] = _len_field(6, text.encode("utf-8", "surrogatepass"))
        else:  # a sample with an absurd value
            value = rng.choice(((1 << 64) - 1, (1 << 63), 1 << 62, 0))
            sample = _varint_field(2, value) + _varint_field(2, value)  # packed-less values
            spans.insert(k, _len_field(2, _varint_field(1, 1) + sample))
        return b"".join(spans)
    else:  # another seed's tail spliced on
        return data + data[at:]
    return bytes(raw)


def bomb(rng: random.Random, data: bytes) -> tuple[bytes, bytes]:
    """`data` then an unknown field of 4-64 MiB of zeros, gzipped a block at a time (the
    zeros are never held here, so the peak RSS is the reader's); and the message's head."""
    size = rng.choice((4, 16, 64)) << 20
    head = data + wire.encode_varint(100 << 3 | wire.LEN) + wire.encode_varint(size)
    z = zlib.compressobj(1, zlib.DEFLATED, 31)
    block = bytes(1 << 20)
    parts = [z.compress(head)] + [z.compress(block) for _ in range(size >> 20)]
    return b"".join(parts) + z.flush(), head


def mutate_gzip(rng: random.Random, gz: bytearray) -> bytes:
    at = rng.randrange(len(gz))
    how = rng.randrange(3)
    if how == 0:
        gz[at] ^= 1 << rng.randrange(8)
    elif how == 1:
        del gz[at:]
    else:
        gz[at:at] = rng.randbytes(4)
    return bytes(gz)


def kind_of(message: str) -> str:
    return next((k for k in _KINDS if k in message), "other: " + re.sub(r"\d+", "N", message)[:60])


def check(path: Path, data: bytes, message: bytes) -> str | list[str]:
    path.write_bytes(data)
    is_profile(io.BytesIO(message))  # the sniff never raises (returns False on damage)
    result = parse_profile(ProfileFile(str(path), explicit=True))
    if isinstance(result, ParsedSnapshot):
        tables = result.snapshot
        bad = []
        samples = tables.samples.to_pylist()
        if tables.snapshot.num_rows != 1:
            bad.append(f"{tables.snapshot.num_rows} snapshot rows")
        for row in samples:
            for key in ("bytes", "count"):
                if isinstance(row.get(key), int) and row[key] < 0:
                    bad.append(f"sample {key} {row[key]}")
        return bad or "read"
    error = result.error
    assert error is not None
    if "internal error" in error.message:
        return [f"internal error: {error.message}"]
    if type(error).__name__ == "NotMemoryProfile":  # names the sample types it holds
        return "refused: another kind of profile"
    if not _LOCATED.search(error.message):
        return [f"unlocated: {error.message}"]
    return "refused: " + kind_of(error.message)


def main(argv: list[str] | None = None) -> dict:
    args = arguments(__doc__, 41).parse_args(argv)
    bases = seeds()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as d:
        path = Path(d) / "memory.prof"
        return fuzz("pprof", args, _checks(rng, bases, path), lambda: {"seeds": len(bases)})


def _checks(rng: random.Random, bases: list[bytes], path: Path) -> Iterator[Check]:
    while True:
        message = rng.choice(bases)
        for _ in range(rng.randint(1, 3)):
            message = mutate(rng, message)
        if rng.random() < 0.01:
            data, message = bomb(rng, message)
        else:
            data = gzip.compress(message, compresslevel=1, mtime=0)
        if rng.random() < 0.1:
            data = mutate_gzip(rng, bytearray(data))
        yield lambda data=data, message=message: check(path, data, message)


if __name__ == "__main__":
    one_thread()
    main()
