"""The compiled reader on hostile input (docs/native.md): split_lines and every kernel
of native/__init__.py (found by name: each public function but split_lines takes a
column of lines) get truncated lines, random binary, invalid UTF-8, NULs, every
prefix of real dump lines and 1 GB single lines. None may crash, hang or read out of
bounds (tests/parse/text/test_native_sanitizers.py runs this file under ASan and UBSan):
split_lines gives exactly the lines Python's own split and decode give, or None;
a kernel gives its columns or raises Irregular, nothing else.

The 1 GB tests are slow: 2-8 s each here, and up to 4 GB of memory.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import random
import re
import shutil
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from bufferhouse.parse.discover import discover
from bufferhouse.parse.reader import open_dump
from bufferhouse.parse.text import grammar, native
from tests.conftest import DATA, SAMPLES, run_with

if native.MISSING is not None:
    pytest.skip(native.MISSING, allow_module_level=True)

Irregular = native.Irregular

NATIVE = Path(native.__file__).parent
#: The extension modules setup.py builds, one per C file.
EXTENSIONS = [importlib.import_module(f"{native.__name__}.{p.stem}") for p in NATIVE.glob("_*.c")]
#: What a kernel's parameters other than `lines` get: what the column reader passes, from
#: grammar.py (a new kernel with another parameter fails test_the_kernels_are_found).
ARGUMENTS: dict[str, Callable[[], object]] = {
    "letters": lambda: grammar.BLOCK_LETTERS,
    "from_text": lambda: grammar.FROM,
    "prefixes": lambda: tuple(prefix.encode() for prefix, _ in grammar.SECTIONS),
}


def _bound(kernel: Callable) -> Callable:
    """`kernel` with its parameters other than `lines` given as the column reader gives them."""
    extra = {
        p.name: ARGUMENTS[p.name]()
        for p in inspect.signature(kernel).parameters.values()
        if p.name != "lines" and p.default is inspect.Parameter.empty and p.name in ARGUMENTS
    }
    return functools.partial(kernel, **extra)


#: The kernels over a column of lines, by name.
KERNELS: dict[str, Callable] = {
    name: _bound(getattr(native, name))
    for name in native.__all__
    if inspect.isfunction(getattr(native, name)) and name != "split_lines"
}
GiB = 1 << 30


def _dumps() -> Iterator[tuple[str, bytes]]:
    """Every text dump file under tests/data (bad ones included), as bytes."""
    for group in discover([DATA]):
        for _, path in group.dump_files():
            try:
                with open_dump(path) as f:
                    yield path, f.read()
            except (OSError, EOFError, ValueError, zlib.error):
                continue  # a corrupt .gz: no text to feed


DUMPS = dict(_dumps())


def _column(lines: list[bytes]) -> pa.LargeStringArray:
    """`lines` as a large_string column, as they are: UTF-8 or not (no validation)."""
    offsets = np.zeros(len(lines) + 1, np.int64)
    offsets[1:] = np.cumsum([len(line) for line in lines])
    return pa.LargeStringArray.from_buffers(
        len(lines), pa.py_buffer(offsets), pa.py_buffer(b"".join(lines))
    )


def _apply(kernel: Callable, lines: pa.LargeStringArray) -> object | None:
    """The kernel's result over `lines`, None if it raised Irregular."""
    try:
        return kernel(lines)
    except Irregular:
        return None


# -- split_lines ---------------------------------------------------------------------


def _reference_split(text: bytes) -> list[str] | None:
    """What split_lines must give: the newline-terminated lines (CRLF read as LF), None
    if one holds a lone CR, a NUL or invalid UTF-8."""
    out = []
    for line in text.split(b"\n")[:-1]:  # what follows the last newline is no line
        line = line.removesuffix(b"\r")
        if b"\r" in line or b"\0" in line:
            return None
        try:
            out.append(line.decode("utf-8"))
        except UnicodeDecodeError:
            return None
    return out


def _split(text: bytes) -> list[str] | None:
    lines = native.split_lines(text)
    return None if lines is None else lines.to_pylist()


def test_split_lines_reads_every_dump_as_python_does():
    assert any(_reference_split(text) is None for text in DUMPS.values())  # bad/ is there
    for path, text in DUMPS.items():
        assert _split(text) == _reference_split(text), path


