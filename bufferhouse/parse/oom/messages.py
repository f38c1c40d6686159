"""The grammar of OOM messages: the lines of one event -> an Event (fields, figures, buffers).

The forms (docs/format.md §14): XLA's BufferAssignment summary
(`Peak buffers:`, GPU/CPU), the TPU compiler's and runtime's summaries
(`Total hbm usage >=`, `Largest program allocations in hbm:`, `Attempting to
reserve ... at the bottom of memory`), the one-line `Allocation (size=N)
would exceed memory (size=M)` form, and any other RESOURCE_EXHAUSTED line
about memory. The scanner finds where a message starts; this module reads
its lines until one does not belong, so an event never swallows the log
around it. What does not parse becomes a Problem (line and what was
expected) and the rest of the event is kept.

This module picks the form and reads the one-line ones; xla.py and tpu.py
read the two families of summary, grammar.py holds what they share.
"""

from __future__ import annotations

import itertools
import re

from bufferhouse.parse.oom.coded import read_code
from bufferhouse.parse.oom.grammar import (
    BUF,
    ENTRY,
    LOOKAHEAD,
    ONE_LINE,
    SZ,
    Event,
    Lines,
    NeedMore,
    Problem,
    entry_field,
    entry_label,
    entry_shape,
    error_type,
    finish,
    fragment_line,
    start_kind,
)
from bufferhouse.parse.oom.prefix import detect
from bufferhouse.parse.oom.tpu import parse_tpu
from bufferhouse.parse.oom.xla import parse_xla

__all__ = [
    "Event",
    "NeedMore",
    "Problem",
    "fragment_line",
    "merge_repeats",
    "parse_event",
    "start_kind",
]

#: Lines between a status line and the report that repeats it (a Python traceback).
REPEAT_WITHIN = 200

_ONE_LINE_ALLOC = re.compile(
    r"(?<![\w.\-#])(?P<alloc>#?[\w.\-]+)\s*\[shape\s*=\s*'(?P<shape>[^']*)',\s*space\s*=\s*(?P<space>[\w-]+),"
    r"\s*size\s*=\s*(?P<size>\w+),\s*tag\s*=\s*'(?P<tag>[^']*)'\]"
    r"(?:\s*::\s*(?P<instr>.*))?"
)
_OTHER_REQUEST = re.compile(
    r"(?:allocate|allocating|request for|reserve)\s+(?P<size>"
    + SZ
    + r")(?:\s*\((?P<exact>\d+)B\))?"
)


def parse_event(lines: list[str], first_number: int, at_eof: bool) -> Event | None:
    """Read one event from `lines` (the first is where a marker was found).

    None if the first line starts no message. Raises NeedMore when the lines
    end before the event (and the file goes on).
    """
    first = lines[0].rsplit("\r", 1)[-1]  # a progress bar's carriage return before it
    prefix, rest = detect(first)
    kind = start_kind(rest) or _fragment_kind(lines, first)
    if kind is None or (kind == "tpu_cut" and prefix.logged_as_info()):
        # libtpu logs "Total hbm usage >= ..." at INFO after every compile that fits
        # (TPU_STDERR_LOG_LEVEL=0): the same summary, but no out-of-memory event
        return None
    ev = _parse_kind(kind, Lines(lines, first_number, at_eof, prefix), rest, first_number)
    if kind == "tpu_cut" and not ev.buffers:
        # libtpu's memory summary of a compile that fit (TPU_STDERR_LOG_LEVEL=0 prints
        # "Total hbm usage >= ..." and the program requirements after every compile):
        # a cut excerpt of an OOM holds its largest allocations, this none
        return None
    read_code(ev, rest)
    return ev


def _parse_kind(kind: str, src: Lines, rest: str, first_number: int) -> Event:
    if kind in ("allocation", "other"):
        ev = Event("tpu" if kind == "allocation" else "runtime", kind, first_number)
        error_type(ev, rest)
        (_one_line if kind == "allocation" else _other)(ev, rest, first_number)
        finish(ev, src, 0, [rest])
        return ev
    entries = kind.endswith("_entries")
    if kind.startswith("buffer_assignment"):
        ev = Event("xla", "buffer_assignment", first_number)
        ev.fragment = kind != "buffer_assignment"
        return parse_xla(ev, src, rest, ev.fragment, entries)
    ev = Event("tpu", "tpu_runtime" if kind == "tpu_runtime" else "tpu_compile", first_number)
    ev.fragment = kind.startswith("tpu_cut")
    return parse_tpu(ev, src, rest, ev.fragment, entries)


