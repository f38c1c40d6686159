"""The vectorized scanner: a large dump's bulky sections read as whole Arrow columns.

Nearly all of a dump's bytes are four kinds of regular lines: ` value:`
lines, Used values blocks, InstructionSequence and BufferLiveRange entries.
Here each kind is matched by one regex over a column of all its lines (Arrow
compute, in C++), owners are found by binary search and block structure is
checked as one string of line kinds. Only the few structural lines
(allocation headers, section headers, the peak list, the stack-trace tree)
go through the reference state machine of scan.py, one by one.

The scanner reads only what it can read exactly as the reference does: at
the first thing it does not expect (another layout or era, a line that does
not match, a broken invariant) it returns None and the module is scanned by
the reference, which also words every error. So it never needs to explain a
problem, only to notice one.
"""

from __future__ import annotations

import gzip
import os
import re
import zlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bufferhouse.errors import DumpError
from bufferhouse.ingest import model
from bufferhouse.ingest.model import Alloc
from bufferhouse.ingest.reader import read_lines, split_member
from bufferhouse.ingest.scan import _alloc_attributes, _Parser

# Python's \s (str patterns) as an RE2 class, so that RE2 and `re` agree on \S.
_SPACE = (
    r"\s\x0b\x1c-\x1f\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}"
)
_SHORT = (
    r"<(?P<id>[0-9]{1,18}) (?P<name>[^ {}<>]+)(?P<idx>\{[0-9,]*\})?(?P<phi> \(phi\))?"
    r"(?: @(?P<color>[0-9]{1,9}))?>"
)
_VALUE = (
    "^ value: "
    + _SHORT
    + r" \(size=(?P<size>[0-9]{1,18}),offset=(?P<offset>[0-9]{1,18})\): (?P<shape>.*)$"
)
_HEADER = "^" + _SHORT + "$"
_ALLOC = (
    r"^allocation (?P<index>[0-9]{1,9}): (?:(?P<address>0x[0-9a-fA-F]+), )?"
    r"size (?P<size>[0-9]{1,18})(?P<rest>.*):$"
)
_POSITION = r"^  (?P<name>[^ ,{}]+)(?: (?P<idx>\{[0-9,]*\}))?$"
_USE = r"^  (?P<name>[^ ,{}]+), operand (?P<op>[0-9]{1,9})(?: (?P<idx>\{[0-9,]*\}))?$"
_SEQ = r"^    (?P<step>[0-9]{1,9}):(?P<name>[^" + _SPACE + r"]+)$"
_BLR = r"^    (?P<name>[^ {}:]+)(?P<idx>\{[0-9,]*\}):(?P<start>[0-9]{1,9})-(?P<end>[0-9]{1,9})$"

#: One byte per line of the Used values section, and the grammar of their sequence.
_KINDS = re.compile(rb"(?:hPi+U(?:n|i*)f)*b*")
_FROM = " from instruction:"


class _Irregular(Exception):
    """Something the vectorized scanner does not read; the reference will."""


def scan(files: list[tuple[str, str]], min_bytes: int = 0) -> model.Scanned | None:
    """The module scanned, or None when the reference scanner must read it."""
    ba_path = next(path for role, path in files if role == "buffer_assignment")
    if any(split_member(path) is not None for _, path in files):
        return None
    try:
        if sum(os.path.getsize(path) for _, path in files) < min_bytes:
            return None
        p = _Parser()
        columns: dict[str, object] = {}
        seen: list[str] = []
        for role, path in files:
            if role == "usage_report":
                p.feed_report(path, read_lines(path))
                p._section("usage_report")
            else:
                _scan_file(p, path, columns, seen)
        if not set(_REQUIRED) <= set(seen):
            raise _Irregular("sections")
        if len(files) > 1 and any(r in ("values", "live_range") for r, _ in files):
            p.features.add("split")
        return p.scanned(ba_path, **columns)
    except (_Irregular, DumpError, OSError, EOFError, zlib.error, gzip.BadGzipFile):
        return None


