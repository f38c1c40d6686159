"""The BufferAssignment kernel (native/_allocations.c) held to grammar.py: it classifies
each line of the section as vector.py always did (by the constants below, written
from grammar.py and scan.py), and reads an allocation header, ` value:` or cross-color
`  value:` line exactly when the kind's `Line.match` (Python `re`) fullmatches it and the
numbers the line reader reads fit in 64 bits, with the same groups. Lines come from
the patterns themselves and from mutations of them."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bufferhouse.parse.discover import discover
from bufferhouse.parse.text import grammar as g
from bufferhouse.parse.text import native, vector
from bufferhouse.parse.text.native import Irregular
from tests.conftest import DATA

pytestmark = pytest.mark.skipif(bool(native.MISSING), reason=str(native.MISSING))

#: Each bulk kind's pattern, and the groups the line reader reads as 64-bit numbers
#: (scan.py: of a cross-color line, only the id).
PATTERNS = {
    native.ALLOCATION: (g.ALLOCATION, ("index", "size")),
    native.VALUE: (g.VALUE, ("id", "color", "size", "offset")),
    native.CROSS: (g.CROSS, ("id",)),
}


def classify(line: str) -> int:
    """vector.py's classes, in its order."""
    if line.startswith(" value: "):
        return native.VALUE
    if line.startswith("allocation "):
        return native.ALLOCATION
    if line == g.CROSS_HEAD:
        return native.CROSS_HEAD
    if line.startswith("  value: "):
        return native.CROSS
    return native.OTHER


def expected(line: str) -> dict | None:
    """The row the kernel gives for a bulk line (None: it must not read it): numbers as
    ints (None if absent), phi as a flag, other groups as text ("" if absent)."""
    pattern, numbers = PATTERNS[classify(line)]
    m = pattern.match(line)
    if m is None or any(m[n] and int(m[n]) > g.INT64_MAX for n in numbers):
        return None
    row = {}
    for name, text in m.groupdict().items():
        if name == "phi":
            row[name] = text is not None
        elif name in numbers:
            row[name] = None if text is None else int(text)
        else:
            row[name] = text or ""
    return row


def read(lines: list[str]) -> native.Allocations:
    return native.allocations(pa.array(lines, pa.large_string()))


def check(lines: list[str]) -> None:
    """The kernel over `lines` against the oracle: Irregular iff a bulk line is not read,
    else each line's kind and each bulk kind's rows in order."""
    kinds = [classify(line) for line in lines]
    rows = [expected(line) if kind in PATTERNS else None for line, kind in zip(lines, kinds)]
    if any(row is None for row, kind in zip(rows, kinds) if kind in PATTERNS):
        with pytest.raises(Irregular):
            read(lines)
        return
    got = read(lines)
    assert got.kinds.tolist() == kinds
    tables = {native.ALLOCATION: got.allocs, native.VALUE: got.values, native.CROSS: got.cross}
    for kind, table in tables.items():
        want = [row for row, k in zip(rows, kinds) if k == kind]
        assert table.to_pylist() == want


def _encodable(line: str) -> bool:
    try:
        line.encode()
    except UnicodeEncodeError:  # a lone surrogate: no line of a file holds one
        return False
    return True


def lines_of(kind: int) -> st.SearchStrategy[str]:
    return st.from_regex(PATTERNS[kind][0].pattern, fullmatch=True).filter(_encodable)


VALID = st.one_of(*(lines_of(kind) for kind in PATTERNS))

#: What a mutation puts in: the grammar's punctuation, digits, tabs, NUL and newline,
#: Unicode spaces (Python's `\s`), other non-ASCII characters.
ODD = st.sampled_from([*"0123456789 :,{}<>()@=x\t\0\n", "é", "\xa0", "\u2028", "😀"])
HUGE_NUMBERS = [
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551616",
    "000000000000000000000042",
]
HUGE = st.sampled_from(HUGE_NUMBERS)
#: Where the patterns' choices are made: at their punctuation and at the line's ends.
PUNCTUATION = set(" :,{}<>()@=x")


def _digit_run(line: str, at: int) -> tuple[int, int]:
    start = end = at
    while end < len(line) and "0" <= line[end] <= "9":
        end += 1
    while start > 0 and "0" <= line[start - 1] <= "9":
        start -= 1
    return start, end


@st.composite
def mutated(draw, lines: st.SearchStrategy[str]) -> str:
    """A line with one or two edits: a character replaced, inserted or removed, the line
    cut, or a digit run made a number at or past int64; mostly where the pattern has a
    choice to make."""
    line = draw(lines)
    for _ in range(draw(st.integers(1, 2))):
        marks = [i for i, ch in enumerate(line) if ch in PUNCTUATION] + [0, len(line)]
        marks += [len(line) - 1] if line else []
        at = draw(st.one_of(st.sampled_from(marks), st.integers(0, len(line))))
        edit = draw(st.sampled_from(["replace", "insert", "delete", "truncate", "huge"]))
        digits = [i for i, ch in enumerate(line) if "0" <= ch <= "9"]
        if edit == "replace":
            line = line[:at] + draw(ODD) + line[at + 1 :]
        elif edit == "insert":
            line = line[:at] + draw(ODD) + line[at:]
        elif edit == "delete":
            line = line[:at] + line[at + 1 :]
        elif edit == "truncate":
            line = line[:at]
        elif digits:
            start, end = _digit_run(line, draw(st.sampled_from(digits)))
            line = line[:start] + draw(HUGE) + line[end:]
    return line