def _fragment_kind(lines: list[str], first: str) -> str | None:
    """An excerpt that starts inside a buffer list: `tpu_cut_entries` or
    `buffer_assignment_entries`, by the first line that tells the families apart
    (`Buffer N:`, `XLA Label:`, `Entry Parameter Subshape:` are XLA's; `N. Size:`,
    `XLA label:`, `Unpadded size:`, `Allocation type:` the TPU stack's); None if the
    line is not an entry line."""
    if not fragment_line(first):
        return None
    for line in itertools.islice(lines, LOOKAHEAD * 4):
        s = detect(line)[1].strip()
        if BUF.fullmatch(s) or s.startswith(("XLA Label:", "Entry Parameter Subshape:")):
            return "buffer_assignment_entries"
        if ENTRY.fullmatch(s) or s.startswith(_TPU_FIELDS):
            return "tpu_cut_entries"
    return "tpu_cut_entries"


_TPU_FIELDS = ("XLA label:", "Unpadded size:", "Allocation type:", "Extra memory due to padding:")


def _one_line(ev: Event, text: str, line: int) -> None:
    m = ONE_LINE.search(text)
    assert m is not None
    ev.figure("requested", m.group("req"), line)
    ev.figure("capacity", m.group("cap"), line)
    rest = m.group("rest")
    if rest is None:
        return
    a = _ONE_LINE_ALLOC.search(rest)
    if a is None:
        ev.problems.append(
            Problem(
                line,
                "expected `#allocationN [shape = '...', space=S, size = N, tag = '...']` after `::`",
                rest,
            )
        )
        return
    ev.fields["memory_space"] = a.group("space")
    buf: dict[str, object] = {"rank": 1, "line": line, "allocation": a.group("alloc")}
    size = a.group("size")
    if size.isdigit():
        entry_field(ev, buf, "Size", size, line)
    else:  # 0xffffffffffffffff: not known; the allocation is the request
        buf["size_bytes"], buf["size_exact"] = ev.figures.get("requested"), True
    buf["size_text"] = size
    entry_shape(buf, a.group("shape"), ev, line)
    tag = a.group("tag")
    buf["tag"] = tag
    tm = re.match(r"(?:output of )?(?P<instr>[\w.\-]+)(?:@(?P<index>\{[\d,]*\}))?", tag)
    if tm and tag.startswith("output of "):
        buf["instruction"] = tm.group("instr")
    instr = (a.group("instr") or "").strip()
    if instr and instr != "<no-hlo-instruction>":
        buf["xla_label"] = instr
        entry_label(buf, instr)
    ev.buffers.append(buf)


def _other(ev: Event, text: str, line: int) -> None:
    m = _OTHER_REQUEST.search(text)
    if m:
        exact = m.group("exact")
        ev.figure("requested", exact or m.group("size"), line)


def merge_repeats(events: list[Event]) -> list[Event]:
    """One OOM printed twice is one event. The runtime logs the status (`E... ] Execution
    of replica 0 failed: RESOURCE_EXHAUSTED: Out of memory while trying to allocate N
    bytes.`), then Python raises the same status with the full report. An event is
    folded into the next one when it lists no buffer, printed at least one figure and
    every figure it printed the next one printed with the same value, and the next
    starts at most REPEAT_WITHIN lines after it ends. The event keeps the first one's
    place (line, byte offset) and both parts' raw bytes and text."""
    out: list[Event] = []
    for ev in events:
        prev = out[-1] if out else None
        if prev is not None and _repeats(prev, ev):
            out[-1] = _fold(prev, ev)
        else:
            out.append(ev)
    return out


def _repeats(first: Event, then: Event) -> bool:
    return (
        not first.buffers
        and not first.fragment
        and bool(first.figures)
        and all(then.figures.get(k) == v for k, v in first.figures.items())
        and 0 <= then.line - first.end_line <= REPEAT_WITHIN
    )


def _fold(first: Event, then: Event) -> Event:
    then.problems = first.problems + then.problems
    for key, value in first.fields.items():
        then.fields.setdefault(key, value)
    then.line, then.byte_offset = first.line, first.byte_offset
    then.raw = first.raw + then.raw
    then.text = f"{first.text}\n{then.text}"
    return then