_CHUNK = 1 << 26


def _open(path: str):
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")


def _size_hint(path: str) -> int:
    """Bytes of text in the file: its size, or for .gz the size its trailer records."""
    size = os.path.getsize(path)
    if path.endswith(".gz") and size >= 4:
        with open(path, "rb") as f:
            f.seek(-4, os.SEEK_END)
            return int.from_bytes(f.read(4), "little")  # modulo 4 GiB: a hint only
    return size


def _lines(path: str) -> pa.LargeStringArray:
    """All lines of the file, without their newlines, as one Arrow column.

    Read a chunk at a time, so the text is held about once, not twice.
    """
    text = np.empty(_size_hint(path), dtype=np.uint8)  # grown only if the hint is short
    size = 0
    ends = []  # offset in `text` where each line ends
    with _open(path) as f:
        while chunk := f.read(_CHUNK):
            if b"\r" in chunk or b"\0" in chunk:
                raise _Irregular("CRLF or binary")  # the reference reads and words these
            at = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10)
            ends.append(size + at - np.arange(len(at)))
            piece = np.frombuffer(chunk.replace(b"\n", b""), dtype=np.uint8)
            if size + len(piece) > len(text):
                grown = np.empty(max(2 * len(text), size + len(piece)), dtype=np.uint8)
                grown[:size] = text[:size]
                text = grown
            text[size : size + len(piece)] = piece  # a line cut by the chunk ends in the next
            size += len(piece)
    if not size:
        raise _Irregular("empty")
    stops = np.concatenate(ends)
    if not len(stops) or stops[-1] != size:
        stops = np.append(stops, size)  # a last line without its newline
    offsets = np.empty(len(stops) + 1, dtype=np.int64)
    offsets[0] = 0
    offsets[1:] = stops
    lines = pa.LargeStringArray.from_buffers(
        len(stops), pa.py_buffer(offsets), pa.py_buffer(text[:size])
    )
    try:
        lines.validate(full=True)
    except pa.ArrowInvalid:
        raise _Irregular("invalid UTF-8") from None
    return lines


def _extract(lines: pa.Array, pattern: str) -> pa.StructArray:
    """Named groups of `pattern` for every line; any line that does not match is irregular."""
    if len(lines) == 0:
        return pc.extract_regex(pa.array([], pa.large_string()), pattern)
    found = pc.extract_regex(lines, pattern)
    if found.null_count:
        raise _Irregular(pattern)
    return found


def _ints(column: pa.Array) -> pa.Array:
    return pc.cast(column, pa.int64())


def _optional_int(column: pa.Array) -> pa.Array:
    return pc.cast(pc.if_else(pc.equal(column, ""), None, column), pa.int64())


def _index(column: pa.Array) -> pa.Array:
    """A ShapeIndex group: '{}' when the dump printed none."""
    return pc.if_else(pc.equal(column, ""), "{}", column)


def _ordinals(groups: np.ndarray) -> np.ndarray:
    """Position of each row within its run of equal, sorted group numbers."""
    n = len(groups)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    first = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
    run_start = np.repeat(first, np.diff(np.r_[first, n]))
    return np.arange(n, dtype=np.int64) - run_start


_HEADS = (
    ("BufferAssignment:", "ba"),
    ("Total bytes used:", "total"),
    ("Used values:", "used"),
    ("HloLiveRange", "lr"),
    ("  InstructionSequence:", "seq"),
    ("  BufferLiveRange:", "blr"),
    ("  Live ranges at ", "peak"),
    ("  Stack trace breakdown", "trace"),
)
_HEAD_PATTERN = "^(?:" + "|".join(re.escape(prefix) for prefix, _ in _HEADS) + ")"
#: Section headers in the order XLA prints them, over one or several files.
_ORDER = [kind for _, kind in _HEADS]
_REQUIRED = ["ba", "used", "lr", "seq", "blr", "peak"]


