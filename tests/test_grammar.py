"""The one grammar (bufferhouse/parse/text/grammar.py): each line kind is one pattern
that the line reader runs with Python `re` and the column reader with Arrow's RE2.
Here both engines read every line of every fixture, and lines made to split
them, and must take the same groups from each; and each line kind must be met
in the fixtures, so no pattern is untested."""

from __future__ import annotations

import gzip

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from bufferhouse.errors import ParseError
from bufferhouse.parse.text import grammar as g
from tests.conftest import CORPUS, DATA, SAMPLES

LINES = [g_ for g_ in vars(g).values() if isinstance(g_, g.Line)]


def _fixture_lines() -> list[str]:
    lines: list[str] = []
    for path in sorted(SAMPLES.glob("*.txt")) + sorted((DATA / "edge").rglob("*.txt")):
        lines += path.read_text(encoding="utf-8").replace("\r\n", "\n").split("\n")
    for path in sorted(CORPUS.rglob("*.txt.gz"))[:40]:
        lines += gzip.decompress(path.read_bytes()).decode("utf-8").split("\n")
    return lines


FIXTURE_LINES = _fixture_lines()
#: Lines where `re` and RE2 would part if the patterns leaned on either's dialect.
TRICKY = [
    "allocation \u0663: size 4:",  # an Arabic-Indic digit: \d in `re`, not in RE2
    "allocation 1: size 99999999999999999999999:",  # past 64 bits: matches, read as an error
    "    0:a\u2003b",  # an em space inside a name: \S in `re` is Unicode-aware
    "    0:a\u00a0b",
    "    0:a\x1cb",
    "    0:naïve",
    " value: <1 a{0,1} (phi) @2> (size=8,offset=0): f32[2]{0}",
    " value: <1 a{0,1} @2> (size=8,offset=0): f32[2]{0}\u2028",
    "  a, operand 3 {1}",
    "  a, operand 3 {1} ",
    "<7 x @0>",
    "<7 x{} (phi)>",
    "    p{}: 5 bytes (cumulative: 5 bytes)",
    "      ├── a b (12.5%, total: 2 152 bytes, current: 2 152 bytes, remaining: 32 bytes)",
    "      ├── a b (12.5%, total: 2152 bytes, current: 2 152 bytes, remaining: 32 bytes)",
]


def _python_groups(line: g.Line, text: str) -> dict | None:
    m = line.match(text)
    if m is None:
        return None
    return {k: (v if v is not None else "") for k, v in m.groupdict().items()}


@pytest.mark.parametrize("line", LINES, ids=[x.kind for x in LINES])
def test_python_and_re2_read_every_line_alike(line: g.Line):
    texts = FIXTURE_LINES + TRICKY
    found = pc.extract_regex(pa.array(texts, pa.large_string()), line.re2).to_pylist()
    for text, re2 in zip(texts, found):
        assert _python_groups(line, text) == re2, (line.kind, text)


@pytest.mark.parametrize("line", g.BULK, ids=[x.kind for x in g.BULK])
def test_every_bulk_line_kind_occurs_in_the_fixtures(line: g.Line):
    assert any(line.match(text) for text in FIXTURE_LINES), line.kind


def test_the_nine_bulk_kinds_are_declared_once():
    assert len(g.BULK) == len({x.kind for x in g.BULK}) == 9


def test_sections_come_once_in_order():
    assert g.out_of_order("used", ["ba", "total"]) is None
    assert g.out_of_order("total", ["ba", "total"]) == "a second 'Total bytes used' line"
    assert "out of place" in g.out_of_order("total", ["ba", "used"])
    assert g.missing_before("lr", ["ba"]) == "used"
    assert g.missing_before("total", ["ba"]) is None
    assert [g.section_kind(p) for p, _ in g.SECTIONS] == g.SECTION_ORDER


def test_a_number_past_64_bits_names_its_field():
    m = g.VALUE.match(" value: <1 a @99999999999999999999> (size=8,offset=0): f32[2]{0}")
    with pytest.raises(ParseError) as err:
        g.VALUE.number(m, "color", "f.txt", 12)
    assert (err.value.line, err.value.message) == (
        12,
        "color 99999999999999999999 does not fit in 64 bits",
    )
