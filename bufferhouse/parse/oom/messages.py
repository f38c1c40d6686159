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

import re

from bufferhouse.parse.oom.grammar import (
    ONE_LINE,
    SZ,
    Event,
    Lines,
    NeedMore,
    Problem,
    entry_label,
    entry_shape,
    error_type,
    finish,
    start_kind,
)
from bufferhouse.parse.oom.prefix import detect
from bufferhouse.parse.oom.tpu import parse_tpu
from bufferhouse.parse.oom.xla import parse_xla

__all__ = ["Event", "NeedMore", "Problem", "parse_event", "start_kind"]

_ONE_LINE_ALLOC = re.compile(
    r"(?P<alloc>#?[\w.\-]+)\s*\[shape\s*=\s*'(?P<shape>[^']*)',\s*space\s*=\s*(?P<space>[\w-]+),"
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
    kind = start_kind(rest)
    if kind is None:
        return None
    src = Lines(lines, first_number, at_eof, prefix)
    if kind in ("allocation", "other"):
        ev = Event("tpu" if kind == "allocation" else "runtime", kind, first_number)
        error_type(ev, rest)
        (_one_line if kind == "allocation" else _other)(ev, rest, first_number)
        finish(ev, src, 0, [rest])
        return ev
    if kind in ("buffer_assignment", "buffer_assignment_cut"):
        ev = Event("xla", "buffer_assignment", first_number)
        return parse_xla(ev, src, rest, kind == "buffer_assignment_cut")
    ev = Event("tpu", "tpu_runtime" if kind == "tpu_runtime" else "tpu_compile", first_number)
    return parse_tpu(ev, src, rest, kind == "tpu_cut")


def _one_line(ev: Event, text: str, line: int) -> None:
    m = ONE_LINE.search(text)
    assert m is not None
    ev.figures["requested"] = int(m.group("req"))
    ev.figures["capacity"] = int(m.group("cap"))
    ev.exact += ["requested", "capacity"]
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
        buf["size_bytes"], buf["size_exact"] = int(size), True
    else:  # 0xffffffffffffffff: not known; the allocation is the request
        buf["size_bytes"], buf["size_exact"] = ev.figures["requested"], True
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
        if exact:
            ev.figures["requested"] = int(exact)
            ev.exact.append("requested")
        else:
            ev.figure("requested", m.group("size"), line)