def _mutations(text: bytes, rng: random.Random) -> Iterator[bytes]:
    """`text` truncated, with bytes flipped, inserted, NULs and CRs put in."""
    for _ in range(40):
        at = rng.randrange(len(text) + 1)
        yield text[:at]
        yield text[:at] + bytes([rng.randrange(256)]) + text[at:]
        yield text[:at] + rng.choice([b"\0", b"\r", b"\r\n", b"\xff", b"\xe2\x80", b"\xed\xa0\x80"])
        yield bytes(rng.randrange(256) for _ in range(rng.randrange(64)))
        yield text[:at] + bytes(rng.randrange(256) for _ in range(8)) + text[at + 8 :]


def test_split_lines_reads_damaged_text_as_python_does():
    rng = random.Random(28)
    seeds = [text[:4000] for text in list(DUMPS.values())[::25]]
    checked = 0
    for seed in seeds:
        for text in _mutations(seed, rng):
            assert _split(text) == _reference_split(text), text
            checked += 1
    assert checked > 1000


@pytest.mark.parametrize("buffer", [bytearray(b"a\nb\n"), memoryview(b"a\nb\n"), b"a\nb\n"])
def test_split_lines_takes_any_buffer(buffer):
    assert _split(buffer) == ["a", "b"]


def test_split_lines_refuses_what_is_no_buffer():
    for bad in ("a\n", None, 3, memoryview(b"a\n\n\n")[::2]):
        with pytest.raises((TypeError, BufferError)):
            native.split_lines(bad)


# -- the kernels -----------------------------------------------------------------------


def test_the_kernels_are_found():
    assert {"sequence", "live_ranges", "peak"} <= set(KERNELS), KERNELS
    for name in KERNELS:
        required = [
            p
            for p in inspect.signature(getattr(native, name)).parameters.values()
            if p.default is inspect.Parameter.empty
        ]
        unknown = [p.name for p in required if p.name != "lines" and p.name not in ARGUMENTS]
        assert required[0].name == "lines" and not unknown, f"{name}: add {unknown} to ARGUMENTS"


def _runs(kernel: Callable) -> list[list[bytes]]:
    """Runs of consecutive dump lines the kernel reads whole: from each line where the
    last run stopped, as far as it reads (found through Irregular's line index)."""
    runs = []
    for text in DUMPS.values():
        lines = native.split_lines(text)
        if lines is None:
            continue
        raw = [s.encode() for s in lines.to_pylist()]
        at = 0
        while at < len(raw):
            try:
                kernel(lines.slice(at))
                read = len(raw) - at
            except Irregular as exc:
                read = int(str(exc).split()[1]) if str(exc).startswith("line ") else 0
            if read:
                runs.append(raw[at : at + read])
            at += max(read, 1)
    return runs


@pytest.fixture(scope="module", params=sorted(KERNELS))
def kernel(request) -> tuple[Callable, list[list[bytes]]]:
    """A kernel, and the runs of fixture lines it reads (some, or the test is moot)."""
    found = KERNELS[request.param]
    runs = _runs(found)
    assert runs, f"{request.param} reads no fixture line"
    return found, runs


def test_every_prefix_of_a_line_read_is_read_or_irregular(kernel):
    read, runs = kernel
    rng = random.Random(28)
    lines = [line for run in runs for line in run]
    for line in rng.sample(lines, min(len(lines), 300)):
        text = line.decode()
        for k in range(len(text)):
            _apply(read, _column([text[:k].encode()]))
    for run in rng.sample(runs, min(len(runs), 30)):  # the last line cut, after the others
        last = run[-1].decode()
        for k in range(len(last)):
            _apply(read, _column([*run[:-1], last[:k].encode()]))
        assert _apply(read, _column(run)) is not None  # and whole, the run still reads


def test_damaged_lines_are_read_or_irregular(kernel):
    """Bytes flipped, inserted, cut; invalid UTF-8 and NULs (a column split_lines would
    not make, but a kernel must survive)."""
    read, runs = kernel
    rng = random.Random(28)
    for run in rng.sample(runs, min(len(runs), 60)):
        text = b"\n".join(run[:50])
        for damaged in _mutations(text, rng):
            _apply(read, _column(damaged.split(b"\n")))


def _refuses_garbage(read: Callable) -> bool:
    """Whether the kernel reads every line (Irregular at one it does not) rather than
    picking out some (as glued, starting_with do) or classifying them (used_blocks)."""
    return _apply(read, _column([b"\x01garbage"])) is None


