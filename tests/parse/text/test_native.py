"""The compiled kernels of native/_lines.c held to grammar.py: each reads exactly the lines
its pattern fullmatches (Python `re`), with the same groups, and the line splitter reads
exactly what the line reader reads."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bufferhouse.parse.text import grammar as g
from bufferhouse.parse.text import native
from bufferhouse.parse.text.native import Irregular

pytestmark = pytest.mark.skipif(native.MISSING is not None, reason=str(native.MISSING))

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def column(lines: list[str]) -> pa.LargeStringArray:
    return pa.array(lines, pa.large_string())


def mutations(pattern: str) -> st.SearchStrategy[str]:
    """Lines of the kind, and near misses: a character changed, added or dropped, the line
    cut, a number past 64 bits, spaces of other kinds."""
    line = st.from_regex(pattern, fullmatch=True).filter(lambda s: "\n" not in s)
    edit = st.tuples(
        line,
        st.integers(0, 200),
        st.sampled_from(["", " ", "\t", "\xa0", "\u3000", "{", "}", ":", "-", "9", "é", "("]),
        st.integers(0, 2),
    )

    def apply(args: tuple[str, int, str, int]) -> str:
        text, at, char, drop = args
        at = at % (len(text) + 1)
        return text[:at] + char + text[at + drop :]

    huge = line.map(lambda s: s.replace("1", "99999999999999999999", 1))
    return st.one_of(line, edit.map(apply), huge, line.map(lambda s: s[: len(s) // 2]))


def read_one(kernel, line: str):
    """The kernel's row for one line, None if it does not read it."""
    try:
        found = kernel(column([line]))
    except Irregular:
        return None
    table = found[0] if isinstance(found, tuple) else found
    return table.to_pylist()[0] if len(table) else None  # peak skips a blank line


def groups(line_kind: g.Line, line: str, numbers: tuple[str, ...]):
    """What Python's `re` reads: the groups, numbers as numbers (None if past 64 bits)."""
    m = line_kind.match(line)
    if m is None:
        return None
    out = {}
    for name, value in m.groupdict().items():
        if name in numbers and value:
            if int(value) > g.INT64_MAX:
                return None  # the line reader words it
            value = int(value)
        out[name] = value
    return out


@SETTINGS
@given(mutations(g.STEP.pattern))
@example("    0:abc\u3000")
@example("    1:a\x1cb")
@example("    00:x")
def test_the_sequence_kernel_reads_what_the_pattern_reads(line):
    assert read_one(native.sequence, line) == groups(g.STEP, line, ("step",))


@SETTINGS
@given(mutations(g.BUFFER_LIVE_RANGE.pattern))
@example("    a{}:1-2 ")
@example("    a b{}:1-2")
@example("    é{0,1}:3-4")
def test_the_live_range_kernel_reads_what_the_pattern_reads(line):
    expected = groups(g.BUFFER_LIVE_RANGE, line, ("start", "end"))
    assert read_one(native.live_ranges, line) == expected


@SETTINGS
@given(mutations(g.PEAK.pattern))
@example("    a: 1 bytes")
@example("    a{1}: 1 bytes (cumulative: 2 bytes)")
@example("    a: 1 bytes (cumulative: 2 bytes")
@example("    a: 1 bytes ")
def test_the_peak_kernel_reads_what_the_pattern_reads(line):
    expected = groups(g.PEAK, line, ("bytes", "cumulative"))
    if expected is not None:
        expected["idx"] = expected["idx"] or ""  # the wrapper's "no index"
    assert read_one(native.peak, line) == expected


def test_the_peak_kernel_skips_blank_lines_and_says_which_it_read():
    table, rows = native.peak(column(["", "    a: 1 bytes", "", "    b{}: 2 bytes", ""]))
    assert rows.tolist() == [1, 3]
    assert table["name"].to_pylist() == ["a", "b"]


def test_a_kernel_names_the_first_line_it_does_not_read():
    with pytest.raises(Irregular, match="line 1 "):
        native.sequence(column(["    0:a", "    1 :b", "    2:c"]))


def test_kernels_read_a_slice_of_a_column():
    lines = column(["x", "    0:a", "    1:b", "y"])
    assert native.sequence(lines[1:3])["name"].to_pylist() == ["a", "b"]


def reference_lines(text: bytes) -> list[str] | None:
    """The lines as the line reader takes them, None where it words an error."""
    if b"\0" in text:
        return None
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = decoded.replace("\r\n", "\n").split("\n")[:-1]
    if any("\r" in line for line in lines):
        return None
    return lines


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.binary(max_size=12),
            st.sampled_from([b"\n", b"\r\n", b"\r", b"\0", b"\xc3\xa9", b"\xc3", b"\xed\xa0\x80"]),
            # plain ASCII runs: the kernel passes over those a word (8 bytes) at a time
            st.integers(1, 20).map(lambda n: b"abcdefghijklmnopqrst"[:n]),
            st.text(max_size=8).map(str.encode),
        ),
        max_size=12,
    ).map(b"".join)
)
def test_lines_split_as_the_line_reader_reads_them(text):
    text = text + b"\n" if not text.endswith(b"\n") else text
    got = native.split_lines(text)
    assert (got.to_pylist() if got is not None else None) == reference_lines(text)


def test_a_piece_after_the_last_newline_is_no_line():
    assert native.split_lines(b"a\nb").to_pylist() == ["a"]
    assert native.split_lines(b"").to_pylist() == []


def test_kernels_refuse_offsets_that_do_not_describe_lines():
    chars = pa.py_buffer(b"abc")
    for offsets in ([0, 5], [2, 1], [-1, 2]):
        with pytest.raises(ValueError):
            native._lines.sequence(pa.array(offsets, pa.int64()).buffers()[1], chars)
    with pytest.raises(ValueError):
        native._lines.sequence(b"\0\0\0", chars)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="BTUHl ab:\u00e9", max_size=6), max_size=20))
def test_section_markers_are_the_lines_that_start_with_one(lines):
    prefixes = (b"B", b"Tu", b"  ", "\u00e9".encode())
    expected = [i for i, line in enumerate(lines) if line.encode().startswith(prefixes)]
    assert native.starting_with(column(lines), prefixes).tolist() == expected
