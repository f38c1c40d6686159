"""The buffer-assignment text grammar, declared once: read this file to learn the format.

Every line kind of a dump (docs/format.md §3-§5, §9) is one `Line` below: its
pattern with named groups, what an error says was expected, and the
number fields it carries. The section markers are `SECTIONS`, in the order
XLA prints them; the markers inside a section are the constants beside
them. Two readers execute it: the line reader (scan.py, `Line.match`, Python
`re`), which reads every era and words every error, and the compiled column
reader (vector.py and blocks.py over the C kernels of native/), which reads the
bulk line kinds exactly as `re` reads them and hands anything else to the line
reader. tests/parse/text/test_grammar.py and tests/parse/text/test_native*.py hold the kernels to these
patterns. The invariants over what these lines hold are declared once too, in
rules.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bufferhouse.errors import ParseError

#: Numbers are 64-bit (docs/format.md §0: sizes past 2^31 occur); more is an error at the line.
INT64_MAX = (1 << 63) - 1


@dataclass(frozen=True)
class Line:
    """One kind of line: `pattern` must match the whole line (without its newline)."""

    kind: str
    pattern: str
    expected: str  # what the error says when a line of this kind does not match
    numbers: dict[str, str] = field(default_factory=dict)  # group -> field name in errors

    def __post_init__(self) -> None:
        object.__setattr__(self, "_compiled", re.compile(self.pattern))

    def match(self, line: str) -> re.Match | None:
        """The line's groups (Python `re`), or None."""
        return self._compiled.fullmatch(line)  # type: ignore[attr-defined]

    def parse(self, path: str, lineno: int, line: str) -> re.Match:
        """The line's groups, or ParseError at the line saying what was expected."""
        m = self.match(line)
        if m is None:
            raise ParseError(path, lineno, f"expected {self.expected}", line)
        return m

    def number(self, m: re.Match, group: str, path: str, lineno: int) -> int | None:
        """Group `group` of `m` as a 64-bit number (None if the group did not take part)."""
        text = m.group(group)
        if not text:
            return None
        return number(text, self.numbers.get(group, group), path, lineno, m.string)


#: The most digits an int64 prints (9223372036854775807). A longer run of digits is
#: past 64 bits whatever it holds, and is refused before int() sees it: int() of more
#: than 4,300 digits raises ValueError (CPython's limit), and is quadratic below it.
INT64_DIGITS = len(str(INT64_MAX))


def number(text: str, what: str, path: str, lineno: int, line: str) -> int:
    """A printed number; past 64 bits it is an error naming the file, line and field
    (however many digits it has: a long one is shown by its first digits and length)."""
    sign, digits = ("-", text[1:]) if text[:1] == "-" else ("", text.lstrip("+"))
    digits = digits.lstrip("0") or "0"
    value = int(sign + digits) if len(digits) <= INT64_DIGITS else None
    if value is None or value > INT64_MAX:
        shown = text if len(text) <= 40 else f"{text[:20]}... ({len(digits)} digits)"
        raise ParseError(path, lineno, f"{what} {shown} does not fit in 64 bits", line)
    return value


# -- shared pieces --------------------------------------------------------------
#: A ShapeIndex, `{}`, `{0}`, `{1,2}`.
INDEX = r"\{[0-9,]*\}"
#: HloValue::ToShortString (docs/format.md §3.2): `<id name[{index}][ (phi)][ @color]>`.
SHORT = (
    r"<(?P<id>[0-9]+) (?P<name>[^ {}<>]+)(?P<idx>" + INDEX + r")?(?P<phi> \(phi\))?"
    r"(?: @(?P<color>[0-9]+))?>"
)
_SHORT_NUMBERS = {"id": "value id", "color": "color"}
#: Numbers with spaces between groups of three (the stack-trace tree, docs/format.md §5.4).
_SPACED = r"[0-9]{1,3}(?: [0-9]{3})*"