def _scan_file(p: _Parser, path: str, columns: dict[str, object], seen: list[str]) -> None:
    """One file of the module: its bulk into `columns`, its structural lines through `p`."""
    lines = _lines(path)
    n = len(lines)
    heads = pc.match_substring_regex(lines, _HEAD_PATTERN)
    at = np.flatnonzero(heads.to_numpy(zero_copy_only=False))
    kinds = [_head_kind(line) for line in pc.take(lines, pa.array(at)).to_pylist()]
    for kind in kinds:
        rank = _ORDER.index(kind)
        if (seen and _ORDER.index(seen[-1]) >= rank) or any(
            r not in seen for r in _REQUIRED if _ORDER.index(r) < rank
        ):
            raise _Irregular("sections out of order or missing")
        seen.append(kind)
    bounds = dict(zip(kinds, zip(at.tolist(), [*at[1:].tolist(), n])))

    bulk = np.zeros(n, dtype=bool)  # lines read here, not by the state machine
    is_value = is_alloc = None
    if "ba" in bounds:
        start, end = bounds["ba"]
        section = lines[start + 1 : end]
        is_value = pc.starts_with(section, " value: ").to_numpy(zero_copy_only=False)
        is_alloc = pc.starts_with(section, "allocation ").to_numpy(zero_copy_only=False)
        bulk[start + 1 : end] = is_value | is_alloc
    for kind in ("used", "seq", "blr"):
        if kind in bounds:
            start, end = bounds[kind]
            bulk[start + 1 : end] = True
    structural = np.flatnonzero(~bulk)
    used_end, used_block = n + 1, None
    if "used" in bounds:
        # The machine does not see the blocks: it is left as after the last one.
        start, used_end = bounds["used"]
        if pc.any(pc.starts_with(lines[start + 1 : used_end], "<")).as_py():
            used_block = {"id": None, "text": ""}
    p.begin_file()
    for i, line in zip(structural.tolist(), pc.take(lines, pa.array(structural)).to_pylist()):
        if i >= used_end and p.state == "used" and p.block is None:
            p.block, p.block_state = used_block, "instr"
        p._line(path, i + 1, line)
    if p.state == "used" and p.block is None:
        p.block, p.block_state = used_block, "instr"
    p.last_line = n
    p.end_file(path)

    if "ba" in bounds:
        if "values" in columns:
            raise _Irregular("value lines in two files")
        start, end = bounds["ba"]
        section = lines[start + 1 : end]
        columns["allocs"] = _allocations(
            path, section.filter(pa.array(is_alloc)), start + 2 + np.flatnonzero(is_alloc)
        )
        columns["values"] = _values(
            p,
            columns["allocs"],
            section.filter(pa.array(is_value)),
            start + 1 + np.flatnonzero(is_value),
        )
    if "used" in bounds:
        start, end = bounds["used"]
        if "values" not in columns:
            raise _Irregular("Used values before the allocations")
        columns.update(_used_values(p, lines[start + 1 : end], start + 1, columns["values"]))
    if "seq" in bounds:
        start, end = bounds["seq"]
        sequence = _extract(lines[start + 1 : end], _SEQ)
        steps = _ints(sequence.field("step")).to_numpy()
        if not np.array_equal(steps, np.arange(len(steps))):
            raise _Irregular("InstructionSequence steps")
        columns["sequence"] = pc.cast(sequence.field("name"), pa.string())
    if "blr" in bounds:
        start, end = bounds["blr"]
        live = _extract(lines[start + 1 : end], _BLR)
        first, last = _ints(live.field("start")), _ints(live.field("end"))
        if pc.any(pc.less(last, first)).as_py() or (
            p.schedule_length is not None and pc.any(pc.greater(last, p.schedule_length)).as_py()
        ):
            raise _Irregular("live range bounds")
        columns["live"] = pa.Table.from_arrays(
            [
                pc.cast(live.field("name"), pa.string()),
                pc.cast(live.field("idx"), pa.string()),
                first,
                last,
                pa.array(np.arange(start + 2, start + 2 + len(live), dtype=np.int64)),
            ],
            schema=model.LIVE,
        )


