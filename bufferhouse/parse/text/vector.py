"""The column reader: a large dump's bulky sections read as whole Arrow columns.

Nearly all of a dump's bytes are a few kinds of regular lines: allocation headers
and ` value:` lines, Used values blocks, InstructionSequence and BufferLiveRange
entries. Here each chunk is split into lines and each kind read over a whole
section's lines by a compiled kernel (native/, C without the GIL) that reads
exactly what its grammar.py pattern matches; owners are found by binary search,
and block structure is checked as one string of line kinds (blocks.py). Only the
few structural lines (section headers, the stack-trace tree) go through the line
reader of scan.py, one by one. The invariants between lines are not checked
here: rules.py checks them over the columns either reader produced.

The column reader reads only what it can read exactly as the line reader does: at
the first line it does not expect (another layout or era, a line that does not
match) it returns None and the module is read by the line reader, which words
every grammar error. So it never needs to explain a problem, only to notice one.
Without the compiled kernels (native.MISSING) it reads nothing.
"""

from __future__ import annotations

import functools
import gzip
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bufferhouse.errors import DumpError
from bufferhouse.parse import memory, model
from bufferhouse.parse.model import Alloc, first_occurrences
from bufferhouse.parse.reader import open_dump, read_lines, stored_size
from bufferhouse.parse.text import grammar as g
from bufferhouse.parse.text import native
from bufferhouse.parse.text.blocks import Lane, UsedBlocks, index_or_empty
from bufferhouse.parse.text.native import Irregular
from bufferhouse.parse.text.scan import LineReader, split_layout


def scan(
    files: list[tuple[str, str]], min_bytes: int = 0, threads: bool = False
) -> model.Scanned | None:
    """The module scanned, or None when the reference scanner must read it.

    With `threads` (a core to spare), the next chunk of a large file is read while
    this one is scanned, and its Used values blocks are read on a thread of their
    own: both are mostly Arrow and numpy, which release the GIL."""
    if native.MISSING:  # not built: the line reader reads every module
        return None
    ba_path = next(path for role, path in files if role == "buffer_assignment")
    try:
        if sum(stored_size(path) for _, path in files) < min_bytes:
            return None
        p = LineReader()
        columns: dict[str, object] = {}
        seen: list[str] = []
        for role, path in files:
            if role == "usage_report":
                p.feed_report(path, read_lines(path))
            else:
                _scan_file(p, path, columns, seen, threads)
        # Before 2021-04 the HloLiveRange sections are absent, all of them (the order
        # check ensures it); when XLA had none to print it says "HloLiveRange not available".
        parts = {"seq", "blr", "peak"} & set(seen)
        whole = not parts if p.lr_unavailable or "lr" not in seen else len(parts) == 3
        if not ({"ba", "used"} <= set(seen) and whole):
            raise Irregular("sections")
        if split_layout(files):
            p.features.add("split")
        return p.scanned(ba_path, **columns)
    except (Irregular, DumpError, OSError, EOFError, zlib.error, gzip.BadGzipFile):
        return None


#: Bytes of text read at a time. A chunk is copied a few times on its way to
#: an Arrow column, so this bounds that transient memory; 16 MiB scanned the
#: 519 MB bench dump as fast as 64 MiB did (A/B, alternated).
_CHUNK = 1 << 24


def _chunks(path: str) -> Iterator[tuple[int, pa.LargeStringArray]]:
    """(index of the first line, lines without their newlines) for ~16 MiB of whole lines at a time.

    Reading a chunk at a time keeps a large dump's text out of memory: only
    what is extracted from it stays, in its final types (see _scan_file). The
    chunks are read into one buffer, reused: the lines are split out of it in place
    and the unended last line moved to its front (joining and slicing a fresh
    chunk copied it twice more: 0.24 of 0.33 CPU-s on a 208 MB module).
    """
    first = 0
    buf = bytearray(_CHUNK)
    held = 0  # bytes at the front of buf: a line not yet ended
    with open_dump(path) as f:
        while True:
            if held == len(buf):  # a line longer than the buffer
                buf.extend(bytes(len(buf)))
            with memoryview(buf) as view:
                got = f.readinto(view[held:])
            if not got:
                break
            end = held + got
            cut = buf.rfind(b"\n", held, end) + 1  # a newline among the bytes just read
            held = end
            if not cut:
                continue
            with memoryview(buf) as view:
                lines = _lines(view[:cut])
            buf[: end - cut] = buf[cut:end]
            held = end - cut
            yield first, lines
            first += len(lines)
    if held:
        yield first, _lines(bytes(buf[:held]) + b"\n")  # a last line without its newline
    elif first == 0:
        raise Irregular("empty")  # the reference reads and words it