# -- §1 section markers, in the order XLA prints them (over one file or the split three) ----
#: (line prefix, kind). A marker comes once; none may come before one printed earlier.
SECTIONS = (
    ("BufferAssignment:", "ba"),  # §3 allocations
    ("Total bytes used:", "total"),  # §9 totals (not printed before 2019-10)
    ("Used values:", "used"),  # §4 one block per value
    ("HloLiveRange", "lr"),  # §5 live ranges (2021-04+), or 'HloLiveRange not available'
    ("  InstructionSequence:", "seq"),  # §5.1
    ("  BufferLiveRange:", "blr"),  # §5.2
    ("  Live ranges at ", "peak"),  # §5.3
    ("  Stack trace breakdown", "trace"),  # §5.4 (2025-07+)
)
SECTION_ORDER = [kind for _, kind in SECTIONS]
#: Sections that a later marker needs before it (the optional ones are 'total' and 'trace').
REQUIRED = ["ba", "used", "lr", "seq", "blr", "peak"]
#: warehouse `modules.sections` name of each marker kind ('lr' is 'live_range' or
#: 'live_range_unavailable', by its line).
SECTION_NAMES = {
    "ba": "allocations",
    "total": "totals",
    "used": "used_values",
    "peak": "peak",
    "trace": "stack_trace",
}
#: How errors call each marker.
_CALLED = {
    "ba": "'BufferAssignment:' section",
    "total": "'Total bytes used' line",
    "used": "'Used values:' section",
    "lr": "HloLiveRange section",
    "seq": "'InstructionSequence:' list",
    "blr": "'BufferLiveRange:' list",
    "peak": "'Live ranges at T (peak):' list",
    "trace": "stack-trace breakdown",
}


#: A line no kind above matches that a newer XLA may print between sections or between
#: allocations: at column 0, a capitalised word that starts no known line, then text;
#: at most UNKNOWN_LINE_MAX characters (docs/format.md §1). Kept and warned about.
_UNKNOWN_LINE = re.compile(r"[A-Z][A-Za-z0-9_-]*(?:[ :][^\x00-\x1f]*)?")
UNKNOWN_LINE_MAX = 500
_LINE_WORDS = {prefix.split()[0].rstrip(":") for prefix, _ in SECTIONS} | {"allocation"}


def unknown_line(line: str) -> bool:
    """Whether an unmatched line is well formed enough to be a newer XLA's, not damage."""
    if len(line) > UNKNOWN_LINE_MAX or not _UNKNOWN_LINE.fullmatch(line):
        return False
    return re.split(r"[ :]", line, maxsplit=1)[0] not in _LINE_WORDS


def section_kind(line: str) -> str | None:
    """The section a marker line opens, None if the line is no marker."""
    for prefix, kind in SECTIONS:
        if line.startswith(prefix):
            return kind
    return None


def out_of_order(kind: str, seen: list[str]) -> str | None:
    """Why marker `kind` may not come after the markers `seen` (which are in order),
    or None if it may: each comes once, none before one printed earlier."""
    if kind in seen:
        return f"a second {_CALLED[kind]}"
    if seen and SECTION_ORDER.index(seen[-1]) > SECTION_ORDER.index(kind):
        return f"{_CALLED[kind]} out of place: XLA prints it before the {_CALLED[seen[-1]]}"
    return None


def missing_before(kind: str, seen: list[str]) -> str | None:
    """A required section that should have come before marker `kind` (the readers leave
    a missing section to finish.py, which says which file to look for)."""
    rank = SECTION_ORDER.index(kind)
    for required in REQUIRED:
        if SECTION_ORDER.index(required) < rank and required not in seen:
            return required
    return None


