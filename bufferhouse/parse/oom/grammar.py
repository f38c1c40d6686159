"""What the two families of OOM message share: the Event they fill, the line grammar and
the buffer entries both list.

One module so that `start_kind` knows every form's first line: a message ends where
another starts, whichever family it belongs to.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from bufferhouse.parse.oom import codes
from bufferhouse.parse.oom.prefix import Prefix, detect
from bufferhouse.parse.oom.sizes import (
    MAX_BYTES,
    SZ,
    SizeError,
    exact_bytes,
    parse_size,
    shown,
)
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
    #: The message starts without its first line (a log rotated mid-message, an excerpt
    #: that starts in the stats or the buffer list): what it holds is kept.
    fragment: bool = False
    text: str = ""
    byte_offset: int = 0
    raw: bytes = b""

    def figure(self, key: str, text: str, line: int, exact_text: str | None = None) -> None:
        """Record a printed size under `key`: exact bytes from `(N bytes)` win. A size
        that does not parse, is too large or is negative where only a difference may be
        is a problem of this figure; the message keeps the rest."""
        try:
            exact = exact_bytes(exact_text) if exact_text else None
            value, is_exact = (exact, True) if exact is not None else parse_size(text)
            not_negative(value, key, key.rsplit("/", 1)[-1] in SIGNED_FIGURES)
        except SizeError as exc:
            self.problems.append(Problem(line, f"{key}: {exc}"))
            return
        self.figures[key] = value
        if is_exact:
            self.exact.append(key)


#: Figures that are differences, not amounts of memory, and so may be negative
#: (`Available after request -2.02G` at TPU run time).
SIGNED_FIGURES = frozenset({"available_after_request"})


def not_negative(value: int, what: str, signed: bool = False) -> None:
    """A size of memory is never negative: one printed so is an error of that figure."""
    if value < 0 and not signed:
        raise SizeError(f"expected a size of 0 or more for {what}, found {value} bytes")


#: A rank (`Buffer N:`, `N. Size:`) is stored as a 32-bit INTEGER.
MAX_RANK = (1 << 31) - 1


def rank_of(ev: Event, text: str, line: int) -> int:
    """The printed number of a buffer entry; 0, the number for "not known", and a
    problem when it does not fit the column."""
    if len(text) > 10 or int(text) > MAX_RANK:
        ev.problems.append(
            Problem(
                line, f"buffer number {shown(text)} is too large (at most {MAX_RANK}); stored as 0"
            )
        )
        return 0
    return int(text)


def decimal(ev: Event, text: str, line: int, what: str) -> float | None:
    """A printed percentage or ratio; None (and a problem) when it is not a number."""
    try:
        return float(text)
    except ValueError:
        ev.problems.append(Problem(line, f"{what}: expected a number, found {shown(text)}"))
        return None


# --- line grammar -------------------------------------------------------------------
# Every form's first lines are here, for start_kind; the entry lines both families list too.

ONE_LINE = re.compile(
    r"Allocation \(size=(?P<req>\d+)\) would exceed memory \(size=(?P<cap>\d+)\)(?:\s*::\s*(?P<rest>.*))?"
)
RAN_OUT = re.compile(
    r"Ran out of memory in memory space (?P<space>[\w-]+)\.?"
    r"(?:\s*Used (?P<used>" + SZ + r") of (?P<cap>" + SZ + r") [\w-]+\.?)?"
    r"(?:\s*Exceeded [\w-]+ capacity by (?P<exc>" + SZ + r")\.?)?"
)
RESERVE = re.compile(r"Attempting to reserve (?P<req>" + SZ + r") at the bottom of memory")
_PROGRAM = re.compile(r"(?:Error loading program|program) '(?P<name>[^']+)'")
_FUNCTION_NODE = re.compile(r"\{\{function_node (?P<name>[^}\s]+)\}\}")
XLA_FIRST = re.compile(r"Out of memory while trying to allocate (?P<req>.*?)\s*$")
_EXHAUSTED = re.compile(r"RESOURCE_EXHAUSTED|[Rr]esource exhausted")
_MEMORY_WORDS = re.compile(r"(?i)memory|alloc|\boom\b|hbm|vmem|bytes")
_ERROR_TYPE = re.compile(r"(\*\* \(\w+\)|(?<![\w.])[\w.]*(?:Error|Exception|Status)\b)")
#: Characters before RESOURCE_EXHAUSTED searched for the exception's name.
ERROR_TYPE_CHARS = 256

BA_DEBUG = re.compile(r"BufferAssignment OOM Debugging\.?")
BA_STATS = re.compile(r"BufferAssignment stats:")
PEAK = re.compile(r"Peak buffers:")
BUF = re.compile(r"Buffer (?P<n>\d+):")
FIELD = re.compile(
    r"(?P<key>Size|Operator|XLA Label|XLA label|Shape|Entry Parameter Subshape|Unpadded size"
    r"|Extra memory due to padding|Allocation type):\s?(?P<value>.*)"
)
SEP = re.compile(r"=+")

TOTAL = re.compile(r"Total (?P<space>[\w-]+) usage >= (?P<size>" + SZ + r"?):?")
PROGRAM_REQ = re.compile(r"Program (?P<space>[\w-]+) requirement (?P<size>" + SZ + r"?):?")
LARGEST = re.compile(r"Largest program allocations in (?P<space>[\w-]+):?")
ENTRY = re.compile(r"(?P<n>\d+)\\?\.\s+Size:\s*(?P<value>.*)")

_EXPANSION = re.compile(r"\((?P<x>[\d.]+)x expansion\)")
#: Each pattern below that a search tries at every offset starts after a lookbehind: from
#: every start inside a long word, `\w+` or `[\d.]+` would scan the word again (quadratic).
_METADATA = re.compile(r'(?<!\w)(\w+)="((?:[^"\\]|\\.)*)"|(?<!\w)(\w+)=(\S+)')
_LABEL = re.compile(r"%?(?P<name>[\w.\-]+) = ")
_OPCODE = re.compile(r"(?P<opcode>[a-z][\w-]*)\(")
_JIT = re.compile(r"^(?P<kind>jit|pjit|pmap|xmap|shard_map)\((?P<name>[^)/]*)\)")


def slug(text: str) -> str:
    return re.sub(r"\s+", "_", text.strip().lower())


def unbalanced(text: str) -> bool:
    """An odd quote or an unclosed bracket: the line was cut (a terminal wrapped it)."""
    if text.count('"') % 2 or (text.count("'") % 2 and "='" in text):
        return True
    return any(text.count(o) > text.count(c) for o, c in ("()", "[]", "{}"))


def start_kind(text: str) -> str | None:
    """Which form a line (prefix removed) starts, or None if it starts none."""
    if ONE_LINE.search(text):
        return "allocation"
    if RAN_OUT.search(text):
        return "tpu_compile"
    if coded := codes.starts(text):
        return coded
    if RESERVE.search(text):
        return "tpu_runtime"
    if XLA_FIRST.search(text):
        return "buffer_assignment"
    s = text.strip()
    if BA_DEBUG.fullmatch(s) or BA_STATS.fullmatch(s) or PEAK.fullmatch(s):
        return "buffer_assignment_cut"
    if TOTAL.fullmatch(s) or PROGRAM_REQ.fullmatch(s) or LARGEST.fullmatch(s):
        return "tpu_cut"
    if _EXHAUSTED.search(text) and _MEMORY_WORDS.search(text[_EXHAUSTED.search(text).end() :]):
        return "other"
    return None


class Lines:
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


def error_type(ev: Event, first: str) -> None:
    m = _EXHAUSTED.search(first)
    # the name just before the status; bounded, as `[\w.]*` from every start of a long
    # word is quadratic (a 20,000-character word took 24 s)
    head = (first[: m.start()] if m else first)[-ERROR_TYPE_CHARS:]
    found = _ERROR_TYPE.findall(head)
    if found:
        ev.fields["error_type"] = found[-1]
    for pattern in (_PROGRAM, _FUNCTION_NODE):
        pm = pattern.search(first)
        if pm:
            ev.fields["program_name"] = pm.group("name")
            break


def fragment_line(line: str) -> bool:
    """Does `line` (a log line, prefix and all) belong to a buffer list and start no
    message? Such a line with no message above is part of an excerpt cut at the top."""
    _, rest = detect(line)
    s = rest.strip()
    starts = FIELD.fullmatch(s) or BUF.fullmatch(s) or ENTRY.fullmatch(s)  # not a ===== line
    return bool(starts) and start_kind(rest) is None


def open_fragment_entry(ev: Event, first: str) -> dict[str, object] | None:
    """The entry an excerpt starts inside (at a field, not at `Buffer N:` / `N. Size:`):
    its number was cut off, so it is None until `finish` infers it."""
    return {"rank": None, "line": ev.line} if FIELD.fullmatch(first.strip()) else None


def finish(ev: Event, src: Lines, last: int, texts: list[str]) -> None:
    for k, b in enumerate(ev.buffers):
        if b["rank"] is None:  # entries are numbered 1, 2, ...: it is the one before the next
            after = ev.buffers[k + 1]["rank"] if k + 1 < len(ev.buffers) else None
            b["rank"] = after - 1 if isinstance(after, int) and after > 1 else 0
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


# --- buffer entries (`Buffer N:` and `N. Size:` lists) -------------------------------


def entry_shape(buf: dict[str, object], text: str, ev: Event, line: int) -> None:
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
    logical = byte_size(shape)
    if logical is not None and logical > MAX_BYTES:
        ev.problems.append(Problem(line, f"shape: {text[:80]} holds more than 2^63-1 bytes", text))
        logical = None
    buf["logical_bytes"] = logical


def entry_label(buf: dict[str, object], text: str) -> None:
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
            if value.isdigit() and len(value) <= 10 and int(value) < 2**31:
                buf[key] = int(value)
            else:
                ev.problems.append(
                    Problem(line, f"{key}: expected a line number, found {shown(value)}")
                )


def entry_name(buf: dict[str, object], noun: str = "buffer") -> str:
    """`buffer 3` in a message; the entry an excerpt starts in has no number yet."""
    rank = buf.get("rank")
    return f"{noun} {rank}" if rank is not None else f"the {noun} the excerpt starts in"


def entry_field(ev: Event, buf: dict[str, object], key: str, value: str, line: int) -> None:
    value = value.strip()
    if key == "Size":
        buf["size_text"] = value
        try:
            exact = exact_bytes(value)
            size, is_exact = (exact, True) if exact is not None else parse_size(value.split("(")[0])
            not_negative(size, f"{entry_name(buf)}")
        except SizeError as exc:
            ev.problems.append(Problem(line, f"{entry_name(buf)} size: {exc}", value))
            return
        buf["size_bytes"], buf["size_exact"] = size, is_exact
    elif key == "Operator":
        _operator(buf, value, ev, line)
    elif key in ("XLA Label", "XLA label"):
        buf["xla_label"] = value
        entry_label(buf, value)
    elif key == "Shape":
        entry_shape(buf, value, ev, line)
    elif key == "Entry Parameter Subshape":
        buf["is_entry_parameter"] = True
        entry_shape(buf, value, ev, line)
    elif key == "Unpadded size":
        try:
            exact = exact_bytes(value)
            size = exact if exact is not None else parse_size(value.split("(")[0])[0]
            not_negative(size, f"{entry_name(buf)} unpadded size")
        except SizeError as exc:
            ev.problems.append(Problem(line, f"{entry_name(buf)} unpadded size: {exc}"))
            return
        buf["unpadded_bytes"] = size
    elif key == "Extra memory due to padding":
        m = _EXPANSION.search(value)
        if m:
            buf["padding_expansion"] = decimal(ev, m.group("x"), line, "padding expansion")
        try:
            padding, _ = parse_size(value.split("(")[0])
            not_negative(padding, f"{entry_name(buf)} padding")
        except SizeError as exc:
            ev.problems.append(Problem(line, f"{entry_name(buf)} padding: {exc}"))
            return
        buf["padding_bytes"] = padding
    elif key == "Allocation type":
        buf["allocation_type"] = value


def close_entry(ev: Event, buf: dict[str, object]) -> None:
    size, unpadded = buf.get("size_bytes"), buf.get("unpadded_bytes")
    if isinstance(size, int) and isinstance(unpadded, int) and unpadded > size:
        ev.problems.append(
            Problem(
                buf["line"],  # type: ignore[arg-type]
                f"{entry_name(buf)}: unpadded size {unpadded} is larger than its size {size};"
                " no padding derived",
            )
        )
    elif isinstance(size, int) and isinstance(unpadded, int):
        buf.setdefault("padding_bytes", size - unpadded)
        if unpadded > 0:
            buf.setdefault("padding_expansion", round(size / unpadded, 1))
    buf.setdefault("is_entry_parameter", False)
    ev.buffers.append(buf)


def close_cut_entry(ev: Event, buf: dict[str, object], line: int, noun: str) -> None:
    """An entry the message ends inside: kept with what it has, the event marked cut."""
    close_entry(ev, buf)
    ev.truncated = True
    ev.problems.append(Problem(line, f"{entry_name(buf, noun)} is cut short (no ===== line)"))


def join_wrapped(
    ev: Event, buf: dict[str, object], last_field: tuple[str, str], s: str, line: int
) -> tuple[str, str]:
    """A field line a terminal wrapped: `s` joined to the field before it (noted as a
    problem) and the field read again; returns the field as it now stands."""
    key, value = last_field[0], last_field[1] + s
    ev.problems.append(Problem(line, "line joined to the one before (wrapped by a terminal?)", s))
    entry_field(ev, buf, key, value, line)
    return key, value


def line_text(src: Lines, k: int) -> str:
    t = src.get(k)
    return "" if t is None or t == "\x00foreign" else t


def entry_line(s: str) -> bool:
    return bool(FIELD.fullmatch(s) or SEP.fullmatch(s) or BUF.fullmatch(s) or ENTRY.fullmatch(s))


def wrapped(previous: str, s: str) -> bool:
    """Is `s` the rest of a field line a terminal wrapped? The field was left open
    (a quote or bracket), or the piece is `key=value` text of an Operator line."""
    if FIELD.fullmatch(s) or SEP.fullmatch(s) or BUF.fullmatch(s) or ENTRY.fullmatch(s):
        return False
    return unbalanced(previous) or bool(re.match(r"\w+=", s))