def _lines(text: bytes | memoryview) -> pa.LargeStringArray:
    """The newline-terminated lines of `text`, without their line ends (CRLF read as LF),
    as an Arrow column; what the line reader must word (a lone CR, a NUL, invalid UTF-8)
    is irregular."""
    lines = native.split_lines(text)
    if lines is None:
        raise Irregular("lone CR, binary or invalid UTF-8")
    return lines


#: Every section marker's text (grammar.SECTIONS): a line that starts with one opens one.
_MARKERS = tuple(prefix.encode() for prefix, _ in g.SECTIONS)


def _section_heads(lines: pa.LargeStringArray) -> np.ndarray:
    """Indices of the section marker lines among `lines` (a compiled pass over the line
    starts: RE2 over every line of a chunk cost 0.39 CPU-s on a 208 MB module, numpy
    over their first bytes 0.07-0.7)."""
    return native.starting_with(lines, _MARKERS)


def _ahead(
    chunks: Iterator[tuple[int, pa.LargeStringArray]],
) -> Iterator[tuple[int, pa.LargeStringArray]]:
    """`chunks`, each next one read on a thread while the last is used."""
    with ThreadPoolExecutor(1, thread_name_prefix="bufferhouse-read") as thread:
        pending = thread.submit(next, chunks, None)
        while (item := pending.result()) is not None:
            pending = thread.submit(next, chunks, None)
            yield item


class _Bulk:
    """The bulk lines' columns of each piece (allocation headers, ` value:` lines,
    InstructionSequence and BufferLiveRange entries), made as the chunks come: with
    threads, on a Lane of their own while the caller goes on with the structural lines
    and the next chunk (a chunk of the allocations section makes two pieces, so four
    waiting are two chunks' worth). `take` gives a kind's pieces in file order."""

    def __init__(self, threads: bool) -> None:
        self.lane = Lane(threads, "bufferhouse-bulk", limit=4)
        self.pieces: dict[str, list] = {k: [] for k in ("alloc", "value", "seq", "blr")}

    def add(self, kind: str, make: Callable[[], pa.Table]) -> None:
        self.pieces[kind].append(self.lane.run(make))

    def take(self, kind: str) -> list[pa.Table]:
        """A kind's pieces, in file order (the first error raised here)."""
        got = self.pieces.pop(kind)
        return [part.result() if isinstance(part, Future) else part for part in got]


def _scan_file(
    p: LineReader, path: str, columns: dict[str, object], seen: list[str], threads: bool = False
) -> None:
    """One file of the module, a chunk at a time: bulk lines extracted into `columns`,
    structural lines through the state machine `p` in file order.

    What a chunk yields is converted to its final types at once (numbers as
    numbers, names as strings), so that the text groups of the regex matches
    never pile up: they took more memory than the columns made of them. The
    columns stay in their pieces (chunked): joined, each would be copied whole.
    """
    threads = threads and stored_size(path) > _CHUNK  # one chunk: nothing to overlap
    used = UsedBlocks(p, threads)
    bulk = _Bulk(threads)
    try:
        _scan_chunks(
            p,
            path,
            columns,
            seen,
            used,
            bulk,
            _ahead(_chunks(path)) if threads else _chunks(path),
        )
    finally:
        used.close()
        bulk.lane.close()


