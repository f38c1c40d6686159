"""Find OOM messages in logs of any size at the speed of a byte search.

A training log is gigabytes of unrelated lines with a few messages in it.
The file is read in large binary chunks and searched for marker bytes
(`bytes.find`, which runs at memory speed); only the lines around a hit are
decoded and parsed in Python (messages.parse_event). Newlines are counted
with `bytes.count` to give each event its line number, and a hit inside an
event already read is skipped. Chunks overlap by a marker's length, and an
event that runs past a chunk's end is parsed again once the next chunk is in.
"""

from __future__ import annotations

import gzip
import hashlib
import mmap
import multiprocessing
import os
import re
import traceback
import zlib
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bufferhouse.parse.oom.messages import (
    Event,
    NeedMore,
    Problem,
    fragment_line,
    merge_repeats,
    parse_event,
)

#: Byte strings one of which every message's first line (or a cut excerpt's first
#: line) holds. A hit is only a candidate: parse_event decides from the line. They
#: are searched in one regex pass (find_markers); an excerpt that starts at
#: `Program hbm requirement` is found from its `Largest program allocations` line on.
MARKERS: tuple[bytes, ...] = (
    b"RESOURCE_EXHAUSTED",  # every status message: XLA, TPU compile and run time, one-line
    b"esource exhausted",  # TensorFlow's "Resource exhausted:"
    b"ut of memory",  # "Out of memory while trying to allocate", "Ran out of memory"
    b"would exceed memory",  # the one-line form pasted without its status
    b"BufferAssignment",  # excerpts from "BufferAssignment OOM Debugging." or "... stats:"
    b"Peak buffers:",
    b"usage >=",  # TPU excerpts: "Total hbm usage >= X:"
    b"rogram allocations in",  # "Largest program allocations in hbm:"
    # buffer-entry fields: an excerpt cut at the top, inside the buffer list
    b"XLA Label:",
    b"XLA label:",
    b"Unpadded size:",
    b"Allocation type:",
    b"Entry Parameter Subshape:",
)
_OVERLAP = max(len(m) for m in MARKERS) - 1

CHUNK = 4 << 20  # fits the L2/L3 cache: 16 MiB chunks scanned 30% slower
#: Bytes of lines handed to the parser at first; doubled while it needs more.
WINDOW = 256 << 10
#: Longest message read; a longer one is cut there (and says so).
MAX_EVENT = 16 << 20
#: How far back a marker's line start is looked for in the previous chunk.
MAX_LINE = 1 << 20
#: Lines looked at above a hit on a buffer-entry line for where a cut excerpt starts,
#: and the bytes of each that are read.
FRAGMENT_LINES = 64
MAX_FIELD = 4096


@dataclass
class LogScan:
    """What one file held: its events in file order, and problems reading it."""

    path: str
    events: list[Event] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    bytes_read: int = 0


class _Gunzip:
    """A .gz read with zlib directly: a cut or corrupt file yields every byte before the
    damage (gzip.GzipFile.read loses the whole read that meets it), then raises."""

    def __init__(self, path: str) -> None:
        self._f = open(path, "rb")  # noqa: SIM115 (closed by __exit__)
        self._z = zlib.decompressobj(wbits=31)
        self._started = False  # the current member has had input
        self._out = bytearray()
        self._done = False

    def read(self, size: int) -> bytes:
        while len(self._out) < size and not self._done:
            raw = self._z.unconsumed_tail or self._f.read(1 << 20)
            if not raw:
                self._done = True
                if self._started and not self._z.eof:
                    self._out += self._z.flush()
                    self._pending = EOFError()
                break
            self._started = True
            self._out += self._z.decompress(raw, size)
            if self._z.eof:  # a multi-member .gz: the next member starts after this one
                rest = self._z.unused_data
                self._z = zlib.decompressobj(wbits=31)
                self._started = bool(rest)
                if rest:
                    self._out += self._z.decompress(rest, size)
        if not self._out and getattr(self, "_pending", None) is not None:
            exc, self._pending = self._pending, None
            raise exc
        data = bytes(self._out[:size])
        del self._out[:size]
        return data

    def __enter__(self) -> _Gunzip:
        return self

    def __exit__(self, *exc: object) -> None:
        self._f.close()


def open_log(path: str) -> BinaryIO:
    if path.endswith(".gz"):
        return _Gunzip(path)  # type: ignore[return-value]
    return open(path, "rb", buffering=0)


