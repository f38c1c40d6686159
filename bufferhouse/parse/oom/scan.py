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
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bufferhouse.parse.oom.messages import Event, NeedMore, Problem, parse_event

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
)
_OVERLAP = max(len(m) for m in MARKERS) - 1

CHUNK = 4 << 20  # fits the L2/L3 cache: 16 MiB chunks scanned 30% slower
#: Bytes of lines handed to the parser at first; doubled while it needs more.
WINDOW = 256 << 10
#: Longest message read; a longer one is cut there (and says so).
MAX_EVENT = 16 << 20
#: How far back a marker's line start is looked for in the previous chunk.
MAX_LINE = 1 << 20


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
            if size >= PARALLEL_MIN_BYTES:
                return _scan_parallel(path, size, _parallel_jobs(jobs), result)
        with open_log(path) as f:
            for event in scan_stream(f, result, chunk=chunk):
                result.events.append(event)
    except OSError as exc:
        result.problems.append(Problem(0, f"cannot read file: {exc.strerror or exc}"))
    return result


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
            start = _line_start(mm, hit, consumed)  # type: ignore[arg-type]
            line = newlines_before + 1  # the hit's line is its line start's
            event, end = _parse_at(mm, start, line, True)  # type: ignore[arg-type]
            if event is None:
                continue
            event.byte_offset = start
            event.raw = mm[start:end]
            _check_utf8(event)
            consumed = end
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
        hits.append(at + found)
        at += found + 1
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
    buf = b""
    base = 0  # file offset of buf[0]
    lines_before = 0  # newlines in the file before buf[:counted]
    counted = 0
    consumed = 0  # hits before this offset lie inside events already read
    search_from = 0
    pending: list[int] = []
    eof = False
    while not eof:
        data, failed = _read(f, chunk, result)
        result.bytes_read += len(data)
        eof = not data or failed
        buf = buf + data if buf else data
        limit = len(buf) if eof else max(len(buf) - _OVERLAP, search_from)
        pending += find_markers(buf, max(search_from, consumed), limit)
        search_from = max(limit, consumed)
        while pending:
            hit = pending[0]
            if hit < consumed:
                pending.pop(0)
                continue
            start = _line_start(buf, hit, consumed)
            lines_before += _newlines(buf, counted, start)
            counted = start
            try:
                event, end = _parse_at(buf, start, lines_before + 1, eof)
            except NeedMore:
                break  # read on: the next round retries this hit with more bytes
            pending.pop(0)
            if event is None:
                continue
            event.byte_offset = base + start
            event.raw = buf[start:end]
            _check_utf8(event)
            consumed = end
            yield event
        anchor = pending[0] if pending else search_from
        keep = max(_line_start(buf, anchor, consumed), counted) if anchor < len(buf) else len(buf)
        keep = max(min(keep, len(buf)), 0)
        if keep < counted:
            keep = counted
        lines_before += _newlines(buf, counted, keep)
        counted = 0
        buf = buf[keep:]
        base += keep
        pending = [h - keep for h in pending]
        consumed = max(consumed - keep, 0)
        search_from = max(search_from - keep, 0)


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
        if event is None:
            return None, start
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
    base = os.path.basename(name)
    if base.endswith(".gz"):
        base = base[:-3]
    h = hashlib.sha256()
    h.update(base.encode("utf-8", "surrogateescape") + b"\0")
    h.update(str(event.byte_offset).encode() + b"\0")
    h.update(event.raw)
    return h.hexdigest()