def _scan_chunks(
    p: LineReader,
    path: str,
    columns: dict[str, object],
    seen: list[str],
    used: UsedBlocks,
    bulk: _Bulk,
    chunks: Iterator[tuple[int, pa.LargeStringArray]],
) -> None:
    pieces: dict[str, list] = {k: [] for k in ("cross_head", "cross", "peak")}
    attributes: dict[str, tuple[int, tuple]] = {}  # allocation attribute list -> parsed
    section: str | None = None  # the section the next line belongs to
    p.begin_file()
    total = 0
    for first, lines in chunks:
        total = first + len(lines)
        at = _section_heads(lines)
        kinds = [g.section_kind(line) for line in pc.take(lines, pa.array(at)).to_pylist()]
        _check_order(kinds, seen)
        bounds = [0, *at.tolist(), len(lines)]
        structural: list[np.ndarray] = []
        for j in range(len(bounds) - 1):
            if j:
                if section == "used":
                    used.end()
                section = kinds[j - 1]
                structural.append(np.array([bounds[j]]))
            start = bounds[j] + (1 if j else 0)
            body = lines[start : bounds[j + 1]]
            at_line = first + start  # 0-based index in the file of body[0]
            if section == "ba":
                other = _allocation_section(path, body, at_line, bulk, pieces, attributes)
                structural.append(start + other)
            elif section == "seq":
                bulk.add("seq", functools.partial(_sequence_lines, body, at_line))
            elif section == "blr":
                bulk.add("blr", functools.partial(_live_lines, body, at_line))
            elif section == "peak":
                pieces["peak"].append(_peak_lines(p, body, at_line))
            elif section == "used":
                used.feed(body, at_line)
            else:
                structural.append(np.arange(start, bounds[j + 1]))
            # The machine meets the structural lines of this segment in order.
            rows = np.concatenate(structural) if structural else np.zeros(0, np.int64)
            structural = []
            for i, line in zip(
                rows.tolist(), pc.take(lines, pa.array(rows, pa.int64())).to_pylist()
            ):
                used.leave_state_as_after_blocks()
                p.line(path, first + i + 1, line)
        del lines, body
        memory.release()  # give the chunk's memory back, not keep it
    if section == "used":
        used.end()
    used.leave_state_as_after_blocks()
    p.last_line = total
    p.end_file(path)

    allocs_pieces, value_pieces = bulk.take("alloc"), bulk.take("value")
    if allocs_pieces:
        if "values" in columns:
            raise Irregular("value lines in two files")
        allocs = pa.concat_tables(allocs_pieces)
        columns["allocs"] = allocs
        columns["values"] = _values(p, allocs, pa.concat_tables(value_pieces))
        columns["cross"] = model.CROSS.empty_table()
        if pieces["cross_head"]:
            columns["cross"] = _cross_color(
                p, allocs, pieces.pop("cross_head"), pieces.pop("cross")
            )
    if used.blocks:
        if "values" not in columns:
            raise Irregular("Used values before the allocations")
        columns.update(used.columns())
        memory.release()
    if seq := bulk.take("seq"):
        columns["schedule"] = pa.concat_tables(seq)
    if blr := bulk.take("blr"):
        columns["live"] = pa.concat_tables(blr)
    if pieces["peak"]:
        columns["peak"] = pa.concat_tables(pieces.pop("peak"))
    memory.release()


def _check_order(kinds: list[str], seen: list[str]) -> None:
    """Section markers come once each, in XLA's order, none required one skipped
    (grammar.py); the line reader words what breaks it."""
    for kind in kinds:
        if g.out_of_order(kind, seen) or g.missing_before(kind, seen):
            raise Irregular("sections out of order or missing")
        seen.append(kind)