def _head_kind(line: str) -> str:
    for prefix, kind in _HEADS:
        if line.startswith(prefix):
            return kind
    raise AssertionError(line)


def _allocations(path: str, headers: pa.Array, lineno: np.ndarray) -> pa.Table:
    """The `allocation N: size S, ...:` headers; each distinct attribute list is parsed once."""
    found = _extract(headers, _ALLOC)
    index = _ints(found.field("index"))
    if len(np.unique(index.to_numpy())) != len(index):
        raise _Irregular("duplicate allocation index")
    rests = pc.dictionary_encode(pc.cast(found.field("rest"), pa.string()))
    _, first = np.unique(rests.indices.to_numpy(), return_index=True)  # first row per code
    flags = [
        _alloc_attributes(path, int(lineno[row]), headers[int(row)].as_py(), rest)
        for row, rest in zip(first, rests.dictionary.to_pylist())
    ]
    colors = [int(f.pop("color", 0)) for f in flags]
    per_rest = list(zip(*(model.alloc_row(Alloc(0, 0, 0, 0, f)) for f in flags)))
    if not per_rest:
        per_rest = [()] * len(model.ALLOCS)
    columns = {
        f.name: pc.take(pa.array(per_rest[i], f.type), rests.indices)
        for i, f in enumerate(model.ALLOCS)
    }
    address = found.field("address")
    columns.update(
        index=index,
        size=_ints(found.field("size")),
        color=pc.take(pa.array(colors, pa.int64()), rests.indices),
        line=pa.array(lineno, pa.int64()),
        address=pc.cast(pc.if_else(pc.equal(address, ""), None, address), pa.string()),
    )
    return pa.Table.from_arrays([columns[f.name] for f in model.ALLOCS], schema=model.ALLOCS)


def _values(p: _Parser, allocs: pa.Table, value_lines: pa.Array, at: np.ndarray) -> pa.Table:
    """The ` value:` lines; each belongs to the allocation header above it."""
    found = _extract(value_lines, _VALUE)
    lineno = at + 1
    header_lines = allocs["line"].to_numpy()
    owner = np.searchsorted(header_lines, lineno) - 1
    if len(owner) and owner.min() < 0:
        raise _Irregular("value line before any allocation")
    order = allocs["index"].to_numpy()
    sizes = allocs["size"].to_numpy()
    vid = _ints(found.field("id"))
    size = _ints(found.field("size"))
    offset = _ints(found.field("offset"))
    ids = vid.to_numpy()
    if len(np.unique(ids)) != len(ids):
        raise _Irregular("duplicate value id")
    if np.any(offset.to_numpy() + size.to_numpy() > sizes[owner]):
        raise _Irregular("value beyond its allocation")
    if len(ids):
        p.features.add("value_lines")
    return pa.Table.from_arrays(
        [
            vid,
            pc.cast(found.field("name"), pa.string()),
            pc.cast(_index(found.field("idx")), pa.string()),
            pc.not_equal(found.field("phi"), ""),
            _optional_int(found.field("color")),
            pa.array(order[owner]),
            offset,
            size,
            pc.cast(found.field("shape"), pa.string()),
            pa.array(lineno),
            pa.array(np.zeros(len(ids), dtype=bool)),
        ],
        schema=model.VALUES,
    )


