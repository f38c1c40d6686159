"""The Used values kernels (native/_blocks.c) held to grammar.py: a line is read iff its
pattern fullmatches it (Python `re`), with the same groups; letters as BLOCK_LETTERS
says; whole blocks give the line reader's columns (scan.LineReader)."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from bufferhouse.errors import ParseError
from bufferhouse.parse.text import grammar as g
from bufferhouse.parse.text import native
from bufferhouse.parse.text.blocks import UsedBlocks, _whole_blocks
from bufferhouse.parse.text.native import Irregular
from bufferhouse.parse.text.scan import LineReader

pytestmark = pytest.mark.skipif(native.MISSING is not None, reason="not built")

SETTINGS = settings(max_examples=200, derandomize=True, deadline=None)
CHARS = st.characters(codec="utf-8")
#: What a byte edit puts in: the grammar's punctuation, digits, tabs, NUL, non-ASCII.
EDITS = [" ", ",", "{", "}", "<", ">", "@", "(", ")", "\t", "\x00", "0", "9", "é", "€", "𝄞", ""]
NUMBERS = [str(2**63), str(2**63 - 1), "9" * 25, "0" * 30 + "7", ""]


def column(lines: list[str]) -> pa.LargeStringArray:
    return pa.array(lines, pa.large_string())


def pattern(line: g.Line) -> st.SearchStrategy[str]:
    return st.from_regex(line.pattern, fullmatch=True, alphabet=CHARS)


@st.composite
def mutated(draw, lines: st.SearchStrategy[str]) -> str:
    """A line with up to three edits: a character replaced or inserted, a truncation, a
    number replaced by one at or past 64 bits, or dropped."""
    line = draw(lines)
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["edit", "insert", "truncate", "number"]))
        at = draw(st.integers(0, len(line)))
        if how == "edit":
            line = line[:at] + draw(st.sampled_from(EDITS)) + line[at + 1 :]
        elif how == "insert":
            line = line[:at] + draw(st.sampled_from(EDITS)) + line[at:]
        elif how == "truncate":
            line = line[:at]
        elif numbers := list(re.finditer("[0-9]+", line)):
            m = numbers[draw(st.integers(0, len(numbers) - 1))]
            line = line[: m.start()] + draw(st.sampled_from(NUMBERS)) + line[m.end() :]
    return line


def lines_of(line: g.Line) -> st.SearchStrategy[str]:
    return st.one_of(pattern(line), mutated(pattern(line)))


def letter(line: str) -> str:
    """The line's letter, as grammar.BLOCK_LETTERS declares it."""
    found = "x"
    for code, how, text in g.BLOCK_LETTERS:
        if line.startswith(text) if how == "prefix" else line == text:
            found = code
    return found


def read(lines: list[str]) -> native.UsedLines:
    return native.used_blocks(column(lines), g.BLOCK_LETTERS)


def fits(m: re.Match, group: str) -> bool:
    return int(m[group]) <= g.INT64_MAX


@SETTINGS
@given(lines_of(g.HEADER))
@example("<1 a @>")
@example("<1 a (phi) @7 >")
@example("<1 a{0 (phi)>")
@example(f"<{2**63} a>")
def test_header_read_iff_it_matches(line: str) -> None:
    assume(letter(line) == "h")  # other letters: test_letters_as_declared
    m = g.HEADER.match(line)
    if m is not None and fits(m, "id"):
        got = read([line])
        assert got.ids.tolist() == [int(m["id"])]
        assert got.names.to_pylist() == [m["name"]]
    else:
        with pytest.raises(Irregular):
            read([line])


@SETTINGS
@given(lines_of(g.POSITION))
@example("  a {0")
@example("  a ")
def test_position_read_iff_it_matches(line: str) -> None:
    assume(letter(line) == "i")
    m = g.POSITION.match(line)
    if m is not None:
        got = read(["<1 a>", line])  # a position: before its block's ' uses:' line
        assert got.position_block.tolist() == [0]
        assert got.position_name.to_pylist() == [m["name"]]
        assert got.position_idx.to_pylist() == [m["idx"] or ""]
        assert len(got.use_name) == 0
    else:
        with pytest.raises(Irregular):
            read(["<1 a>", line])


@SETTINGS
@given(lines_of(g.USE))
@example(f"  a, operand {2**63}")
@example("  a, operand  {}")
def test_use_read_iff_it_matches(line: str) -> None:
    m = g.USE.match(line)
    lines = ["<1 a>", " positions:", "  p", " uses:", line]
    assume(letter(line) == "i")
    if m is not None and fits(m, "op"):
        got = read(lines)
        assert got.use_block.tolist() == [0]
        assert got.use_name.to_pylist() == [m["name"]]
        assert got.use_op.tolist() == [int(m["op"])]
        assert got.use_idx.to_pylist() == [m["idx"] or ""]
        assert got.position_name.to_pylist() == ["p"]
    else:
        with pytest.raises(Irregular):
            read(lines)


MARKERS = [text for _, _, text in g.BLOCK_LETTERS] + [" positions", " uses", "<", " ", "x"]


@SETTINGS
@given(st.lists(st.builds(str.__add__, st.sampled_from(MARKERS), st.sampled_from(["", " ", "a"]))))
def test_letters_as_declared(lines: list[str]) -> None:
    lines = [line for line in lines if letter(line) not in "hi"]  # read: the tests above
    assert read(lines).letters.tobytes().decode() == "".join(map(letter, lines))