def _allocation_section(
    path: str,
    body: pa.LargeStringArray,
    at_line: int,
    bulk: _Bulk,
    pieces: dict[str, list],
    attributes: dict[str, tuple[int, tuple]],
) -> np.ndarray:
    """A piece of the allocations section, read by the compiled kernel in one pass; the
    indexes in `body` of its other lines, which the line reader reads. `at_line` is the
    0-based file line index of body[0]."""
    read = native.allocations(body)
    lineno = at_line + 1 + np.arange(len(body), dtype=np.int64)
    kinds = read.kinds
    alloc_lines = lineno[kinds == native.ALLOCATION]
    bulk.add("alloc", functools.partial(_allocations, path, read.allocs, alloc_lines, attributes))
    bulk.add("value", functools.partial(_value_lines, read.values, lineno[kinds == native.VALUE]))
    is_head, is_cross = kinds == native.CROSS_HEAD, kinds == native.CROSS
    if is_head.any() or is_cross.any():
        pieces["cross_head"].append(lineno[is_head])
        pieces["cross"].append((read.cross["id"].to_numpy(), lineno[is_cross]))
    return np.flatnonzero(kinds == native.OTHER)


def _allocations(
    path: str,
    found: pa.Table,
    lineno: np.ndarray,
    attributes: dict[str, tuple[int, tuple]],
) -> pa.Table:
    """The `allocation N: size S, ...:` headers (native.allocations' columns); each distinct
    attribute list is parsed once (`attributes` keeps them from piece to piece), its
    parameter number apart (_parameters)."""
    numbers, rest = _parameters(found["rest"].combine_chunks())
    rests = pc.dictionary_encode(rest)
    first = first_occurrences(rests.indices.to_numpy())
    parsed = []
    for row, rest in zip(first, rests.dictionary.to_pylist()):
        if rest not in attributes:
            flags = g.alloc_attributes(path, int(lineno[row]), "", rest)  # errors only send it back
            color = int(flags.pop("color", 0))
            attributes[rest] = (color, model.alloc_row(Alloc(0, 0, 0, 0, flags)))
        parsed.append(attributes[rest])
    colors = [color for color, _ in parsed]
    per_rest = list(zip(*(row for _, row in parsed)))
    if not per_rest:
        per_rest = [()] * len(model.ALLOCS)
    columns = {
        f.name: pc.take(pa.array(per_rest[i], f.type), rests.indices)
        for i, f in enumerate(model.ALLOCS)
    }
    address = found["address"]
    columns.update(
        parameter_number=pc.coalesce(numbers, columns["parameter_number"]),
        index=found["index"],
        size=found["size"],
        color=pc.take(pa.array(colors, pa.int64()), rests.indices),
        line=pa.array(lineno, pa.int64()),
        address=pc.if_else(pc.equal(address, ""), None, address),
    )
    return pa.Table.from_arrays([columns[f.name] for f in model.ALLOCS], schema=model.ALLOCS)


#: A parameter's number in an allocation's attribute list (after its color and page, if
#: any), and a number of at most 18 digits (a longer one is parsed, and worded, as the
#: rest is).
_PARAMETER = r"^((?:, color [0-9]+)?(?:, page [0-9]+)?, parameter )[0-9]{1,18}($|[^0-9])"
_PARAMETER_NUMBER = (
    r"^(?:, color [0-9]+)?(?:, page [0-9]+)?, parameter (?P<n>[0-9]{1,18})(?:$|[^0-9])"
)