# -- §3 BufferAssignment: allocations --------------------------------------------
#: §3.1, with the pointer of XLA before 2022-09; `rest` is the attribute list (ALLOC_ATTRIBUTES).
ALLOCATION = Line(
    "allocation",
    r"allocation (?P<index>[0-9]+): (?:(?P<address>0x[0-9a-fA-F]+), )?size (?P<size>[0-9]+)"
    r"(?P<rest>.*):",
    "'allocation N: size S[, attributes]:'",
    {"index": "allocation index", "size": "size"},
)
#: §3.2 one value placed in the allocation above.
VALUE = Line(
    "value",
    r" value: " + SHORT + r" \(size=(?P<size>[0-9]+),offset=(?P<offset>[0-9]+)\): (?P<shape>.*)",
    "' value: <id name[{index}][ (phi)][ @color]> (size=S,offset=O): SHAPE'",
    {**_SHORT_NUMBERS, "size": "size", "offset": "offset"},
)
#: §3.3 (2026-06+) after the values: those reused by buffers of another color.
CROSS_HEAD = " reused by buffers of a different color:"
CROSS = Line(
    "cross-color value",
    r"  value: " + SHORT + r" \(color=(?P<other>[0-9]+)\)",
    "'  value: <id name @color> (color=N)'",
    {**_SHORT_NUMBERS, "other": "color"},
)
#: §3.1 attributes, in this order, each at most once (parsed by alloc_attributes).
FLAGS = ("constant", "thread-local", "maybe-live-out", "preallocated-temp")

# -- §9 totals ----------------------------------------------------------------------
TOTAL = Line(
    "total",
    r"Total bytes used: (?P<total>[0-9]+)(?: \((?P<human>[^)]*)\))?",
    "'Total bytes used: N (human)'",
    {"total": "total"},
)

# -- §4 Used values: per value a header, positions, uses, the defining instruction --------
HEADER = Line("value header", SHORT, "a value header '<id name @color>'", _SHORT_NUMBERS)
POSITIONS = " positions:"
USES = " uses:"
USES_UNKNOWN = " uses are not initialized yet."
NO_USES = "  (none)"  # 2026-06+
FROM = " from instruction:"  # then a space (2024-01+) and the instruction text
POSITION = Line(
    "position",
    r"  (?P<name>[^ ,{}]+)(?: (?P<idx>" + INDEX + r"))?",
    "a position '  NAME[ {index}]'",
)
USE = Line(
    "use",
    r"  (?P<name>[^ ,{}]+), operand (?P<op>[0-9]+)(?: (?P<idx>" + INDEX + r"))?",
    "a use '  NAME, operand N[ {index}]'",
    {"op": "operand"},
)
#: The next value's header glued to the end of a from instruction text (2024-01-16 ..
#: 2024-11-01, when XLA printed no newline after the text).
GLUED_HEADER = Line(
    "glued value header",
    r"<[0-9]+ [A-Za-z_][A-Za-z0-9_.\-]*(?:" + INDEX + r")?(?: \(phi\))?(?: @[0-9]+)?>",
    "a value header",
)
#: A block as a string of one letter per line, for the column reader: (letter, how the
#: line is recognised, text); a later entry overrides an earlier one.
BLOCK_LETTERS = (
    ("i", "prefix", "  "),  # a position or a use
    ("h", "prefix", "<"),  # the value header
    ("f", "prefix", FROM),
    ("P", "equal", POSITIONS),
    ("U", "equal", USES),
    ("U", "equal", USES_UNKNOWN),
    ("n", "equal", NO_USES),
    ("b", "equal", ""),
)
#: The blocks: header, ' positions:', one or more positions, ' uses:' (or not
#: initialized), '  (none)' or the uses, the from instruction line (absent before
#: 2021-09). The line reader's states (scan.py) follow the same sequence.
BLOCKS = re.compile(rb"(?:hPi+U(?:n|i*)f?)*")
#: ... and where the section ends, blank lines.
BLOCKS_TO_END = re.compile(rb"(?:hPi+U(?:n|i*)f?)*b*")