#: A plain log at least this large is searched by several processes at once, when the
#: caller may start them (not inside a parser process, which is one of many already).
PARALLEL_MIN_BYTES = 128 << 20


def scan_file(path: str, *, chunk: int = CHUNK, jobs: int | None = None) -> LogScan:
    """Every OOM event in the file (plain or .gz). Never raises for the file's content:
    a read error ends the scan with a problem, the events before it kept.

    `jobs`: processes that search a large plain log (default: the cores, or 1 inside
    a daemon process such as an ingest parser). Each searches a range of the file
    for markers and counts its newlines; this process then parses the few lines
    around each hit, in file order, exactly as the one-process scan does.
    """
    result = LogScan(path)
    try:
        if not path.endswith(".gz") and _parallel_jobs(jobs) > 1:
            size = os.path.getsize(path)
            if size >= PARALLEL_MIN_BYTES and not _cr_only(_head(path)):
                result = _scan_parallel(path, size, _parallel_jobs(jobs), result)
                result.events = merge_repeats(result.events)
                return result
        with open_log(path) as f:
            for event in scan_stream(f, result, chunk=chunk):
                result.events.append(event)
    except OSError as exc:
        result.problems.append(Problem(0, f"cannot read file: {exc.strerror or exc}"))
    result.events = merge_repeats(result.events)
    return result