def test_random_binary_is_irregular(kernel):
    read, _ = kernel
    rng = random.Random(28)
    refuses = _refuses_garbage(read)
    for _ in range(300):
        lines = [bytes(rng.randrange(256) for _ in range(rng.randrange(40))) for _ in range(5)]
        got = _apply(read, _column([b"\xff", *lines]))
        assert got is None or not refuses


def test_an_empty_column_reads(kernel):
    read, _ = kernel
    assert _apply(read, _column([])) is not None


#: The C kernels' arguments after (offsets, chars), as the wrappers pass them.
RAW_ARGUMENTS: dict[str, tuple] = {
    "_lines.starting_with": (ARGUMENTS["prefixes"](),),
    "_blocks.glued": (ARGUMENTS["from_text"](),),
    "_blocks.used_blocks": (ARGUMENTS["letters"](),),
}


def _with(raw: Callable, extra: tuple) -> Callable:
    return lambda offsets, chars: raw(offsets, chars, *extra)


def _raw_kernels() -> list[tuple[str, Callable]]:
    return [
        (f"{ext.__name__.rsplit('.', 1)[1]}.{name}", getattr(ext, name))
        for ext in EXTENSIONS
        for name in dir(ext)
        if callable(getattr(ext, name)) and name != "split_lines" and not name.startswith("_")
    ]


@pytest.mark.parametrize(("name", "raw"), _raw_kernels())
def test_the_c_kernels_refuse_offsets_that_describe_no_lines(name, raw):
    """Each C kernel over (offsets, chars) checks every offset before it reads."""
    chars = b"    1:a"
    good = np.array([0, 7], np.int64)
    extra = RAW_ARGUMENTS.get(name, ())
    raw = _with(raw, extra)
    raw(good, chars)  # a C kernel with other arguments: add them to RAW_ARGUMENTS
    aligned = bytearray(np.array([0, 0, 7], np.int64).tobytes())
    for offsets in (
        np.array([0, 8], np.int64),  # past the characters
        np.array([0, 5, 3], np.int64),  # decreasing
        np.array([-1, 3], np.int64),  # before them
        np.array([], np.int64),  # not n + 1 offsets
        good.tobytes()[:12],  # not whole int64s
        memoryview(aligned)[4:20],  # not aligned
        np.array([0, 1 << 62], np.int64),
    ):
        with pytest.raises(ValueError):
            raw(offsets, chars)
    with pytest.raises(TypeError):
        raw(good, "    1:a")


# -- 1 GB lines ------------------------------------------------------------------------