# -- §5 HloLiveRange ---------------------------------------------------------------
LIVE_RANGE = Line(
    "live range header",
    r"HloLiveRange \(max (?P<max>[0-9]+)\):",
    "'HloLiveRange (max N):'",
    {"max": "max"},
)
LIVE_RANGE_UNAVAILABLE = "HloLiveRange not available"
SEQUENCE_HEAD = "  InstructionSequence:"
#: §5.1 the schedule, numbered from 0.
STEP = Line(
    "sequence step",
    r"    (?P<step>[0-9]+):(?P<name>\S+)",
    "'    N:instruction' in InstructionSequence",
    {"step": "step"},
)
BUFFER_LIVE_RANGE_HEAD = "  BufferLiveRange:"
#: §5.2 one value's live range, start and end steps inclusive.
BUFFER_LIVE_RANGE = Line(
    "BufferLiveRange entry",
    r"    (?P<name>[^ {}:]+)(?P<idx>" + INDEX + r"):(?P<start>[0-9]+)-(?P<end>[0-9]+)",
    "'    name{index}:start-end' in BufferLiveRange",
    {"start": "start", "end": "end"},
)
#: §5.3 the live set at the peak step, largest first.
PEAK_HEAD = Line(
    "peak header",
    r"  Live ranges at (?P<time>[0-9]+) \(peak\):",
    "'  Live ranges at T (peak):'",
    {"time": "peak time"},
)
PEAK = Line(
    "peak entry",
    r"    (?P<name>[^ {}:]+)(?P<idx>" + INDEX + r")?: (?P<bytes>[0-9]+) bytes"
    r"(?: \(cumulative: (?P<cumulative>[0-9]+) bytes\))?",
    "'    name{index}: N bytes[ (cumulative: M bytes)]'",
    {"bytes": "bytes", "cumulative": "cumulative"},
)
#: §5.4 (2025-07+) the peak's bytes by stack frame, a tree.
TRACE_HEAD = Line(
    "stack-trace header",
    r"  Stack trace breakdown for peak usage: (?P<total>" + _SPACED + ") bytes",
    "'Stack trace breakdown ...: N bytes'",
)
TRACE = Line(
    "stack-trace line",
    r"(?P<indent>  (?:    |│   )*)(?:  |├── |└── )(?P<name>.*) \((?P<pct>[0-9]+\.[0-9])%, total: "
    r"(?P<total>" + _SPACED + r") bytes, current: (?P<current>" + _SPACED + r") bytes, "
    r"remaining: (?P<remaining>" + _SPACED + r") bytes\)",
    "a stack-trace tree line '... (P%, total: ...)'",
)

# -- §7 the memory-usage report (only its totals are read) ----------------------------
REPORT_SPACE = Line(
    "memory space",
    r"Memory Space: (?P<name>.*) \(color=(?P<color>[0-9]+)\)",
    "'Memory Space: NAME (color=N)'",
    {"color": "color"},
)
REPORT_TOTAL = Line(
    "memory space total",
    r"Total bytes: (?P<total>[0-9]+)(?: \((?P<human>[^)]*)\))?",
    "'Total bytes: N' after 'Memory Space: ...'",
    {"total": "total"},
)

#: The nine bulk line kinds (issue 20), for a reader's index.
BULK = (ALLOCATION, VALUE, CROSS, HEADER, POSITION, USE, STEP, BUFFER_LIVE_RANGE, PEAK)


