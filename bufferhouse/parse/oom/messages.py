"""The grammar of OOM messages: the lines of one event -> an Event (fields, figures, buffers).

The forms (reference: oom-format.md): XLA's BufferAssignment summary
(`Peak buffers:`, GPU/CPU), the TPU compiler's and runtime's summaries
(`Total hbm usage >=`, `Largest program allocations in hbm:`, `Attempting to
reserve ... at the bottom of memory`), the one-line `Allocation (size=N)
would exceed memory (size=M)` form, and any other RESOURCE_EXHAUSTED line
about memory. The scanner finds where a message starts; this module reads
its lines until one does not belong, so an event never swallows the log
around it. What does not parse becomes a Problem (line and what was
expected) and the rest of the event is kept.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from bufferhouse.parse.oom.prefix import Prefix, detect
from bufferhouse.parse.oom.sizes import SizeError, exact_bytes, parse_size
from bufferhouse.parse.shapes import TextSyntaxError, byte_size, parse_shape, parse_shape_at

#: Non-blank lines looked at past an unknown line for the message to resume.
LOOKAHEAD = 8


class NeedMore(Exception):
    """The lines given end before the event does (or before the look-ahead could
    tell); the scanner reads on and calls again with more."""


@dataclass
class Problem:
    line: int
    message: str
    text: str | None = None


@dataclass
class Event:
    """One OOM message as read: the scanner adds where it is and its raw bytes."""

    family: str  # xla | tpu | runtime
    form: str  # buffer_assignment | tpu_compile | tpu_runtime | allocation | other
    line: int
    end_line: int = 0
    lines_used: int = 0  # lines of the window the event takes (its last line included)
    fields: dict[str, object] = field(default_factory=dict)
    figures: dict[str, int] = field(default_factory=dict)
    exact: list[str] = field(default_factory=list)
    buffers: list[dict[str, object]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    truncated: bool = False
    text: str = ""
    byte_offset: int = 0
    raw: bytes = b""

    def figure(self, key: str, text: str, line: int, exact_text: str | None = None) -> None:
        """Record a printed size under `key`: exact bytes from `(N bytes)` win."""
        exact = exact_bytes(exact_text) if exact_text else None
        if exact is not None:
            self.figures[key] = exact
            self.exact.append(key)
            return
        try:
            value, is_exact = parse_size(text)
        except SizeError as exc:
            self.problems.append(Problem(line, f"{key}: {exc}"))
            return
        self.figures[key] = value
        if is_exact:
            self.exact.append(key)


# --- line grammar -------------------------------------------------------------------

_SZ = r"-?(?:\d+(?:\.\d*)?|\.\d+)\s?[A-Za-z]*"
_ONE_LINE = re.compile(
    r"Allocation \(size=(?P<req>\d+)\) would exceed memory \(size=(?P<cap>\d+)\)(?:\s*::\s*(?P<rest>.*))?"
)
_ONE_LINE_ALLOC = re.compile(
    r"(?P<alloc>#?[\w.\-]+)\s*\[shape\s*=\s*'(?P<shape>[^']*)',\s*space\s*=\s*(?P<space>[\w-]+),"
    r"\s*size\s*=\s*(?P<size>\w+),\s*tag\s*=\s*'(?P<tag>[^']*)'\]"
    r"(?:\s*::\s*(?P<instr>.*))?"
)
_RAN_OUT = re.compile(
    r"Ran out of memory in memory space (?P<space>[\w-]+)\.?"
    r"(?:\s*Used (?P<used>" + _SZ + r") of (?P<cap>" + _SZ + r") [\w-]+\.?)?"
    r"(?:\s*Exceeded [\w-]+ capacity by (?P<exc>" + _SZ + r")\.?)?"
)
_RESERVE = re.compile(r"Attempting to reserve (?P<req>" + _SZ + r") at the bottom of memory")
_FREE = re.compile(
    r"There are (?P<free>" + _SZ + r") free, (?P<reserved>" + _SZ + r") reserved,"
    r" and (?P<reservable>" + _SZ + r") reservable"
)
_PROGRAM = re.compile(r"(?:Error loading program|program) '(?P<name>[^']+)'")
_FUNCTION_NODE = re.compile(r"\{\{function_node (?P<name>[^}\s]+)\}\}")
_XLA_FIRST = re.compile(r"Out of memory while trying to allocate (?P<req>.*?)\s*$")
_XLA_FIRST_SIZE = re.compile(r"(?P<size>" + _SZ + r"?)(?: bytes)?\.")
_EXHAUSTED = re.compile(r"RESOURCE_EXHAUSTED|[Rr]esource exhausted")
_MEMORY_WORDS = re.compile(r"(?i)memory|alloc|\boom\b|hbm|vmem|bytes")
_OTHER_REQUEST = re.compile(
    r"(?:allocate|allocating|request for|reserve)\s+(?P<size>"
    + _SZ
    + r")(?:\s*\((?P<exact>\d+)B\))?"
)
_ERROR_TYPE = re.compile(r"(\*\* \(\w+\)|[\w.]*(?:Error|Exception|Status)\b)")

_BA_DEBUG = re.compile(r"BufferAssignment OOM Debugging\.?")
_BA_STATS = re.compile(r"BufferAssignment stats:")
_STAT = re.compile(
    r"(?P<name>[\w -]+?) (?P<kind>allocation|fragmentation):\s*(?P<size>\S+)"
    r"(?:\s*\(\s*(?P<pct>-?[\d.]+)%\))?"
)
_PEAK = re.compile(r"Peak buffers:")
_BUF = re.compile(r"Buffer (?P<n>\d+):")
_FIELD = re.compile(
    r"(?P<key>Size|Operator|XLA Label|XLA label|Shape|Entry Parameter Subshape|Unpadded size"
    r"|Extra memory due to padding|Allocation type):\s?(?P<value>.*)"
)
_SEP = re.compile(r"=+")

_TOTAL = re.compile(r"Total (?P<space>[\w-]+) usage >= (?P<size>" + _SZ + r"?):?")
_PROGRAM_REQ = re.compile(r"Program (?P<space>[\w-]+) requirement (?P<size>" + _SZ + r"?):?")
_OUTPUT = re.compile(
    r"Output size (?P<out>" + _SZ + r"?); shares (?P<shared>" + _SZ + r"?) with arguments\.?"
)
_CAPACITY = re.compile(
    r"(?P<space>[A-Za-z]+) capacity (?P<size>" + _SZ + r"?)\s*(?P<rest>\(.*\))?:?"
)
_LARGEST = re.compile(r"Largest program allocations in (?P<space>[\w-]+):?")
_ENTRY = re.compile(r"(?P<n>\d+)\\?\.\s+Size:\s*(?P<value>.*)")
_BLOCK = re.compile(r"(?P<name>[A-Z][\w -]*?)(?: include some or all of)?:")
_FIGURE = re.compile(
    r"(?P<name>[A-Za-z][\w .()/-]*?)\s+(?P<size>-?(?:\d+(?:\.\d*)?|\.\d+)\s?[A-Za-z]*)"
    r"(?P<rest>(?:\s.*|\(.*)?)"
)
_UTILIZATION = re.compile(r"(?P<pct>[\d.]+)% utilization")
_UNPADDED = re.compile(r"Unpadded \((?P<size>" + _SZ + r"?)\)")
_PADDED = re.compile(r"Padded \((?P<size>" + _SZ + r"?)\)")
_FRAGMENTATION = re.compile(r"(?P<pct>[\d.]+)% fragmentation \((?P<size>" + _SZ + r"?)\)")
_EXPANSION = re.compile(r"\((?P<x>[\d.]+)x expansion\)")
_METADATA = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"|(\w+)=(\S+)')
_LABEL = re.compile(r"%?(?P<name>[\w.\-]+) = ")
_OPCODE = re.compile(r"(?P<opcode>[a-z][\w-]*)\(")
_JIT = re.compile(r"^(?P<kind>jit|pjit|pmap|xmap|shard_map)\((?P<name>[^)/]*)\)")


def _slug(text: str) -> str:
    return re.sub(r"\s+", "_", text.strip().lower())


def _unbalanced(text: str) -> bool:
    """An odd quote or an unclosed bracket: the line was cut (a terminal wrapped it)."""
    if text.count('"') % 2 or (text.count("'") % 2 and "='" in text):
        return True
    return any(text.count(o) > text.count(c) for o, c in ("()", "[]", "{}"))


def start_kind(text: str) -> str | None:
    """Which form a line (prefix removed) starts, or None if it starts none."""
    if _ONE_LINE.search(text):
        return "allocation"
    if _RAN_OUT.search(text):
        return "tpu_compile"
    if _RESERVE.search(text):
        return "tpu_runtime"
    if _XLA_FIRST.search(text):
        return "buffer_assignment"
    s = text.strip()
    if _BA_DEBUG.fullmatch(s) or _BA_STATS.fullmatch(s) or _PEAK.fullmatch(s):
        return "buffer_assignment_cut"
    if _TOTAL.fullmatch(s) or _PROGRAM_REQ.fullmatch(s) or _LARGEST.fullmatch(s):
        return "tpu_cut"
    if _EXHAUSTED.search(text) and _MEMORY_WORDS.search(text[_EXHAUSTED.search(text).end() :]):
        return "other"
    return None


class _Lines:
    """The window's lines with the message's prefix removed, and the look-ahead rule."""

    def __init__(self, lines: list[str], first_number: int, at_eof: bool, prefix: Prefix):
        self.lines = lines
        self.first = first_number
        self.at_eof = at_eof
        self.prefix = prefix

    def number(self, i: int) -> int:
        return self.first + i

    def get(self, i: int) -> str | None:
        """Line i without prefix; None past the end of the file; '' also for a line of
        another process (interleaved output is skipped like a blank line)."""
        if i >= len(self.lines):
            if self.at_eof:
                return None
            raise NeedMore
        text, stripped = self.prefix.strip(self.lines[i])
        if stripped is None:
            return "\x00foreign"
        return text

    def resumes(self, i: int, fits) -> int | None:
        """Index of the first of the next LOOKAHEAD non-blank lines after i that `fits`;
        None if none does, or a line starts another event first."""
        seen = 0
        j = i + 1
        while seen < LOOKAHEAD:
            t = self.get(j)
            if t is None:
                return None
            s = t.strip()
            if s and s != "\x00foreign":
                if fits(s):
                    return j
                if start_kind(t):
                    return None
                seen += 1
            j += 1
        return None


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
    src = _Lines(lines, first_number, at_eof, prefix)
    if kind in ("allocation", "other"):
        ev = Event("tpu" if kind == "allocation" else "runtime", kind, first_number)
        _error_type(ev, rest)
        (_one_line if kind == "allocation" else _other)(ev, rest, first_number)
        _finish(ev, src, 0, [rest])
        return ev
    if kind in ("buffer_assignment", "buffer_assignment_cut"):
        ev = Event("xla", "buffer_assignment", first_number)
        return _xla(ev, src, rest, kind == "buffer_assignment_cut")
    ev = Event("tpu", "tpu_runtime" if kind == "tpu_runtime" else "tpu_compile", first_number)
    return _tpu(ev, src, rest, kind == "tpu_cut")


def _error_type(ev: Event, first: str) -> None:
    m = _EXHAUSTED.search(first)
    head = first[: m.start()] if m else first
    found = _ERROR_TYPE.findall(head)
    if found:
        ev.fields["error_type"] = found[-1]
    for pattern in (_PROGRAM, _FUNCTION_NODE):
        pm = pattern.search(first)
        if pm:
            ev.fields["program_name"] = pm.group("name")
            break


def _finish(ev: Event, src: _Lines, last: int, texts: list[str]) -> None:
    ev.lines_used = last + 1
    ev.end_line = src.number(last)
    ev.text = "\n".join(texts)
    if "program_name" not in ev.fields:
        names = Counter()
        for b in ev.buffers:
            m = _JIT.match(str(b.get("op_name") or ""))
            if m:
                names[f"{m.group('kind')}_{m.group('name')}"] += 1
        if names:
            ev.fields["program_name"] = names.most_common(1)[0][0]


def _one_line(ev: Event, text: str, line: int) -> None:
    m = _ONE_LINE.search(text)
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
    _shape(buf, a.group("shape"), ev, line)
    tag = a.group("tag")
    buf["tag"] = tag
    tm = re.match(r"(?:output of )?(?P<instr>[\w.\-]+)(?:@(?P<index>\{[\d,]*\}))?", tag)
    if tm and tag.startswith("output of "):
        buf["instruction"] = tm.group("instr")
    instr = (a.group("instr") or "").strip()
    if instr and instr != "<no-hlo-instruction>":
        buf["xla_label"] = instr
        _label(buf, instr)
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


def _shape(buf: dict[str, object], text: str, ev: Event, line: int) -> None:
    text = text.strip()
    buf["shape"] = text
    try:
        shape = parse_shape(text)
    except TextSyntaxError as exc:
        ev.problems.append(Problem(line, f"shape: {exc}", text))
        return
    if shape.element_type is not None:
        buf["element_type"] = shape.element_type
        buf["dims"] = list(shape.dims)
    buf["tiles"] = shape.tiles
    buf["minor_to_major"] = None if shape.minor_to_major is None else list(shape.minor_to_major)
    buf["memory_space"] = shape.memory_space
    buf["logical_bytes"] = byte_size(shape)


def _label(buf: dict[str, object], text: str) -> None:
    """Opcode and instruction name from an XLA label: `fusion` (GPU) or the whole
    instruction, `%name = shape opcode(...)` or `name = opcode(...)` (TPU)."""
    text = text.strip()
    if re.fullmatch(r"[a-z][\w-]*", text):
        buf["opcode"] = text
        return
    m = _LABEL.match(text)
    if not m:
        return
    buf["instruction"] = m.group("name")
    pos = m.end()
    om = _OPCODE.match(text, pos)
    if om is None:
        try:
            _, pos = parse_shape_at(text, pos)
        except TextSyntaxError:
            return
        om = _OPCODE.match(text, pos + (text[pos : pos + 1] == " "))
    if om is not None:
        buf["opcode"] = om.group("opcode")


def _operator(buf: dict[str, object], text: str, ev: Event, line: int) -> None:
    for m in _METADATA.finditer(text):
        key = m.group(1) or m.group(3)
        value = m.group(2) if m.group(1) else m.group(4)
        if m.group(1):
            value = value.replace('\\"', '"').replace("\\\\", "\\")
        if key in ("op_type", "op_name", "source_file"):
            buf[key] = value
        elif key in ("source_line", "stack_frame_id"):
            if value.isdigit() and int(value) < 2**31:
                buf[key] = int(value)
            else:
                ev.problems.append(Problem(line, f"{key}: expected a line number, found {value!r}"))


def _entry_field(ev: Event, buf: dict[str, object], key: str, value: str, line: int) -> None:
    value = value.strip()
    if key == "Size":
        buf["size_text"] = value
        exact = exact_bytes(value)
        try:
            size, is_exact = parse_size(value.split("(")[0])
        except SizeError as exc:
            ev.problems.append(Problem(line, f"buffer {buf.get('rank')} size: {exc}", value))
            if exact is None:
                return
            size, is_exact = exact, True
        if exact is not None:
            size, is_exact = exact, True
        buf["size_bytes"], buf["size_exact"] = size, is_exact
    elif key == "Operator":
        _operator(buf, value, ev, line)
    elif key in ("XLA Label", "XLA label"):
        buf["xla_label"] = value
        _label(buf, value)
    elif key == "Shape":
        _shape(buf, value, ev, line)
    elif key == "Entry Parameter Subshape":
        buf["is_entry_parameter"] = True
        _shape(buf, value, ev, line)
    elif key == "Unpadded size":
        exact = exact_bytes(value)
        try:
            size, _ = parse_size(value.split("(")[0])
        except SizeError as exc:
            ev.problems.append(Problem(line, f"buffer {buf.get('rank')} unpadded size: {exc}"))
            return
        buf["unpadded_bytes"] = exact if exact is not None else size
    elif key == "Extra memory due to padding":
        m = _EXPANSION.search(value)
        if m:
            buf["padding_expansion"] = float(m.group("x"))
        try:
            buf["padding_bytes"], _ = parse_size(value.split("(")[0])
        except SizeError as exc:
            ev.problems.append(Problem(line, f"buffer {buf.get('rank')} padding: {exc}"))
    elif key == "Allocation type":
        buf["allocation_type"] = value


def _close_entry(ev: Event, buf: dict[str, object]) -> None:
    size, unpadded = buf.get("size_bytes"), buf.get("unpadded_bytes")
    if isinstance(size, int) and isinstance(unpadded, int):
        buf.setdefault("padding_bytes", size - unpadded)
        if unpadded > 0:
            buf.setdefault("padding_expansion", round(size / unpadded, 1))
    buf.setdefault("is_entry_parameter", False)
    ev.buffers.append(buf)


# --- family A: XLA's BufferAssignment summary ---------------------------------------


def _xla(ev: Event, src: _Lines, first: str, cut: bool) -> Event:
    texts: list[str] = []
    if cut:
        ev.problems.append(
            Problem(
                ev.line,
                "message starts without its first line (RESOURCE_EXHAUSTED: Out of memory ...)",
            )
        )
        start = 0
    else:
        _error_type(ev, first)
        m = _XLA_FIRST.search(first)
        assert m is not None
        req = m.group("req")
        texts.append(first)
        start = 1
        # A first line a terminal wrapped: the request ends with "bytes." or a unit and "."
        while not req.endswith(".") and src.get(1) not in (None, "") and start == 1:
            nxt = src.get(1)
            if nxt is None or start_kind(nxt) or _known_xla(nxt.strip()):
                break
            ev.problems.append(
                Problem(
                    src.number(1), "line joined to the one before (wrapped by a terminal?)", nxt
                )
            )
            first += nxt
            req += nxt.strip()
            texts[0] = first
            start = 2
        sm = _XLA_FIRST_SIZE.fullmatch(req)
        if sm:
            ev.figure("requested", sm.group("size"), ev.line)
        elif req:
            ev.problems.append(
                Problem(
                    ev.line,
                    f"expected `allocate N bytes.` after `Out of memory while trying to`, found {req!r}",
                )
            )
            ev.truncated = True
    state = "head" if not cut else "stats"
    last = start - 1
    buf: dict[str, object] | None = None
    last_field: tuple[str, str] | None = None
    saw_stats = saw_peak = False
    i = start
    while True:
        t = src.get(i)
        if t is None:
            break
        s = t.strip()
        if not s or s == "\x00foreign":
            i += 1
            continue
        n = src.number(i)
        if start_kind(t) in (
            "allocation",
            "tpu_compile",
            "tpu_runtime",
            "buffer_assignment",
            "other",
        ):
            break
        if _BA_DEBUG.fullmatch(s):
            state = "stats"
        elif _BA_STATS.fullmatch(s):
            state, saw_stats = "stats", True
        elif state == "stats" and (m := _STAT.fullmatch(s)):
            saw_stats = True
            key = f"{_slug(m.group('name'))}_{m.group('kind')}"
            ev.figure(key, m.group("size"), n)
            if m.group("pct") is not None:
                ev.fields[f"{key}_percent"] = float(m.group("pct"))
        elif _PEAK.fullmatch(s):
            state, saw_peak = "peak", True
        elif state == "peak" and (m := _BUF.fullmatch(s)):
            if buf is not None:
                _close_entry(ev, buf)
                ev.truncated = True
                ev.problems.append(Problem(n, f"buffer {buf['rank']} ends without its ===== line"))
            buf, last_field = {"rank": int(m.group("n")), "line": n}, None
        elif buf is not None and (m := _FIELD.fullmatch(s)):
            _entry_field(ev, buf, m.group("key"), m.group("value"), n)
            last_field = (m.group("key"), m.group("value"))
        elif buf is not None and _SEP.fullmatch(s):
            _close_entry(ev, buf)
            buf, last_field = None, None
        elif buf is not None and last_field is not None and _wrapped(last_field[1], s):
            key, value = last_field[0], last_field[1] + s
            ev.problems.append(
                Problem(n, "line joined to the one before (wrapped by a terminal?)", s)
            )
            _entry_field(ev, buf, key, value, n)
            last_field = (key, value)
        else:
            fits = _entry_line if buf is not None else _xla_line
            j = src.resumes(i, fits)
            if j is None:
                break
            what = (
                "a buffer field (Size:, Operator:, XLA Label:, Shape:) or ====="
                if buf
                else (
                    "a `Buffer N:` line"
                    if state == "peak"
                    else "a stats line (`... allocation: SIZE`)"
                )
            )
            ev.problems.append(Problem(n, f"expected {what}; skipped", s))
            i = j
            continue
        texts.extend(_stripped(src, k) for k in range(last + 1, i + 1))
        last = i
        i += 1
    if buf is not None:
        _close_entry(ev, buf)
        ev.truncated = True
        ev.problems.append(
            Problem(src.number(last), f"buffer {buf['rank']} is cut short (no ===== line)")
        )
    elif saw_stats and "total_allocation" not in ev.figures and not saw_peak:
        ev.truncated = True
        ev.problems.append(
            Problem(src.number(last), "stats are cut short (no `total allocation:` line)")
        )
    elif state == "peak" and not ev.buffers:
        ev.truncated = True
        ev.problems.append(
            Problem(src.number(last), "`Peak buffers:` lists no buffer (cut short?)")
        )
    _finish(ev, src, max(last, 0), texts)
    return ev


def _stripped(src: _Lines, k: int) -> str:
    t = src.get(k)
    return "" if t is None or t == "\x00foreign" else t


def _known_xla(s: str) -> bool:
    return bool(
        _BA_DEBUG.fullmatch(s)
        or _BA_STATS.fullmatch(s)
        or _STAT.fullmatch(s)
        or _PEAK.fullmatch(s)
        or _BUF.fullmatch(s)
        or _FIELD.fullmatch(s)
        or _SEP.fullmatch(s)
    )


def _xla_line(s: str) -> bool:
    return _known_xla(s)


def _entry_line(s: str) -> bool:
    return bool(
        _FIELD.fullmatch(s) or _SEP.fullmatch(s) or _BUF.fullmatch(s) or _ENTRY.fullmatch(s)
    )


def _wrapped(previous: str, s: str) -> bool:
    """Is `s` the rest of a field line a terminal wrapped? The field was left open
    (a quote or bracket), or the piece is `key=value` text of an Operator line."""
    if _FIELD.fullmatch(s) or _SEP.fullmatch(s) or _BUF.fullmatch(s) or _ENTRY.fullmatch(s):
        return False
    return _unbalanced(previous) or bool(re.match(r"\w+=", s))


# --- family B: the TPU compiler and runtime ------------------------------------------

#: Figures of the TPU summaries that have columns of their own: figure key -> column.
TPU_BLOCK_FIGURES = {
    "total_usage/reserved": "reserved_bytes",
    "total_usage/program": "program_bytes",
    "total_usage/arguments": "arguments_bytes",
    "program_requirement/global": "global_bytes",
    "program_requirement/scoped": "scoped_bytes",
    "program_requirement/hlo_temp": "hlo_temp_bytes",
}


def _tpu(ev: Event, src: _Lines, first: str, cut: bool) -> Event:
    texts: list[str] = []
    start = 0
    if cut:
        ev.problems.append(
            Problem(
                ev.line,
                "message starts without its first line (RESOURCE_EXHAUSTED: ... Ran out of memory ...)",
            )
        )
    else:
        _error_type(ev, first)
        while True:  # a first line a terminal wrapped
            nxt = src.get(start + 1)
            if nxt is None or not nxt.strip() or _tpu_known(nxt.strip()) or start_kind(nxt):
                break
            if first.rstrip().endswith((".", ")", "well)")) and not _unbalanced(first):
                break
            ev.problems.append(
                Problem(
                    src.number(start + 1),
                    "line joined to the one before (wrapped by a terminal?)",
                    nxt,
                )
            )
            first += nxt
            start += 1
        texts.append(first)
        _tpu_first(ev, first)
        start += 1
    block = ""
    last = start - 1
    buf: dict[str, object] | None = None
    last_field: tuple[str, str] | None = None
    in_label = False
    listed = False
    i = start
    while True:
        t = src.get(i)
        if t is None:
            break
        s = t.strip()
        if not s or s == "\x00foreign":
            i += 1
            continue
        n = src.number(i)
        kind = start_kind(t)
        if kind in ("allocation", "tpu_compile", "tpu_runtime", "buffer_assignment", "other"):
            break
        if (m := _TOTAL.fullmatch(s)) and buf is None:
            block = "total_usage"
            ev.fields.setdefault("memory_space", m.group("space"))
            ev.figure("total_usage", m.group("size"), n)
        elif (m := _PROGRAM_REQ.fullmatch(s)) and buf is None:
            block = "program_requirement"
            ev.fields.setdefault("memory_space", m.group("space"))
            ev.figure("program_requirement", m.group("size"), n)
        elif (m := _OUTPUT.fullmatch(s)) and buf is None:
            ev.figure("output", m.group("out"), n)
            ev.figure("output_shared", m.group("shared"), n)
        elif (m := _LARGEST.fullmatch(s)) and buf is None:
            block, listed = "largest", True
            ev.fields.setdefault("memory_space", m.group("space"))
        elif (m := _ENTRY.fullmatch(s)) and (listed or buf is not None or not block):
            if buf is not None:
                _close_entry(ev, buf)
                ev.truncated = True
                ev.problems.append(
                    Problem(n, f"allocation {buf['rank']} ends without its ===== line")
                )
            listed = True
            buf, in_label = {"rank": int(m.group("n")), "line": n}, False
            _entry_field(ev, buf, "Size", m.group("value"), n)
            last_field = ("Size", m.group("value"))
        elif buf is not None and (m := _FIELD.fullmatch(s)):
            key = m.group("key")
            _entry_field(ev, buf, key, m.group("value"), n)
            in_label = key in ("XLA label", "XLA Label")
            last_field = (key, m.group("value"))
        elif buf is not None and _SEP.fullmatch(s):
            _close_entry(ev, buf)
            buf, in_label, last_field = None, False, None
        elif buf is not None and in_label:
            # the label is the whole instruction text, which may hold newlines
            buf["xla_label"] = f"{buf.get('xla_label', '')}\n{t}"
        elif buf is not None and last_field is not None and _wrapped(last_field[1], s):
            key, value = last_field[0], last_field[1] + s
            ev.problems.append(
                Problem(n, "line joined to the one before (wrapped by a terminal?)", s)
            )
            _entry_field(ev, buf, key, value, n)
            last_field = (key, value)
        elif (
            (m := _CAPACITY.fullmatch(s)) and buf is None and m.group("space").lower() != "exceeded"
        ):
            block = f"{_slug(m.group('space'))}_capacity"
            ev.form = "tpu_runtime"
            ev.fields.setdefault("memory_space", m.group("space").lower())
            ev.figure("capacity", m.group("size"), n, m.group("rest"))
        elif (m := _BLOCK.fullmatch(s)) and buf is None:
            block = _slug(m.group("name"))
        elif buf is None and block and block != "largest" and (m := _FIGURE.fullmatch(s)):
            key = f"{block}/{_slug(m.group('name'))}"
            rest = m.group("rest") or ""
            ev.figure(key, m.group("size"), n, rest if "bytes" in rest else None)
            _figure_rest(ev, key, rest, n)
        else:
            fits = _entry_line if buf is not None else _tpu_known
            j = src.resumes(i, fits)
            if j is None:
                break
            what = (
                "an allocation field (Shape:, Unpadded size:, XLA label:, Allocation type:) or ====="
                if buf is not None
                else "a summary line (`name  SIZE`) or a numbered allocation (`N. Size: ...`)"
            )
            ev.problems.append(Problem(n, f"expected {what}; skipped", s))
            i = j
            continue
        texts.extend(_stripped(src, k) for k in range(last + 1, i + 1))
        last = i
        i += 1
    if buf is not None:
        _close_entry(ev, buf)
        ev.truncated = True
        ev.problems.append(
            Problem(src.number(last), f"allocation {buf['rank']} is cut short (no ===== line)")
        )
    elif listed and not ev.buffers:
        ev.truncated = True
        ev.problems.append(
            Problem(src.number(last), "`Largest program allocations` lists nothing (cut short?)")
        )
    elif block and not listed and ev.form == "tpu_compile" and not cut:
        ev.truncated = True
        ev.problems.append(
            Problem(
                src.number(last),
                "summary ends before `Largest program allocations in ...:` (cut short?)",
            )
        )
    for key, column in TPU_BLOCK_FIGURES.items():
        if key in ev.figures:
            ev.fields[column] = ev.figures[key]
    _finish(ev, src, max(last, 0), texts)
    return ev


def _tpu_known(s: str) -> bool:
    return bool(
        _TOTAL.fullmatch(s)
        or _PROGRAM_REQ.fullmatch(s)
        or _OUTPUT.fullmatch(s)
        or _LARGEST.fullmatch(s)
        or _ENTRY.fullmatch(s)
        or _FIELD.fullmatch(s)
        or _SEP.fullmatch(s)
        or (_CAPACITY.fullmatch(s) and not s.startswith("Exceeded"))
        or (_BLOCK.fullmatch(s) and len(s) < 80)
        or (_FIGURE.fullmatch(s) and len(s) < 200 and not s.startswith(("File ", "Traceback")))
    )


def _tpu_first(ev: Event, first: str) -> None:
    if m := _RAN_OUT.search(first):
        ev.fields["memory_space"] = m.group("space")
        if m.group("used"):
            ev.figure("used", m.group("used"), ev.line)
            ev.figure("capacity", m.group("cap"), ev.line)
        if m.group("exc"):
            ev.figure("exceeded", m.group("exc"), ev.line)
    if m := _RESERVE.search(first):
        ev.fields.setdefault("memory_space", "hbm")
        ev.figure("requested", m.group("req"), ev.line)
    if m := _FREE.search(first):
        ev.figure("free", m.group("free"), ev.line)
        ev.figure("free_reserved", m.group("reserved"), ev.line)
        ev.figure("reservable", m.group("reservable"), ev.line)


def _figure_rest(ev: Event, key: str, rest: str, line: int) -> None:
    """`(60.1% utilization: Unpadded (10.36G) Padded (17.22G), 0.1% fragmentation (20.00M))`."""
    name = key.split("/")[-1]
    if m := _UTILIZATION.search(rest):
        ev.fields[f"{name}_utilization"] = float(m.group("pct"))
    if m := _UNPADDED.search(rest):
        ev.figure(f"{key}/unpadded", m.group("size"), line)
    if m := _PADDED.search(rest):
        ev.figure(f"{key}/padded", m.group("size"), line)
    if m := _FRAGMENTATION.search(rest):
        ev.figure(f"{key}/fragmentation", m.group("size"), line)
        ev.fields[f"{name}_fragmentation_percent"] = float(m.group("pct"))