@SETTINGS
@given(st.lists(st.builds(str.__add__, st.sampled_from(["", " ", "  "]), st.text(CHARS))))
def test_from_texts(texts: list[str]) -> None:
    got = read([g.FROM + text for text in texts])
    spaced = [text.startswith(" ") for text in texts]
    assert got.texts.to_pylist() == [text[1:] if s else text for text, s in zip(texts, spaced)]
    assert got.spaced.tolist() == spaced
    assert got.ends.tolist() == [text.endswith(">") for text in texts]


def glued_at(line: str) -> int | None:
    """Where the reference (scan.py) splits a glued from instruction line, in characters."""
    if not line.startswith(g.FROM):
        return None
    skip = len(g.FROM) + line.startswith(" ", len(g.FROM))
    text = line[skip:]
    if not (text.startswith("%") and text.endswith(">")):
        return None
    at = [k for k in range(1, len(text)) if g.GLUED_HEADER.match(text[k:])]
    return skip + at[0] if at else None


@SETTINGS
@given(
    st.sampled_from([g.FROM, g.FROM + " ", " from", ""]),
    st.lists(st.one_of(st.sampled_from(["<", ">", "%", " ", "a", "<1 a>", "{}"]), CHARS)).map(
        "".join
    ),
    lines_of(g.GLUED_HEADER),
)
def test_glued_header_where_the_reference_splits(head: str, text: str, header: str) -> None:
    line = head + "%" + text + header
    rows, splits = native.glued(column([line]), g.FROM)
    at = glued_at(line)
    assert rows.tolist() == ([] if at is None else [0])
    assert splits.tolist() == ([] if at is None else [len(line[:at].encode())])


# -- whole blocks: the column reader against the line reader -------------------------------
HEADERS = st.one_of(pattern(g.HEADER), pattern(g.GLUED_HEADER).filter(g.HEADER.match))
USES = st.one_of(
    st.just([g.USES, g.NO_USES]),
    st.just([g.USES_UNKNOWN]),
    st.lists(pattern(g.USE), max_size=3).map(lambda uses: [g.USES, *uses]),
)
TEXTS = st.text(CHARS.filter(lambda c: c != "\n"), max_size=20)


@st.composite
def section(draw) -> tuple[list[str], bool]:
    """Used values blocks; and whether the column reader must read them (no from text
    that ends with '>' or starts with a space, no item that reads as '  (none)')."""
    texted, spaced, plain = draw(st.booleans()), draw(st.booleans()), True
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        header = draw(HEADERS)
        plain &= fits(g.HEADER.match(header), "id")
        glue = lines and lines[-1].startswith(g.FROM + " " * spaced + "%") and draw(st.booleans())
        if glue and g.GLUED_HEADER.match(header):
            lines[-1] += header
        else:
            lines.append(header)
        items = [g.POSITIONS, *draw(st.lists(pattern(g.POSITION), min_size=1, max_size=3))]
        items += draw(USES)
        plain &= g.NO_USES not in items[1:-1] and all(
            fits(m, "op") for m in map(g.USE.match, items) if m
        )
        lines += items
        if texted:
            text = draw(st.sampled_from(["", "%"])) + draw(TEXTS)
            plain &= not text.endswith(">") and not text.startswith(" ")
            lines.append(g.FROM + " " * spaced + text)
    return lines, plain


def line_reader(lines: list[str]):
    p = LineReader()
    p.begin_file()
    p.line("dump", 1, "Used values:")
    for i, line in enumerate(lines):
        p.line("dump", i + 2, line)
    return p.scanned("dump"), p.features


def column_reader(lines: list[str], cuts: list[int]):
    p = LineReader()
    blocks = UsedBlocks(p)
    cuts = sorted({min(cut, len(lines)) for cut in cuts} | {0, len(lines)})
    for start, end in itertools.pairwise(cuts):
        blocks.feed(column(lines[start:end]), 1 + start)
    blocks.end()
    return blocks.columns(), p.features


@SETTINGS
@given(section(), st.lists(st.integers(0, 40), max_size=3))
def test_blocks_as_the_line_reader_reads_them(blocks: tuple[list[str], bool], cuts: list[int]):
    lines, plain = blocks
    try:
        want, want_features = line_reader(lines)
    except ParseError:  # a number past 64 bits: the column reader leaves it to the line reader
        with pytest.raises(Irregular):
            column_reader(lines, cuts)
        return
    try:
        got, features = column_reader(lines, cuts)
    except Irregular:
        assert not plain, "the column reader must read these blocks"
        return
    for name in ("used", "positions", "uses"):
        assert got[name].combine_chunks().equals(getattr(want, name)), name
    assert features == want_features


@settings(max_examples=500, deadline=None)
@given(
    letters=st.lists(
        st.sampled_from(["hPiUf", "hPiiUn", "hPiU", "hPiUif", "b", *"hPiUnfbx\n"]), max_size=12
    ).map("".join),
    last=st.booleans(),
)
@example(letters="hPiUf\n", last=False)  # RE2's $ is the text's end, as fullmatch's
def test_whole_blocks_match_as_the_grammar_pattern_does(letters, last):
    """blocks._whole_blocks runs grammar.BLOCKS under RE2; it accepts what the pattern does."""
    want = (g.BLOCKS_TO_END if last else g.BLOCKS).fullmatch(letters.encode()) is not None
    assert _whole_blocks(np.frombuffer(letters.encode(), np.uint8), last) == want