def alloc_attributes(path: str, lineno: int, line: str, rest: str) -> dict[str, object]:
    """§3.1 attributes: `, color N, page N, parameter N, shape |S| at ShapeIndex {i},
    output shape is |S|, constant, thread-local, maybe-live-out, preallocated-temp`.

    An attribute this grammar does not know but that is well formed (a word, then
    anything up to the next `, `; a newer XLA's) is kept in `unknown`, in order: the
    module loads and says so (docs/format.md §3.1). Anything else is malformed."""
    flags: dict[str, object] = {}
    pos = 0
    n = len(rest)
    while pos < n:
        if not rest.startswith(", ", pos):
            raise ParseError(
                path,
                lineno,
                f"expected ', ' before an allocation attribute at column {len(line) - n + pos}"
                + (" (the size is not a whole number of bytes?)" if pos == 0 else ""),
                line,
            )
        pos += 2
        if rest.startswith("color ", pos):
            pos = _numbered(flags, "color", _COLOR, rest, pos, path, lineno, line)
        elif rest.startswith("page ", pos):
            pos = _numbered(flags, "page", _PAGE, rest, pos, path, lineno, line)
        elif rest.startswith("parameter ", pos):
            pos = _numbered(flags, "parameter_number", _PARAMETER, rest, pos, path, lineno, line)
            if rest.startswith(", shape |", pos):
                end = rest.find("|", pos + 9)
                if end < 0:
                    raise ParseError(
                        path, lineno, "unterminated '|shape|' in a parameter attribute", line
                    )
                flags["parameter_shape"] = rest[pos + 9 : end]
                pos = end + 1
            m = _AT_INDEX.match(rest, pos)
            if m:
                flags["parameter_shape_index"] = m.group(1)
                pos = m.end()
        elif rest.startswith("output shape is |", pos):
            end = rest.find("|", pos + 17)
            if end < 0:
                raise ParseError(path, lineno, "unterminated 'output shape is |...|'", line)
            flags["output_shape"] = rest[pos + 17 : end]
            pos = end + 1
        else:
            pos = _flag_or_unknown(flags, rest, pos, path, lineno, line)
    return flags


def _numbered(
    flags: dict[str, object],
    key: str,
    pattern: re.Pattern,
    rest: str,
    pos: int,
    path: str,
    lineno: int,
    line: str,
) -> int:
    """`WORD N` at `pos` into flags[key]; the position after it."""
    m = pattern.match(rest, pos)
    if not m:
        raise ParseError(path, lineno, f"expected '{pattern.pattern.split(' ')[0]} N'", line)
    flags[key] = number(m.group(1), key.split("_")[0], path, lineno, line)
    return m.end()


def _flag_or_unknown(
    flags: dict[str, object], rest: str, pos: int, path: str, lineno: int, line: str
) -> int:
    """A known flag word at `pos`, or a well-formed unknown attribute kept in
    flags['unknown']; the position after it."""
    n = len(rest)
    for word in FLAGS:
        if rest.startswith(word, pos) and (
            pos + len(word) == n or rest.startswith(",", pos + len(word))
        ):
            flags[word] = True
            return pos + len(word)
    m = _UNKNOWN_ATTRIBUTE.match(rest, pos, pos + _UNKNOWN_MAX + 1)
    if m is None or _known_word(m.group(0)) or m.end() - pos > _UNKNOWN_MAX:
        raise ParseError(
            path,
            lineno,
            f"malformed allocation attribute '{rest[pos:].split(',')[0][:60]}' (expected"
            " 'color N', 'page N', 'parameter N...', 'output shape is |S|', a flag, or a"
            f" new attribute: a word and text, at most {_UNKNOWN_MAX} characters)",
            line,
        )
    unknown = flags.setdefault("unknown", [])
    unknown.append(m.group(0))  # type: ignore[union-attr]
    return m.end()


_COLOR = re.compile(r"color ([0-9]+)")
#: The page of XLA's multi-page assignment (2026-06+, `page 0` on every line; docs/format.md §3.1).
_PAGE = re.compile(r"page ([0-9]+)")
#: An attribute a newer XLA may print: a lower-case word, then text up to the next `, `
#: (a `|shape|` inside may hold commas).
#: ... at most this long; a known word followed by other text is malformed, not unknown.
_UNKNOWN_MAX = 200
_KNOWN_WORDS = {*FLAGS, "color", "page", "parameter", "output", "shape"}
_UNKNOWN_ATTRIBUTE = re.compile(r"[a-z][a-z0-9_-]*(?:(?: |=)(?:\|[^|]*\||[^,|])*)?")
_PARAMETER = re.compile(r"parameter ([0-9]+)")


def _known_word(attribute: str) -> bool:
    """Whether an attribute starts with a word the grammar knows (then it is malformed)."""
    return re.split(r"[ =]", attribute, maxsplit=1)[0] in _KNOWN_WORDS


_AT_INDEX = re.compile(r" at ShapeIndex (" + INDEX + r")")