#: Lines of any kind: the prefixes that decide a kind, whole, cut or grown, then text.
PREFIXES = st.sampled_from(
    [
        *(" value: ", " value:", "  value: ", "   value: ", "allocation ", "allocation", "", " "),
        *(g.CROSS_HEAD, g.CROSS_HEAD[:-1], g.CROSS_HEAD + " ", "BufferAssignment stats:"),
    ]
)
ANY = st.one_of(
    VALID,
    mutated(VALID),
    st.builds(lambda p, t: p + t, PREFIXES, st.text(ODD, max_size=12)),
    PREFIXES,
)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


KINDS = pytest.mark.parametrize("kind", list(PATTERNS), ids=["allocation", "value", "cross"])


@KINDS
@SETTINGS
@given(data=st.data())
def test_every_line_the_patterns_make_is_read_with_its_groups(kind, data):
    check([data.draw(lines_of(kind))])


#: What an edit puts in (a smaller ODD: every neighbour of a line is tried).
EDITS = [*"09 :,{}<>()@=x\t\0\n", "é", "\xa0", "😀"]


def neighbours(line: str) -> set[str]:
    """Every line one edit away: a character removed, replaced or inserted, the line cut,
    or a run of digits made a number at or past int64."""
    near = {line[:at] for at in range(len(line))}
    near |= {line[:at] + line[at + 1 :] for at in range(len(line))}
    for at in range(len(line) + 1):
        near |= {line[:at] + ch + line[at + 1 :] for ch in EDITS if at < len(line)}
        near |= {line[:at] + ch + line[at:] for ch in EDITS}
    for at, ch in enumerate(line):
        if "0" <= ch <= "9":
            start, end = _digit_run(line, at)
            near |= {line[:start] + huge + line[end:] for huge in HUGE_NUMBERS}
    return near


def refused(line: str) -> bool:
    """The kernel stops at this line (its bare result: a table per line costs too much)."""
    bad, *_ = native._allocations.allocations(*native._buffers(pa.array([line], pa.large_string())))
    return bad == 0


@KINDS
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_a_line_one_edit_away_is_read_iff_its_pattern_matches(kind, data):
    near = sorted(filter(_encodable, neighbours(data.draw(lines_of(kind)))))
    read = [line for line in near if classify(line) not in PATTERNS or expected(line)]
    check(read)  # all of them at once: kinds and rows in order
    assert [line for line in near if line not in set(read) and not refused(line)] == []


@SETTINGS
@given(st.lists(ANY, max_size=12))
def test_a_section_body_is_classified_and_read_in_order(lines):
    check(lines)


@pytest.mark.parametrize(
    "line",
    [
        "allocation 1: size 12:",  # rest ""
        "allocation 1: size 12::",  # rest ":" (greedy, to the last ':')
        "allocation 1: size 12: x",  # the ':' must end the line
        "allocation 1: size 12",
        "allocation 1: size :",
        "allocation 1: 0x, size 1:",
        "allocation 1: 0xfA, size 1, color 1:",
        "allocation 1: 0xg, size 1:",
        "allocation 1: size 12, a\nb:",  # `.` takes no newline
        "allocation 9223372036854775807: size 9223372036854775808:",
        " value: <1 a> (size=1,offset=0): ",
        " value: <1 a\0(b)@c> (size=1,offset=0): s",  # the name class takes NUL
        " value: <1 a{1,2} (phi) @2> (size=1,offset=0): f32[]",
        " value: <1 a{1,2}{3} (size=1,offset=0): s",
        " value: <1 a{x}> (size=1,offset=0): s",
        " value: <1 a (phi) (phi)> (size=1,offset=0): s",
        " value: <1 a @> (size=1,offset=0): s",
        " value: <1 a @99999999999999999999> (size=1,offset=0): s",
        " value: <1 é\t> (size=1,offset=0): s\n",
        "  value: <3 a @1> (color=2)",
        "  value: <3 a @99999999999999999999> (color=99999999999999999999)",  # read: text
        "  value: <99999999999999999999 a> (color=2)",
        "  value: <3 a> (color=2) ",
        g.CROSS_HEAD,
        g.CROSS_HEAD + " ",
    ],
)
def test_lines_at_the_edges_of_the_patterns(line):
    check([line])


def test_the_patterns_edges_are_read_as_well_as_refused():
    """The edge cases above are not all refusals: the oracle reads most of them."""
    got = read(["allocation 1: 0xfA, size 1, color 1:", "allocation 2: size 3::"])
    assert got.allocs.to_pylist() == [
        {"index": 1, "address": "0xfA", "size": 1, "rest": ", color 1"},
        {"index": 2, "address": "", "size": 3, "rest": ":"},
    ]


def test_without_the_compiled_reader_the_column_reader_reads_nothing(monkeypatch):
    (module,) = discover([DATA / "edge" / "gpu_split_2026"])  # with a cross-color block
    files = module.dump_files()
    assert "cross_color" in vector.scan(files).features
    monkeypatch.setattr(native, "MISSING", "not built")
    assert vector.scan(files) is None