def _head(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read(CHUNK)


def _parallel_jobs(jobs: int | None) -> int:
    if jobs is not None:
        return jobs
    if multiprocessing.current_process().daemon:  # a pool's worker may start no processes
        return 1
    return os.cpu_count() or 1


def _search_range(path: str, start: int, stop: int) -> tuple[list[tuple[int, int]], int]:
    """In the file's bytes [start, stop): (marker offset, newlines before it in the range)
    of every hit, and the range's newlines. Runs in a worker process."""
    hits: list[tuple[int, int]] = []
    newlines = 0
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        at = start
        while at < stop:
            end = min(at + (4 << 20), stop)
            counted = at
            for hit in find_markers(mm, at, end):  # type: ignore[arg-type]
                newlines += _newlines(mm, counted, hit)  # type: ignore[arg-type]
                counted = hit
                hits.append((hit, newlines))
            newlines += _newlines(mm, counted, end)  # type: ignore[arg-type]
            at = end
    return hits, newlines


def _scan_parallel(path: str, size: int, jobs: int, result: LogScan) -> LogScan:
    from concurrent.futures import ProcessPoolExecutor

    bounds = [size * k // jobs for k in range(jobs + 1)]
    ctx = multiprocessing.get_context("forkserver" if os.name != "nt" else "spawn")
    with ProcessPoolExecutor(jobs, mp_context=ctx) as pool:
        parts = list(pool.map(_search_range, [path] * jobs, bounds[:-1], bounds[1:]))
    hits: list[tuple[int, int]] = []
    before = 0
    for found, newlines in parts:
        hits += [(hit, before + n) for hit, n in found]
        before += newlines
    result.bytes_read = size
    consumed = 0
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        for hit, newlines_before in hits:
            if hit < consumed:
                continue
            start = first_line(mm, hit, consumed)  # type: ignore[arg-type]
            # the hit's line is its line start's; a fragment starts lines before it
            line = newlines_before + 1 - _newlines(mm, start, _line_start(mm, hit, start))  # type: ignore[arg-type]
            event, end = _parse_guarded(mm, start, line, True, result)  # type: ignore[arg-type]
            consumed = end
            if event is None:
                continue
            event.byte_offset = start
            event.raw = mm[start:end]
            _check_utf8(event)
            result.events.append(event)
    return result


def _read(f: BinaryIO, size: int, result: LogScan) -> tuple[bytes, bool]:
    """(data, failed): a corrupt or cut .gz ends the file where it can no longer be read."""
    try:
        return f.read(size), False
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        what = (
            "compressed file ends before the end-of-stream marker (truncated .gz)"
            if isinstance(exc, EOFError)
            else f"corrupt gzip data ({exc})"
        )
        result.problems.append(Problem(0, f"{what}; read up to byte {result.bytes_read}"))
        return b"", True


_PATTERN = "|".join(re.escape(m.decode()) for m in MARKERS)
_MARKER_RE = re.compile(_PATTERN.encode())
#: Bytes after a hit searched with _MARKER_RE before the next RE2 call.
NEAR_HIT = 64 << 10


def _as_array(data: pa.Buffer) -> pa.Array:
    """One binary value holding `data`, without a copy."""
    offsets = pa.py_buffer(np.array([0, data.size], dtype=np.int32).tobytes())
    return pa.Array.from_buffers(pa.binary(), 1, [None, offsets, data])


def find_markers(buf: bytes, start: int, stop: int) -> list[int]:
    """Sorted offsets in [start, stop) where a marker begins.

    One pass of RE2 (Arrow's find_substring_regex) over the bytes for all markers
    at once: 250-370 MB/s on the bench machine, where a bytes.find pass per
    marker made 70-110 MB/s of eight. Hits are rare, so the search restarts
    after each one on a zero-copy slice.
    """
    data = pa.py_buffer(buf)
    end = min(stop + _OVERLAP, data.size)
    hits: list[int] = []
    at = start
    while at < stop:
        found = pc.find_substring_regex(_as_array(data.slice(at, end - at)), _PATTERN)[0].as_py()
        if found < 0 or at + found >= stop:
            break
        # A call costs ~0.25 ms (RE2 compiles the pattern each time): the bytes after a hit,
        # where hits cluster, are searched by Python's regex, compiled once, instead.
        near = min(at + found + NEAR_HIT, stop)
        for m in _MARKER_RE.finditer(buf, at + found, min(near + _OVERLAP, end)):
            if m.start() >= near:
                break
            hits.append(m.start())
        at = near
    return hits


def _newlines(buf: bytes, start: int, stop: int) -> int:
    """Newlines in buf[start:stop]: numpy counts them 2-3x faster than bytes.count."""
    if stop <= start:
        return 0
    if stop - start < 1 << 16 and hasattr(buf, "count"):
        return buf.count(b"\n", start, stop)
    view = np.frombuffer(buf, np.uint8, stop - start, start)
    return int(np.count_nonzero(view == 10))


def _line_start(buf: bytes, pos: int, floor: int) -> int:
    """Start of the line holding buf[pos], not before `floor` nor more than MAX_LINE back."""
    lo = max(floor, pos - MAX_LINE, 0)
    return buf.rfind(b"\n", lo, pos) + 1 or lo


def scan_stream(f: BinaryIO, result: LogScan, *, chunk: int = CHUNK) -> Iterator[Event]:
    """The events of one stream, in order. Each hit costs one parse at most: a line that
    starts no message is passed over whole, so the other hits on it are not tried again
    (markers repeated on one line were a parse each, from the line's start)."""
    buf = b""
    base = 0  # file offset of buf[0]
    lines_before = 0  # newlines in the file before buf[:counted]
    counted = 0
    consumed = 0  # hits before this offset lie inside events (or lines) already read
    search_from = 0
    pending: deque[int] = deque()
    eof = False
    cr_only: bool | None = None
    while not eof:
        data, failed = _read(f, chunk, result)
        if cr_only is None and data:
            cr_only = _cr_only(data)
        if cr_only:
            data = data.replace(b"\r", b"\n")  # same length: offsets stay the file's
        result.bytes_read += len(data)
        eof = not data or failed
        buf = buf + data if buf else data
        limit = len(buf) if eof else max(len(buf) - _OVERLAP, search_from)
        pending += find_markers(buf, max(search_from, consumed), limit)
        search_from = max(limit, consumed)
        while pending:
            hit = pending[0]
            if hit < consumed:
                pending.popleft()
                continue
            start = first_line(buf, hit, consumed)
            lines_before += _newlines(buf, counted, start)
            counted = start
            try:
                event, end = _parse_guarded(buf, start, lines_before + 1, eof, result)
            except NeedMore:
                break  # read on: the next round retries this hit with more bytes
            pending.popleft()
            consumed = end
            if event is None:
                continue
            event.byte_offset = base + start
            event.raw = buf[start:end]
            _check_utf8(event)
            yield event
        anchor = pending[0] if pending else search_from
        keep = max(first_line(buf, anchor, consumed), counted) if anchor < len(buf) else len(buf)
        keep = max(min(keep, len(buf)), 0)
        if keep < counted:
            keep = counted
        lines_before += _newlines(buf, counted, keep)
        counted = 0
        buf = buf[keep:]
        base += keep
        pending = deque(h - keep for h in pending)
        consumed = max(consumed - keep, 0)
        search_from = max(search_from - keep, 0)


def _parse_guarded(
    buf: bytes, start: int, line: int, eof: bool, result: LogScan
) -> tuple[Event | None, int]:
    """_parse_at, where an error of ours loses the one message it meets, not the log:
    the error becomes a problem at the message's line and the scan goes on past that line."""
    try:
        return _parse_at(buf, start, line, eof)
    except NeedMore:
        raise
    except Exception as exc:  # a bug of ours must not take the rest of the log down
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        result.problems.append(
            Problem(line, f"internal error reading the message here (please report): {detail}")
        )
        nl = buf.find(b"\n", start)
        return None, (nl + 1 if nl >= 0 else len(buf))


def _cr_only(head: bytes) -> bool:
    """A log whose lines end in CR alone (no LF in its first chunk): CR is its line end."""
    return b"\n" not in head and b"\r" in head


def first_line(buf: bytes, hit: int, floor: int) -> int:
    """Where the message holding buf[hit] starts: the hit's line, or, for a hit on a
    buffer-entry line with no message above (a log cut at the top), the first of the
    entry lines before it (at most FRAGMENT_LINES back, never before `floor`)."""
    start = _line_start(buf, hit, floor)
    if not fragment_line(_line_at(buf, start)):
        return start
    for _ in range(FRAGMENT_LINES):
        if start <= floor:
            break
        before = _line_start(buf, start - 1, floor)
        if not fragment_line(_line_at(buf, before)):
            break
        start = before
    return start


def _line_at(buf: bytes, start: int) -> str:
    """The line at buf[start] (its first MAX_FIELD bytes), decoded."""
    nl = buf.find(b"\n", start, start + MAX_FIELD)
    piece = buf[start : nl if nl >= 0 else start + MAX_FIELD]
    return piece.decode("utf-8", "replace").rstrip("\r")


def _parse_at(buf: bytes, start: int, line: int, eof: bool) -> tuple[Event | None, int]:
    """Parse the event whose first line starts at buf[start]; (event, end offset).
    Raises NeedMore when it needs bytes the buffer does not hold yet."""
    window = WINDOW
    while True:
        capped = window >= MAX_EVENT
        want = start + window
        if want >= len(buf):
            if eof:
                stop = len(buf)
            else:
                cut = buf.rfind(b"\n", start)
                if cut < 0:
                    raise NeedMore
                stop = cut + 1
        else:
            cut = buf.rfind(b"\n", start, want)
            if cut < 0 and not capped:
                window *= 2
                continue
            stop = cut + 1 if cut >= 0 else want
        text = buf[start:stop].decode("utf-8", "replace")
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        lines = [x[:-1] if x.endswith("\r") else x for x in lines]
        try:
            event = parse_event(lines, line, (eof and stop == len(buf)) or capped)
        except NeedMore:
            if want >= len(buf):
                raise
            window *= 2
            continue
        if event is None:  # the line starts no message: so neither does any hit on it
            nl = buf.find(b"\n", start, stop)
            return None, (nl + 1 if nl >= 0 else max(stop, start + 1))
        if capped and not (eof and stop == len(buf)) and event.lines_used == len(lines):
            event.truncated = True
            event.problems.append(
                Problem(line, f"message longer than {MAX_EVENT >> 20} MiB; read up to there")
            )
        end = start
        for _ in range(event.lines_used):
            nl = buf.find(b"\n", end)
            end = len(buf) if nl < 0 else nl + 1
        return event, end


def _check_utf8(event: Event) -> None:
    try:
        event.raw.decode("utf-8")
        return
    except UnicodeDecodeError:
        pass
    for k, piece in enumerate(event.raw.split(b"\n")):
        try:
            piece.decode("utf-8")
        except UnicodeDecodeError as exc:
            event.problems.append(
                Problem(
                    event.line + k,
                    f"bytes that are not UTF-8 at byte {exc.start + 1} of the line; read as U+FFFD",
                )
            )


def event_hash(name: str, event: Event) -> str:
    """The event's identity: SHA-256 of the log's name (without .gz), the event's byte
    offset and its raw bytes. The same log read again, moved, gzipped or grown at its
    end gives its old events the same hashes."""
    return raw_hash(log_key(name), event.byte_offset, event.raw)


def log_key(name: str) -> str:
    """The name a log is known by in event hashes: its base name without .gz."""
    base = os.path.basename(name)
    return base[:-3] if base.endswith(".gz") else base


def raw_hash(key: str, byte_offset: int, raw: bytes) -> str:
    """event_hash of bytes `raw` at `byte_offset` of the log known as `key`: of a prefix
    of a message's raw bytes, it tells whether a stored event is that message cut short."""
    h = hashlib.sha256()
    h.update(key.encode("utf-8", "surrogateescape") + b"\0")
    h.update(str(byte_offset).encode() + b"\0")
    h.update(raw)
    return h.hexdigest()
