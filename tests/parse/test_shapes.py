"""Shape text parsing, byte sizes and printing (docs/format.md §6, §8.3, §11)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bufferhouse.parse import shapes
from bufferhouse.parse.shapes import (
    Shape,
    ShapeSyntaxError,
    byte_size,
    element_bytes,
    format_without_layout,
    parse_shape,
    parse_shape_at,
    parse_shape_index,
    subshape,
)
from tests.conftest import DATA

# Distinct shapes from the dev corpus and the samples (value lines, |…| headers, HLO results).
CORPUS_SHAPES = (DATA / "shapes.txt").read_text().splitlines()

# Hand-written shapes for features the corpus lacks (docs/format.md §6.1–6.2, §11.4–11.6).
EDGE_SHAPES = [
    "f32[]",
    "u32[]{:T(128)S(6)}",
    "()",
    "(f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[])",
    "(f32[], (s32[], (u8[2]{0}, pred[])), f32[1,2]{0,1})",
    "(f32[], f32[], f32[], f32[], f32[], /*index=5*/(s8[], s8[], s8[], s8[], s8[], "
    "/*index=5*/s8[]), f32[])",
    "f32[<=128,4]{1,0}",
    "f32[?,4]",
    "f32[2,<=3]",
    "s4[3,5]{1,0:E(4)}",
    "s4[16,256]{0,1:T(8,128)(8,1)E(4)S(1)}",
    "u8[2,3,4,5]{3,1,0,2:T(8,128)(8,1)E(4)S(1)}",
    "bf16[8,2048,128]{2,1,0:T(8,128)(2,1)}",
    "f32[1024]{0:T(1024)S(1)}",
    "f32[8,128]{1,0:T(8,128)L(1024)}",
    "f32[8,128]{1,0:T(8,*)(2,1)}",
    "f32[100]{0:D(C)#(s32)*(s32)}",
    "f32[4,8]{1,0:SC(0:1,2)(1:3)}",
    "f32[4,8]{1,0:T(8,128)P(f32[8,128]{1,0:T(8,128)S(1)})}",
    "f32[<=4,8]{1,0:T(8,128)M(64)}",
    "f32[10]sparse{10}",
    "f32[10]invalid{}",
    "b(f32[2,3]{1,0})",
    "token[]",
    "opaque[]",
    "f8e4m3b11fnuz[3]{0}",
    "s64[8589934592]{0}",
    "(f32[2]{0:T(128)}, b(u32[4]{0}), token[])",
]


def _slow(text: str) -> Shape:
    parser = shapes._Parser(text, 0)
    shape = parser.shape()
    if parser.pos != len(text):
        raise ShapeSyntaxError("end of shape", text, parser.pos)
    return shape


def _strip_layouts(text: str) -> str:
    """Independent layout stripper: drop every balanced {...} (and sparse/invalid prefix)."""
    for old in ("sparse{", "invalid{"):
        text = text.replace(old, "{")
    out, depth = [], 0
    for c in text:
        depth += c == "{"
        if depth == 0:
            out.append(c)
        depth -= c == "}"
    return "".join(out)


def test_corpus_data_is_diverse():
    assert len(CORPUS_SHAPES) >= 150
    assert any("/*index=5*/" in s for s in CORPUS_SHAPES)
    assert any(":T(" in s for s in CORPUS_SHAPES)
    assert any("S(1)" in s for s in CORPUS_SHAPES)


@pytest.mark.parametrize("text", CORPUS_SHAPES + EDGE_SHAPES)
def test_fast_path_agrees_with_recursive_descent(text):
    """Where the fast path matches, it agrees with the general parser (for the others
    both sides are that parser: test_parsed_shapes_say_what_the_text_says checks them)."""
    slow = _slow(text)
    assert parse_shape(text) == slow
    assert parse_shape.__wrapped__(text) == slow
    assert parse_shape_at(text + " x(", 0) == (slow, len(text))
    assert parse_shape_at("= " + text, 2) == (slow, len(text) + 2)


def _split_top(text: str) -> list[str]:
    """Top-level comma-separated parts (brackets of every kind balanced)."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += c in "([{"
        depth -= c in ")]}"
        if c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _balanced(text: str, at: int) -> str:
    depth = 0
    for i in range(at, len(text)):
        depth += text[i] == "{"
        depth -= text[i] == "}"
        if depth == 0:
            return text[at + 1 : i]
    raise ValueError(text)


def _independent(text: str) -> tuple:
    """What a shape text says, read with string operations and no grammar: element type,
    dims (bounds), dynamic marks, minor_to_major, memory space (S) and element bits (E)."""
    text = re.sub(r"/\*index=\d+\*/", "", text).strip()
    if text.startswith("("):
        return ("tuple", tuple(_independent(e) for e in _split_top(text[1:-1])))
    if text.startswith("b("):
        return ("b", _independent(text[2:-1]))
    m = re.match(r"(\w+)\[([^\]]*)\]", text)
    etype, dims_text = m.groups()
    dims, dynamic = [], []
    for d in filter(None, dims_text.split(",")):
        if d == "?":
            dims.append(-1)
            dynamic.append(True)
        elif d.startswith("<="):
            dims.append(int(d[2:]))
            dynamic.append(True)
        else:
            dims.append(int(d))
            dynamic.append(False)
    rest = text[m.end() :]
    m2m, fields = None, {}
    if rest.startswith("{"):  # sparse{...} and invalid{...} are no dense layout
        layout = _balanced(rest, 0)
        head, _, tail = layout.partition(":")
        m2m = tuple(int(x) for x in head.split(",") if x.strip())
        fields = _layout_fields(tail)
    space = int(fields["S"][0]) if "S" in fields else 0
    bits = int(fields["E"][0]) if "E" in fields else None
    return (etype, tuple(dims), tuple(dynamic), m2m, space, bits)


def _layout_fields(tail: str) -> dict[str, list[str]]:
    """Top-level NAME(...)(...) items of a layout's tail: name -> its groups."""
    fields, i = {}, 0
    while i < len(tail):
        j = i
        while j < len(tail) and tail[j] not in "(":
            j += 1
        name, groups = tail[i:j], []
        while j < len(tail) and tail[j] == "(":
            depth, k = 0, j
            while True:
                depth += tail[k] == "("
                depth -= tail[k] == ")"
                if depth == 0:
                    break
                k += 1
            groups.append(tail[j + 1 : k])
            j = k + 1
        fields[name] = groups
        i = j
    return fields


def _facts(s: Shape) -> tuple:
    """The same facts of a parsed Shape."""
    if s.element_type is None:
        return ("tuple", tuple(_facts(e) for e in s.elements))
    if s.element_type == "b":
        return ("b", _facts(s.elements[0]))
    return (
        s.element_type,
        s.dims,
        s.dynamic,
        s.minor_to_major,
        s.memory_space,
        s.element_size_bits,
    )


#: Shapes the fast path does not match: for them the recursive-descent "reference" of
#: test_fast_path_agrees_with_recursive_descent is the parser itself.
SLOW_SHAPES = [t for t in CORPUS_SHAPES + EDGE_SHAPES if not shapes._FAST.fullmatch(t.strip())]


def test_the_independent_reading_covers_the_slow_path():
    assert len(SLOW_SHAPES) >= 60


@pytest.mark.parametrize("text", CORPUS_SHAPES + EDGE_SHAPES)
def test_parsed_shapes_say_what_the_text_says(text):
    """An oracle that is not the parser: the text read with string operations."""
    assert _facts(parse_shape(text)) == _independent(text)


@pytest.mark.parametrize("text", CORPUS_SHAPES + EDGE_SHAPES)
def test_format_without_layout_matches_header_form(text):
    assert format_without_layout(parse_shape(text)) == _strip_layouts(text)


def test_fast_path_covers_plain_arrays():
    plain = [s for s in CORPUS_SHAPES if not s.startswith("(")]
    assert all(shapes._FAST.fullmatch(s) for s in plain)


def test_array_fields():
    s = parse_shape("s4[3,5]{0,1:T(8,128)(2,1)E(4)S(1)}")
    assert s == Shape(
        element_type="s4",
        dims=(3, 5),
        dynamic=(False, False),
        elements=None,
        minor_to_major=(0, 1),
        tiles="(8,128)(2,1)",
        memory_space=1,
        element_size_bits=4,
        layout="0,1:T(8,128)(2,1)E(4)S(1)",
    )
    assert (s.is_tuple, s.rank, s.num_elements) == (False, 2, 15)


def test_scalars():
    s = parse_shape("f32[]")
    assert (s.dims, s.minor_to_major, s.layout, s.num_elements) == ((), None, None, 1)
    s = parse_shape(" u32[]{:T(128)S(6)}\n")
    assert (s.minor_to_major, s.tiles, s.memory_space, s.layout) == ((), "(128)", 6, ":T(128)S(6)")


def test_dynamic_dims():
    s = parse_shape("f32[<=128,4]{1,0}")
    assert (s.dims, s.dynamic, s.num_elements) == ((128, 4), (True, False), 512)
    s = parse_shape("f32[?,4]")
    assert (s.dims, s.dynamic, s.num_elements) == ((-1, 4), (True, False), None)
    assert byte_size(s) is None


def test_nested_layout_braces():
    s = parse_shape("f32[4,8]{1,0:T(8,128)P(f32[8,128]{1,0:T(8,128)S(1)})M(64)}")
    assert s.layout == "1,0:T(8,128)P(f32[8,128]{1,0:T(8,128)S(1)})M(64)"
    assert (s.tiles, s.memory_space, s.minor_to_major) == ("(8,128)", 0, (1, 0))


def test_old_layout_forms():
    s = parse_shape("f32[10]sparse{10}")
    assert (s.layout, s.minor_to_major, s.dims) == ("sparse{10}", None, (10,))
    assert parse_shape("f32[10]invalid{}").layout == "invalid{}"


def test_tuples_and_markers():
    text = "(f32[], (s32[], u8[2]{0}), f32[], f32[], f32[], /*index=5*/pred[3]{0})"
    s = parse_shape(text)
    assert s.is_tuple and s.element_type is None and s.rank == 0
    assert s.elements is not None and len(s.elements) == 6
    assert subshape(s, (1, 1)) == parse_shape("u8[2]{0}")
    assert subshape(s, (5,)).dims == (3,)
    assert subshape(s, ()) is s
    assert parse_shape("()").elements == ()
    with pytest.raises(IndexError):
        subshape(s, (6,))
    with pytest.raises(IndexError):
        subshape(s, (0, 0))


def test_format_markers_every_five_at_each_level():
    inner = "(s8[], s8[], s8[], s8[], s8[], /*index=5*/s8[])"
    text = (
        f"(f32[], f32[], f32[], f32[], f32[], /*index=5*/{inner}, f32[], f32[], f32[], f32[], "
        "/*index=10*/f32[2,<=3,?])"
    )
    assert format_without_layout(parse_shape(text)) == text
    # Markers are regenerated from positions, whether or not the input had them.
    assert format_without_layout(parse_shape("(f32[],f32[],f32[],f32[],f32[],f32[])")) == (
        "(f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[])"
    )


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("u32[2]{0:T(128)}", 8),  # tiling ignored (the TPU dump says 512)
        ("(u32[1]{0:T(128)}, u32[1]{0:T(128)})", 16),
        ("(u32[2]{0:T(128)}, u32[2]{0:T(128)}, u32[2]{0:T(128)}, u32[2]{0:T(128)})", 32),
        ("u32[]{:T(128)S(6)}", 4),
        ("bf16[8,2048,128]{2,1,0:T(8,128)(2,1)}", 4194304),
        # CPU value lines: size= equals ByteSizeOf (checked on all 22061 corpus values)
        ("f32[256,128]{1,0}", 131072),
        ("pred[256,128]{1,0}", 32768),
        ("c64[64,256]{1,0}", 131072),
        ("f16[3,5]{1,0}", 30),
        (
            "(pred[256,128]{1,0}, pred[256,128]{1,0}, s32[256]{0}, f32[256,128]{1,0}, "
            "pred[128]{0}, /*index=5*/u8[256,16]{1,0})",
            48,
        ),
        ("()", 0),
        ("s4[3,5]{1,0:E(4)}", 8),  # ceil(15 * 4 / 8)
        ("s4[3,5]{1,0}", 15),  # no E(n): one byte per element
        ("u2[7]{0:E(2)}", 2),
        ("f32[<=128,4]{1,0}", 2048),
        ("f32[0,5]{1,0}", 0),
        ("token[]", 0),
        ("opaque[]", 8),
        ("b(f32[2,3]{1,0})", 24),
        ("c128[2]", 32),
        ("f8e4m3fn[10]", 10),
        ("s64[8589934592]{0}", 68719476736),
        ("x9[2]", None),
    ],
)
def test_byte_size(text, size):
    assert byte_size(parse_shape(text)) == size


def test_byte_size_pointer_size():
    assert byte_size(parse_shape("(f32[], f32[], f32[])"), pointer_size=4) == 12
    assert byte_size(parse_shape("opaque[]"), pointer_size=4) == 4


def test_element_bytes():
    expected = {
        "f32": 4,
        "bf16": 2,
        "c64": 8,
        "c128": 16,
        "f8e5m2": 1,
        "pred": 1,
        "s64": 8,
        "u4": 1,
        "f4e2m1fn": 1,
        "f6e3m2fn": 1,
        "f8e8m0fnu": 1,
        "token": None,
        "zz": None,
    }
    assert {t: element_bytes(t) for t in expected} == expected


def test_shape_index():
    assert parse_shape_index("{}") == ()
    assert parse_shape_index("{0}") == (0,)
    assert parse_shape_index("{1,2}") == (1, 2)
    for bad in ("", "{", "{1,}", "{a}", "1,2", "{1 2}"):
        with pytest.raises(ShapeSyntaxError):
            parse_shape_index(bad)


@pytest.mark.parametrize(
    ("text", "pos", "expected"),
    [
        ("f32[2", 5, "','"),
        ("f32[2]{0", 8, "closing bracket"),
        ("f32[2]{a}", 7, "minor-to-major"),
        ("f32[2]{0:Q}", 9, "layout attribute"),
        ("f32[2]{0:E(x)}", 11, "integer"),
        ("(f32[] f32[])", 6, "','"),
        ("F32[2]", 0, "a shape"),
        ("f32[2] junk", 6, "end of shape"),
        ("f32[2]{0)", 8, "matching brackets"),
    ],
)
def test_syntax_errors_say_where_and_what(text, pos, expected):
    with pytest.raises(ShapeSyntaxError) as info:
        parse_shape(text)
    assert (info.value.text, info.value.pos) == (text, pos)
    assert expected in str(info.value)


def test_deep_nesting_is_a_syntax_error():
    with pytest.raises(ShapeSyntaxError):
        parse_shape("(" * 5000 + "f32[]" + ")" * 5000)


SHAPE_ALPHABET = "fsub0123456789[](){},:<=?/*index TSEPLM#\n"


@given(st.one_of(st.text(), st.text(alphabet=SHAPE_ALPHABET)))
def test_arbitrary_text_raises_only_shape_syntax_error(text):
    try:
        shape = parse_shape(text)
    except ShapeSyntaxError:
        return
    assert format_without_layout(shape)
    byte_size(shape)


@given(st.sampled_from(CORPUS_SHAPES + EDGE_SHAPES), st.integers(0, 200), st.integers(0, 5))
def test_damaged_corpus_shapes_raise_only_shape_syntax_error(text, cut, length):
    damaged = text[:cut] + text[cut + length :]
    outcomes = []
    for parse in (parse_shape, lambda t: _slow(t.strip())):
        try:
            outcomes.append(parse(damaged))
        except ShapeSyntaxError:
            outcomes.append("error")
    assert outcomes[0] == outcomes[1]