def _parameters(rests: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Each attribute list's parameter number (null if none), and the list with that number
    made 0: lists that differ only by it are parsed once (the 208 MB module's 172k
    allocations have 34k distinct lists, 103 without their numbers: 0.2 CPU-s of Python)."""
    has = pc.match_substring(rests, ", parameter ")  # the regexes on these only: 60 -> 39 ms
    some = rests.filter(has)
    number = pc.struct_field(pc.extract_regex(some, _PARAMETER_NUMBER), [0])
    rest = pc.replace_substring_regex(some, _PARAMETER, r"\10\2", max_replacements=1)
    return (
        pc.replace_with_mask(pa.nulls(len(rests), pa.int64()), has, pc.cast(number, pa.int64())),
        pc.replace_with_mask(rests, has, rest),
    )


#: The ` value:` lines of a piece, before their allocations are known.
_VALUE_LINES = pa.schema([f for f in model.VALUES if f.name != "allocation"])


def _value_lines(found: pa.Table, lineno: np.ndarray) -> pa.Table:
    """The ` value:` lines of a piece (native.allocations' columns); `lineno` holds their
    1-based line numbers."""
    return pa.Table.from_arrays(
        [
            found["id"],
            found["name"],
            index_or_empty(found["idx"]),
            found["phi"],
            found["color"],
            found["offset"],
            found["size"],
            found["shape"],
            pa.array(lineno, pa.int64()),
        ],
        schema=_VALUE_LINES,
    )


def _sequence_lines(body: pa.Array, at_line: int) -> pa.Table:
    """InstructionSequence entries; `at_line` is the 0-based file line index of the first."""
    found = native.sequence(body)
    return pa.Table.from_arrays(
        [
            found["step"],
            found["name"],
            pa.array(at_line + 1 + np.arange(len(found)), pa.int64()),
        ],
        schema=model.SCHEDULE,
    )


def _live_lines(body: pa.Array, at_line: int) -> pa.Table:
    """BufferLiveRange entries; `at_line` is the 0-based file line index of the first."""
    found = native.live_ranges(body)
    return pa.Table.from_arrays(
        [
            found["name"],
            found["idx"],
            found["start"],
            found["end"],
            pa.array(at_line + 1 + np.arange(len(found)), pa.int64()),
        ],
        schema=model.LIVE,
    )


def _peak_lines(p: LineReader, body: pa.Array, at_line: int) -> pa.Table:
    """The peak list (blank lines skipped, as the line reader skips them); `at_line` is
    the 0-based file line index of body[0]."""
    found, rows = native.peak(body)
    index = found["idx"]
    if pc.any(pc.not_equal(index, "")).as_py():
        p.features.add("peak_index")
    if found["cumulative"].null_count < len(found):
        p.features.add("peak_cumulative")
    return pa.Table.from_arrays(
        [
            found["name"],
            pc.if_else(pc.equal(index, ""), None, index),
            found["bytes"],
            found["cumulative"],
            pa.array(at_line + 1 + rows, pa.int64()),
        ],
        schema=model.PEAK,
    )


def _values(p: LineReader, allocs: pa.Table, lines: pa.Table) -> pa.Table:
    """The ` value:` lines; each belongs to the allocation header above it."""
    owner = np.searchsorted(allocs["line"].to_numpy(), lines["line"].to_numpy()) - 1
    if len(owner) and owner.min() < 0:
        raise Irregular("value line before any allocation")
    if len(owner):
        p.features.add("value_lines")
    columns = dict(zip(lines.column_names, lines.columns))
    columns["allocation"] = pa.array(allocs["index"].to_numpy()[owner])
    return pa.Table.from_arrays([columns[f.name] for f in model.VALUES], schema=model.VALUES)


def _cross_color(
    p: LineReader,
    allocs: pa.Table,
    heads: list[np.ndarray],
    cross: list[tuple[np.ndarray, np.ndarray]],
) -> pa.Table:
    """The entries under ' reused by buffers of a different color:' (model.CROSS): one
    block per allocation at most, after its header (the line reader words what is not)."""
    head_lines = np.concatenate(heads)
    ids = np.concatenate([c[0] for c in cross]) if cross else np.zeros(0, np.int64)
    lines = np.concatenate([c[1] for c in cross]) if cross else np.zeros(0, np.int64)
    alloc_lines = allocs["line"].to_numpy()
    head_owner = np.searchsorted(alloc_lines, head_lines) - 1
    if len(head_lines) and (head_owner.min() < 0 or len(np.unique(head_owner)) < len(head_owner)):
        raise Irregular("cross-color block before any allocation, or two in one")
    owner = np.searchsorted(alloc_lines, lines) - 1  # the allocation each line is under
    head = np.searchsorted(head_lines, lines) - 1  # the block header above each line
    if np.any(owner < 0) or np.any(head < 0) or np.any(head_lines[head] < alloc_lines[owner]):
        raise Irregular("cross-color value outside a block of its allocation")
    p.features.add("cross_color")
    return pa.Table.from_arrays(
        [
            pa.array(ids, pa.int64()),
            pa.array(allocs["index"].to_numpy()[owner], pa.int64()),
            pa.array(lines, pa.int64()),
        ],
        schema=model.CROSS,
    )
