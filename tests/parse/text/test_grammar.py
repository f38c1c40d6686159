"""The one grammar (bufferhouse/parse/text/grammar.py): each line kind is one pattern
that the line reader runs with Python `re`; the compiled column reader's kernels
(parse/text/native) must read exactly the lines it matches, with the same groups. Here
every line of every fixture, and lines made to split them, go through both; and each
line kind must be met in the fixtures, so no pattern is untested."""

from __future__ import annotations

import gzip

import pytest

from bufferhouse.errors import ParseError
from bufferhouse.parse.text import grammar as g
from bufferhouse.parse.text import native
from bufferhouse.parse.text.native import Irregular
from tests.conftest import CORPUS, DATA, SAMPLES
from tests.parse.text import test_native, test_native_allocations, test_native_blocks

LINES = [g_ for g_ in vars(g).values() if isinstance(g_, g.Line)]


def _fixture_lines() -> list[str]:
    lines: list[str] = []
    for path in sorted(SAMPLES.glob("*.txt")) + sorted((DATA / "edge").rglob("*.txt")):
        lines += path.read_text(encoding="utf-8").replace("\r\n", "\n").split("\n")
    for path in sorted(CORPUS.rglob("*.txt.gz"))[:40]:
        lines += gzip.decompress(path.read_bytes()).decode("utf-8").split("\n")
    return lines


FIXTURE_LINES = _fixture_lines()
#: Lines where a hand-written reader and `re` could part.
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


def _block_line(kind: g.Line, text: str, before: list[str]) -> None:
    """A header, position or use line read by the Used values kernel iff `re` reads it,
    with the same groups (after `before`, the lines that give it its place)."""
    m = kind.match(text)
    numbers = [n for n in kind.numbers if n in ("id", "op")]
    if m is None or any(int(m[n]) > g.INT64_MAX for n in numbers):
        with pytest.raises(Irregular):
            test_native_blocks.read([*before, text])
        return
    got = test_native_blocks.read([*before, text])
    if kind is g.HEADER:
        assert (got.ids.tolist(), got.names.to_pylist()) == ([int(m["id"])], [m["name"]])
    elif kind is g.POSITION:
        assert got.position_name.to_pylist() == [m["name"]]
        assert got.position_idx.to_pylist() == [m["idx"] or ""]
    else:
        assert got.use_name.to_pylist() == [m["name"]]
        assert (got.use_op.tolist(), got.use_idx.to_pylist()) == ([int(m["op"])], [m["idx"] or ""])


#: Each bulk kind's check against `re` (tests/parse/text/test_native*.py hold them on made lines).
_KERNEL_CHECKS = {
    "allocation": lambda text: test_native_allocations.check([text]),
    "sequence step": lambda text: _same(g.STEP, native.sequence, text),
    "BufferLiveRange entry": lambda text: _same(g.BUFFER_LIVE_RANGE, native.live_ranges, text),
    "peak entry": lambda text: _same(g.PEAK, native.peak, text),
    "value header": lambda text: text.startswith("<") and _block_line(g.HEADER, text, []),
    "position": lambda text: _block_line(g.POSITION, text, ["<1 a>"]),
    "use": lambda text: _block_line(g.USE, text, ["<1 a>", " positions:", "  p", " uses:"]),
}
_KERNEL_CHECKS["value"] = _KERNEL_CHECKS["cross-color value"] = _KERNEL_CHECKS["allocation"]


def _same(kind: g.Line, kernel, text: str) -> None:
    numbers = tuple(kind.numbers)
    expected = test_native.groups(kind, text, numbers)
    if kind is g.PEAK and expected is not None:
        expected["idx"] = expected["idx"] or ""
    assert test_native.read_one(kernel, text) == expected, text


@pytest.mark.skipif(native.MISSING is not None, reason=str(native.MISSING))
@pytest.mark.parametrize("line", g.BULK, ids=[x.kind for x in g.BULK])
def test_the_compiled_kernels_read_every_line_as_re_does(line: g.Line):
    for text in FIXTURE_LINES + TRICKY:
        if line in (g.POSITION, g.USE) and test_native_blocks.letter(text) != "i":
            continue  # a line of another letter is not read as one of these
        _KERNEL_CHECKS[line.kind](text)


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