@pytest.mark.slow
def test_split_lines_on_a_1_gb_line():
    text = bytearray(b"x") * GiB
    assert len(native.split_lines(text)) == 0  # no newline: no line
    text += b"\n"
    lines = native.split_lines(text)
    assert len(lines) == 1 and pa.compute.binary_length(lines)[0].as_py() == GiB
    del lines
    text[GiB // 2] = 0xFF
    assert native.split_lines(text) is None


def _huge(prefix: bytes, filler: bytes, suffix: bytes = b"") -> pa.LargeStringArray:
    """A column of one 1 GiB line: `prefix`, the byte `filler` repeated, `suffix`."""
    text = np.full(GiB, filler[0], np.uint8)
    text[: len(prefix)] = np.frombuffer(prefix, np.uint8)
    text[GiB - len(suffix) :] = np.frombuffer(suffix, np.uint8)
    offsets = np.array([0, GiB], np.int64)
    return pa.LargeStringArray.from_buffers(1, pa.py_buffer(offsets), pa.py_buffer(text))


def _ints(got: object) -> list[bytes]:
    """Every int64 column of a kernel's result (a table, arrays, a tuple or a record)."""
    if isinstance(got, pa.Table):
        return [c.to_numpy().tobytes() for c in got.columns if pa.types.is_int64(c.type)]
    if isinstance(got, np.ndarray):
        return [got.tobytes()] if got.dtype == np.int64 else []
    if isinstance(got, tuple):
        return [b for item in got for b in _ints(item)]
    if dataclasses.is_dataclass(got):
        return [b for f in dataclasses.fields(got) for b in _ints(getattr(got, f.name))]
    return []


INT64_MAX = str(2**63 - 1).encode()


def test_numbers_up_to_int64_are_read_and_past_it_refused(kernel):
    """Each run of digits in the lines read, made 2**63 - 1 and, where that still reads,
    2**63: refused, or read where it is no number (a name, a text: every int64 column
    as with 2**63 - 1); and 100,000 digits long: no crash."""
    read, runs = kernel
    read_some = False
    for run in random.Random(28).sample(runs, min(len(runs), 40)):
        for i, line in enumerate(run[:3]):
            for number in re.finditer(rb"[0-9]+", line):
                columns = {}
                for digits in (INT64_MAX, str(2**63).encode(), b"9" * 100_000):
                    grown = line[: number.start()] + digits + line[number.end() :]
                    columns[digits] = _apply(read, _column([*run[:i], grown, *run[i + 1 :]]))
                largest, past, _ = columns.values()
                if largest is None:  # no number there: a digit of an address, a name
                    continue
                assert past is None or _ints(past) == _ints(largest), line
                read_some = True
    assert read_some


@pytest.mark.slow
def test_kernels_on_1_gb_lines(kernel):
    """A 1 GB line of garbage; a line the kernel reads with 1 GB of garbage after it;
    and with its last number 1 GB long."""
    read, runs = kernel
    assert _apply(read, _huge(b"", b"x")) is None or not _refuses_garbage(read)
    line = min((run[0] for run in runs if re.search(rb"[0-9]", run[0])), key=len)
    _apply(read, _huge(line + "\u3000".encode(), b"x"))  # U+3000 is a space to \s
    last = [m.end() for m in re.finditer(rb"[0-9]+", line)][-1]
    _apply(read, _huge(line[:last], b"9", line[last:]))


#: Ingest a tree; every outcome, and each module table's rows per module content hash.
INGEST = r"""
import json, sys
import duckdb
import bufferhouse
from bufferhouse.schema import MODULE_TABLES
report = bufferhouse.ingest(sys.argv[1], db=sys.argv[2], jobs=1)
outcomes = sorted(
    [o.files.display, o.status, o.error and [o.error.path, o.error.line, o.error.message]]
    for o in report.outcomes
)
rows = {}
with duckdb.connect(sys.argv[2], read_only=True) as con:
    for t in MODULE_TABLES:
        rows[t.name] = con.execute(
            f"SELECT m.content_hash, count(*) FROM {t.name} JOIN modules m USING (module_id)"
            " GROUP BY ALL ORDER BY ALL"
        ).fetchall()
print(json.dumps({"outcomes": outcomes, "rows": rows}))
"""


@pytest.mark.slow
def test_an_ingest_fails_the_dump_with_a_1_gb_line_there_and_loads_the_rest(tmp_path):
    """A dump whose sixth line is 1 GiB long fails at that line; the modules beside it
    load as they do alone. (Here: 15 CPU-s and 4.4 GB peak, in a process of its own.)"""
    samples = sorted(SAMPLES.glob("*.txt"))[:4]
    alone, beside = tmp_path / "alone", tmp_path / "beside"
    for tree in (alone, beside):
        tree.mkdir()
        for sample in samples[1:]:
            shutil.copy(sample, tree / sample.name)
    huge = beside / "huge-buffer-assignment.txt"
    lines = samples[0].read_bytes().split(b"\n")
    with open(huge, "wb") as f:
        f.write(b"\n".join(lines[:5]) + b"\n")
        block = b"x" * (1 << 24)
        for _ in range(GiB // len(block)):
            f.write(block)
        f.write(b"\n" + b"\n".join(lines[5:]))
    got = run_with([INGEST, str(beside), str(tmp_path / "beside.duckdb")], tmp_path)
    huge.unlink()
    expected = run_with([INGEST, str(alone), str(tmp_path / "alone.duckdb")], tmp_path)
    failed = [o for o in got["outcomes"] if o[1] == "failed"]
    assert [(o[0], o[2][:2]) for o in failed] == [(str(huge), [str(huge), 6])], got["outcomes"]
    assert "unexpected line" in failed[0][2][2], failed
    loaded = [[Path(o[0]).name, o[1]] for o in got["outcomes"] if o[1] != "failed"]
    assert loaded == [[Path(o[0]).name, o[1]] for o in expected["outcomes"]]
    assert got["rows"] == expected["rows"] and expected["rows"]["allocations"]
