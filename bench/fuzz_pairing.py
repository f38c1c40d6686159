"""Fuzz the pairing of forms: a mutated text dump against its unchanged HloProto.

    python bench/fuzz_pairing.py [--inputs 50000] [--seed 43] [--json FILE]

Seeds: the six text+proto compiles of tests/data/proto/both (their buffer assignment,
values and live-range texts, and the proto). Each input is one of them with its text
files changed in one to three ways: a byte or line of a text
file changed, dropped, repeated or cut; a value line moved to another allocation;
a value's id changed; an allocation's size or a value's offset changed (one
compile's forms that disagree on a size); or the text of another seed's program
put in its place under this stem (two programs, one stem). The tree goes through
what ingest runs per module, in this process (discover, parse_files).

The oracle is a reading of this script's own: the (value id, allocation) pairs of
the text, by regex, and of the proto, by Google's protobuf (hlo_pb2). Outcomes:
`paired` (one text+proto module: the oracle must find the same pairs in both, as
many allocations, or the pairing is wrong), `split` (two modules, each with the
"not one compile" warning naming both files: the oracle must find the pairs
differ), `proto kept` (the text did not read: the proto lands, the text's located
error its warning). A failure is a wrong pairing, a split of agreeing forms, a
group that loses the proto, an exception, an "internal error", a module whose rows
break the warehouse's invariants (schema/invariants; every 100th input), or an
input past the time or memory bound (bench/fuzzkit.py).
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.fuzzkit import Check, arguments, fuzz, one_thread  # noqa: E402
from bufferhouse.parse import parse_files, proto  # noqa: E402
from bufferhouse.parse.discover import discover  # noqa: E402
from bufferhouse.parse.proto import hlo_pb2  # noqa: E402
from bufferhouse.parse.results import Failed, ParsedModule, outcome_name  # noqa: E402
from bufferhouse.schema.invariants import violations  # noqa: E402

BOTH = ROOT / "tests" / "data" / "proto" / "both"
BA = "-buffer-assignment.txt"
#: The text files of a seed that go in: the HLO module text and the memory-usage report
#: are left out (the pairing reads neither; they were a third of an input's time).
TEXTS = (BA, "-buffer-assignment-values.txt", "-live-range.txt")
_ALLOCATION = re.compile(rb"^allocation (\d+):", re.M)
_VALUE = re.compile(rb"^ value: <(\d+) ")
_SIZE = re.compile(rb"(allocation \d+: size )(\d+)")
_OFFSET = re.compile(rb"(offset=)(\d+)")


@dataclass(frozen=True)
class Seed:
    name: str
    stem: str
    texts: dict[str, bytes]  # suffix -> content
    proto: bytes
    pairs: frozenset[tuple[int, int]]  # the proto's (value id, allocation), by the oracle
    allocations: int


def proto_pairs(data: bytes) -> tuple[frozenset[tuple[int, int]], int]:
    """(logical buffer id, allocation index) of every assignment, and the allocations."""
    proto = hlo_pb2.HloProto()
    proto.ParseFromString(data)
    ba = proto.buffer_assignment
    pairs = {
        (a.logical_buffer_id, alloc.index)
        for alloc in ba.buffer_allocations
        for a in alloc.assigned
    }
    return frozenset(pairs), len(ba.buffer_allocations)


def text_pairs(data: bytes) -> tuple[frozenset[tuple[int, int]], int]:
    """The same, from a buffer-assignment text: each value line under its allocation."""
    pairs, allocation = set(), None
    for line in data.split(b"\n"):
        head = _ALLOCATION.match(line)
        if head:
            allocation = int(head.group(1))
            continue
        value = _VALUE.match(line)
        if value and allocation is not None:
            pairs.add((int(value.group(1)), allocation))
    return frozenset(pairs), len(_ALLOCATION.findall(data))


def seeds() -> list[Seed]:
    out = []
    for d in sorted(BOTH.iterdir()):
        pb = next(d.glob("*.hlo.pb"))
        stem = pb.name.removesuffix(".hlo.pb")
        texts = {
            p.name.removeprefix(stem): p.read_bytes()
            for p in d.iterdir()
            if p.name.removeprefix(stem) in TEXTS
        }
        pairs, allocations = proto_pairs(pb.read_bytes())
        out.append(Seed(d.name, stem, texts, pb.read_bytes(), pairs, allocations))
    return out


def _lines(rng: random.Random, data: bytes) -> bytes:
    lines = data.split(b"\n")
    k = rng.randrange(len(lines))
    how = rng.randrange(5)
    if how == 0:
        del lines[k]
    elif how == 1:
        lines.insert(k, lines[k])
    elif how == 2 and lines[k]:
        at = rng.randrange(len(lines[k]))
        lines[k] = lines[k][:at] + bytes([rng.randrange(32, 127)]) + lines[k][at + 1 :]
    elif how == 3:
        return data[: rng.randrange(len(data) + 1)]
    else:
        j = rng.randrange(len(lines))
        lines[k], lines[j] = lines[j], lines[k]
    return b"\n".join(lines)


def _move_value(rng: random.Random, data: bytes) -> bytes:
    """A value line moved under another allocation (the same bytes, assigned elsewhere)."""
    lines = data.split(b"\n")
    values = [i for i, line in enumerate(lines) if _VALUE.match(line)]
    heads = [i for i, line in enumerate(lines) if _ALLOCATION.match(line)]
    if not values or len(heads) < 2:
        return data
    line = lines.pop(rng.choice(values))
    head = rng.choice(heads)
    lines.insert(head if head < len(lines) else len(lines), line)
    lines.insert(min(head + 1, len(lines)), lines.pop(head))  # after its allocation line
    return b"\n".join(lines)


def _number(rng: random.Random, data: bytes, pattern: re.Pattern[bytes]) -> bytes:
    hits = list(pattern.finditer(data))
    if not hits:
        return data
    m = rng.choice(hits)
    new = str(int(m.group(2)) + rng.choice((-64, 64, 4096, 1))).encode()
    return data[: m.start(2)] + new + data[m.end(2) :]


def _value_id(rng: random.Random, data: bytes) -> bytes:
    hits = [m for m in re.finditer(rb"^ value: <(\d+) ", data, re.M)]
    if not hits:
        return data
    m = rng.choice(hits)
    new = str(int(m.group(1)) + rng.choice((1, 1000))).encode()
    return data[: m.start(1)] + new + data[m.end(1) :]


def mutate(rng: random.Random, seed: Seed, others: list[Seed]) -> dict[str, bytes]:
    texts = dict(seed.texts)
    for _ in range(rng.choice((1, 1, 2))):
        how = rng.randrange(9)
        if how == 0:  # another program under this stem
            other = rng.choice(others)
            texts = {
                s: c.replace(other.stem.encode(), seed.stem.encode())
                for s, c in other.texts.items()
            }
        elif how == 1:
            texts[BA] = _move_value(rng, texts[BA])
        elif how == 2:
            texts[BA] = _value_id(rng, texts[BA])
        elif how == 3:
            texts[BA] = _number(rng, texts[BA], _SIZE)
        elif how == 4:
            texts[BA] = _number(rng, texts[BA], _OFFSET)
        elif how == 5:
            texts[BA] = _lines(rng, texts[BA])
        elif how == 6:
            pass  # unchanged: the forms must pair
        else:
            suffix = rng.choice(sorted(texts))
            texts[suffix] = _lines(rng, texts[suffix])
    return texts


def _names_both(result: ParsedModule, ba: str, pb: str) -> bool:
    return any(
        "not one compile" in w.message and ba in w.message and pb in w.message
        for w in result.warnings
    )


def check(tree: Path, seed: Seed, texts: dict[str, bytes], deep: bool) -> str | list[str]:
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir()
    for suffix, content in texts.items():
        (tree / f"{seed.stem}{suffix}").write_bytes(content)
    pb = tree / f"{seed.stem}.hlo.pb"
    pb.write_bytes(seed.proto)
    groups = discover([tree])
    if len(groups) != 1:
        return [f"{len(groups)} groups for one stem"]
    result = parse_files(groups[0])
    if isinstance(result, Failed) and "internal error" in result.error.message:
        return [f"internal error: {result.error.message}"]
    if not isinstance(result, ParsedModule):
        error = getattr(result, "error", None)
        why = error.message if error else ""
        return [f"{outcome_name(result)}: {why} (the proto must land)"]
    modules = [result] + ([result.companion[1]] if result.companion else [])
    for m in modules:
        if deep and violations(m.tables):
            return [f"invariant broken: {violations(m.tables)[0]}"]
    text = text_pairs(texts.get(BA, b""))
    agree = text == (seed.pairs, seed.allocations)
    kinds = [m.row["source_kind"] for m in modules]
    ba = str(tree / f"{seed.stem}{BA}")
    if kinds == ["text+proto"]:
        return "paired" if agree else [f"wrong pairing: text {sorted(text[0] ^ seed.pairs)[:4]}"]
    if sorted(kinds) == ["proto", "text"]:
        if agree:
            return ["split, though the oracle finds the forms agree"]
        if not all(_names_both(m, ba, str(pb)) for m in modules):
            return ["split without the warning naming both files on each"]
        return "split"
    if kinds == ["proto"]:
        if not any(w.path.startswith(str(tree)) and w.path != str(pb) for w in result.warnings):
            return ["proto alone, without the text's error as its warning"]
        return "proto kept"
    return [f"modules {kinds}"]


def read_proto_once() -> None:
    """Each seed's proto, unchanged in every input, read once (its reader has a fuzzer of
    its own: fuzz_proto.py): parse_files gets a copy of the first reading each time, so
    the pairing, the split and derive run per input. Two thirds of an input's time was
    reading the proto again."""
    read, held = proto.parse_proto_file, {}

    def once(path: str) -> proto.Reading:
        data = Path(path).read_bytes()
        if data not in held:
            held[data] = read(path)
        r = held[data]
        return dataclasses.replace(
            r,
            tables=dict(r.tables),
            facts=dataclasses.replace(r.facts),
            warnings=list(r.warnings),
            sections=list(r.sections),
            features=set(r.features),
        )

    proto.parse_proto_file = once


def main(argv: list[str] | None = None) -> dict:
    args = arguments(__doc__, 43).parse_args(argv)
    bases = seeds()
    read_proto_once()
    for s in bases:  # the oracle reads the seeds as the proto says
        assert text_pairs(s.texts[BA]) == (s.pairs, s.allocations), s.name
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as d:
        tree = Path(d) / "dump"
        checks = _checks(rng, bases, tree)
        return fuzz("pairing", args, checks, lambda: {"seeds": len(bases)}, every=1000)


def _checks(rng: random.Random, bases: list[Seed], tree: Path) -> Iterator[Check]:
    for i in itertools.count():
        seed = rng.choice(bases)
        texts = mutate(rng, seed, [s for s in bases if s is not seed])
        yield lambda seed=seed, texts=texts, i=i: check(tree, seed, texts, i % 100 == 0)


if __name__ == "__main__":
    one_thread()
    main()