def _used_values(p: _Parser, section: pa.Array, first: int, values: pa.Table) -> dict[str, object]:
    """The Used values blocks: header, positions, uses, from instruction."""
    starts = {k: pc.starts_with(section, v) for k, v in (("h", "<"), ("i", "  "), ("f", _FROM))}
    kind = np.full(len(section), ord("x"), dtype=np.uint8)
    for code, mask in (
        ("i", starts["i"]),
        ("h", starts["h"]),
        ("f", starts["f"]),
        ("P", pc.equal(section, " positions:")),
        (
            "U",
            pc.is_in(
                section,
                value_set=pa.array([" uses:", " uses are not initialized yet."], pa.large_string()),
            ),
        ),
        ("n", pc.equal(section, "  (none)")),
        ("b", pc.equal(section, "")),
    ):
        kind[mask.to_numpy(zero_copy_only=False)] = ord(code)
    if not _KINDS.fullmatch(kind.tobytes()):
        raise _Irregular("Used values block structure")
    is_h, is_i, is_f = kind == ord("h"), kind == ord("i"), kind == ord("f")
    block = np.cumsum(is_h) - 1
    in_uses = np.cumsum(kind == ord("U")) - 1 == block  # after this block's ' uses:' line

    headers = _extract(section.filter(pa.array(is_h)), _HEADER)
    ids = _ints(headers.field("id")).to_numpy()
    if len(ids) > 1 and np.any(np.diff(ids) <= 0):
        raise _Irregular("Used values not in id order")
    vids = values["value_id"].to_numpy()
    sort = np.argsort(vids, kind="stable")
    where = np.searchsorted(vids, ids, sorter=sort)
    if len(ids) and (
        np.any(where >= len(vids)) or np.any(vids[sort[np.minimum(where, len(vids) - 1)]] != ids)
    ):
        raise _Irregular("used value not placed")
    if len(ids):
        placed = pc.take(values["instruction"], pa.array(sort[where]))
        if not pc.all(pc.equal(placed, pc.cast(headers.field("name"), pa.string()))).as_py():
            raise _Irregular("used value named otherwise in its allocation")

    from_lines = section.filter(pa.array(is_f))
    skip = len(_FROM)
    if len(from_lines):
        p.features.add("from_instruction")
        spaced = pc.sum(pc.starts_with(from_lines, _FROM + " ")).as_py()
        if spaced == len(from_lines):  # 2024-01+: a space after the colon
            p.features.add("from_instruction_space")
            skip += 1
        elif spaced:
            raise _Irregular("some from instruction texts after a space, some not")
        if pc.any(pc.ends_with(from_lines, ">")).as_py():
            raise _Irregular("from instruction text may be glued to the next header")
    texts = pc.utf8_slice_codeunits(from_lines, skip)
    del from_lines
    if np.any(kind == ord("n")):
        p.features.add("uses_none")

    pos_mask = is_i & ~in_uses
    use_mask = is_i & in_uses
    positions = _extract(section.filter(pa.array(pos_mask)), _POSITION)
    uses = _extract(section.filter(pa.array(use_mask)), _USE)
    pos_block, use_block = block[pos_mask], block[use_mask]
    header_lines = first + np.flatnonzero(is_h) + 1
    return {
        "used": pa.Table.from_arrays(
            [pa.array(ids, pa.int64()), pa.array(header_lines), pc.cast(texts, pa.string())],
            schema=model.USED,
        ),
        "positions": pa.Table.from_arrays(
            [
                pa.array(ids[pos_block], pa.int64()),
                pa.array(_ordinals(pos_block)),
                pc.cast(positions.field("name"), pa.string()),
                pc.cast(_index(positions.field("idx")), pa.string()),
            ],
            schema=model.POSITIONS,
        ),
        "uses": pa.Table.from_arrays(
            [
                pa.array(ids[use_block], pa.int64()),
                pa.array(_ordinals(use_block)),
                pc.cast(uses.field("name"), pa.string()),
                _ints(uses.field("op")),
                pc.cast(_index(uses.field("idx")), pa.string()),
            ],
            schema=model.USES,
        ),
    }
