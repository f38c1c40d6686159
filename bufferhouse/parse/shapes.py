"""Parse XLA shape text (``ShapeUtil::HumanStringWithLayout``) and compute byte sizes.

Grammar: docs/format.md §6.1–6.3. Shapes are parsed for every value line of dumps that reach
hundreds of MB, so ``parse_shape`` is cached and tries one regex for the common plain array
before the recursive-descent parser; both must give the same ``Shape``.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

__all__ = [
    "VALUE_SHAPE_COLUMNS",
    "Shape",
    "ShapeSyntaxError",
    "TextSyntaxError",
    "byte_size",
    "element_bytes",
    "format_without_layout",
    "parse_shape",
    "parse_shape_at",
    "parse_shape_index",
    "subshape",
    "tiled_byte_size",
    "value_facts",
]


class TextSyntaxError(ValueError):
    """Text that does not follow a grammar; ``pos`` is a 0-based offset into ``text``."""

    def __init__(self, expected: str, text: str, pos: int) -> None:
        self.text = text
        self.pos = pos
        snippet = text[max(0, pos - 30) : pos + 30]
        super().__init__(f"expected {expected} at offset {pos}: ...{snippet!r}...")


class ShapeSyntaxError(TextSyntaxError):
    """Shape text that does not follow the shape grammar."""


@dataclass(frozen=True, slots=True)
class Shape:
    """One parsed shape. A tuple has ``element_type`` None; ``b(X)`` has type 'b', elements (X,)."""

    element_type: str | None
    dims: tuple[int, ...] = ()
    dynamic: tuple[bool, ...] = ()
    elements: tuple[Shape, ...] | None = None
    minor_to_major: tuple[int, ...] | None = None
    tiles: str | None = None
    memory_space: int = 0
    element_size_bits: int | None = None
    layout: str | None = None

    @property
    def is_tuple(self) -> bool:
        return self.element_type is None

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def num_elements(self) -> int | None:
        """Product of dims (bounds for '<=N'); None for non-arrays or an unbounded '?' dim."""
        if self.element_type in (None, "b", "token", "opaque") or -1 in self.dims:
            return None
        return math.prod(self.dims)


# Bytes per element, from primitive_util::ByteWidth: sub-byte types take a whole byte
# unless the layout sets E(n).
_ELEMENT_BYTES = {
    "pred": 1, "s1": 1, "s2": 1, "s4": 1, "s8": 1, "u1": 1, "u2": 1, "u4": 1, "u8": 1,
    "s16": 2, "u16": 2, "f16": 2, "bf16": 2,
    "s32": 4, "u32": 4, "f32": 4,
    "s64": 8, "u64": 8, "f64": 8, "c64": 8,
    "c128": 16,
}  # fmt: skip


def element_bytes(element_type: str) -> int | None:
    """Bytes of one element as ByteSizeOf counts them; None for unknown types (and token/opaque)."""
    size = _ELEMENT_BYTES.get(element_type)
    if size is None and element_type[:2] in ("f4", "f6", "f8"):
        return 1
    return size


_INT = re.compile(r"[0-9]{1,19}")
_INT_LIST = re.compile(r"(?:[0-9]{1,19}(?:,[0-9]{1,19})*)?")
_ELEM = re.compile(r"[a-z][a-z0-9]*")
_INDEX_MARKER = re.compile(r"/\*index=[0-9]{1,19}\*/")
_TAG = re.compile(r"[A-Z#*]+")
_MAX_DEPTH = 100

# Fast path: `elem[d,...]` with an optional `{m2m[:T(..)..][E(n)][S(n)]}` layout.
_FAST = re.compile(
    r"([a-z][a-z0-9]*)\[((?:[0-9]{1,19}(?:,[0-9]{1,19})*)?)\]"
    r"(?:\{((?:[0-9]{1,19}(?:,[0-9]{1,19})*)?"
    r"(?::(?:T((?:\([0-9*]{1,19}(?:,[0-9*]{1,19})*\))+))?"
    r"(?:E\(([0-9]{1,19})\))?(?:S\(([0-9]{1,19})\))?)?)\})?"
)
_FAST_END = re.compile(r"(?![\w{(\[])")


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",")) if text else ()


def _fast(m: re.Match[str]) -> Shape:
    elem, dims, layout, tiles, bits, space = m.groups()
    d = _ints(dims)
    return Shape(
        elem,
        d,
        (False,) * len(d),
        None,
        None if layout is None else _ints(layout.partition(":")[0]),
        tiles,
        int(space) if space else 0,
        int(bits) if bits else None,
        layout,
    )


class _Parser:
    """Recursive descent over ``text``; ``pos`` advances as shapes are consumed."""

    __slots__ = ("pos", "text")

    def __init__(self, text: str, pos: int) -> None:
        self.text = text
        self.pos = pos

    def fail(self, expected: str, pos: int | None = None) -> ShapeSyntaxError:
        return ShapeSyntaxError(expected, self.text, self.pos if pos is None else pos)

    def expect(self, literal: str) -> None:
        if not self.text.startswith(literal, self.pos):
            raise self.fail(repr(literal))
        self.pos += len(literal)

    def integer(self) -> int:
        m = _INT.match(self.text, self.pos)
        if not m:
            raise self.fail("an integer")
        self.pos = m.end()
        return int(m.group())

    def shape(self, depth: int = 0) -> Shape:
        if depth > _MAX_DEPTH:
            raise self.fail("a shape nested less deeply")
        text = self.text
        if text.startswith("(", self.pos):
            return self.tuple_(depth)
        m = _ELEM.match(text, self.pos)
        if not m:
            raise self.fail("a shape")
        elem = m.group()
        self.pos = m.end()
        if elem == "b" and text.startswith("(", self.pos):
            self.pos += 1
            inner = self.shape(depth + 1)
            self.expect(")")
            return Shape("b", elements=(inner,))
        self.expect("[")
        dims: list[int] = []
        dynamic: list[bool] = []
        while not text.startswith("]", self.pos):
            if dims:
                self.expect(",")
            if text.startswith("?", self.pos):
                self.pos += 1
                dims.append(-1)
                dynamic.append(True)
            else:
                bounded = text.startswith("<=", self.pos)
                self.pos += 2 * bounded
                dims.append(self.integer())
                dynamic.append(bounded)
        self.pos += 1
        return self.layout(Shape(elem, tuple(dims), tuple(dynamic)))

    def tuple_(self, depth: int) -> Shape:
        self.pos += 1
        elements: list[Shape] = []
        while not self.text.startswith(")", self.pos):
            if elements:
                self.expect(",")
                self.pos += self.text.startswith(" ", self.pos)
                m = _INDEX_MARKER.match(self.text, self.pos)
                if m:
                    self.pos = m.end()
            elements.append(self.shape(depth + 1))
        self.pos += 1
        return Shape(None, elements=tuple(elements))

    def balanced(self) -> int:
        """End offset of the bracket group that opens at ``pos`` (any of (), {}, [])."""
        text, stack = self.text, []
        for i in range(self.pos, len(text)):
            c = text[i]
            if c in "({[":
                stack.append(")}]"["({[".index(c)])
            elif c in ")}]":
                if not stack or stack.pop() != c:
                    raise self.fail("matching brackets", i)
                if not stack:
                    return i + 1
        raise self.fail("a closing bracket", len(text))

    def layout(self, shape: Shape) -> Shape:
        text, start = self.text, self.pos
        for old in ("sparse{", "invalid{"):  # pre-2020 LayoutUtil::HumanString forms
            if text.startswith(old, start):
                self.pos += len(old) - 1
                self.pos = self.balanced()
                return _replace(shape, layout=text[start : self.pos])
        if not text.startswith("{", start):
            return shape
        self.pos = self.balanced()
        body = text[start + 1 : self.pos - 1]
        m2m_text, colon, _ = body.partition(":")
        if not _INT_LIST.fullmatch(m2m_text):
            raise self.fail("a minor-to-major list", start + 1)
        tiles, bits, space = None, None, 0
        sub = _Parser(text, start + 2 + len(m2m_text))
        end = self.pos - 1
        while colon and sub.pos < end:
            m = _TAG.match(text, sub.pos)
            if not m or not text.startswith("(", m.end()):
                raise sub.fail("a layout attribute like T(..), E(n) or S(n)")
            sub.pos = m.end()
            group_start = sub.pos
            while sub.pos < end and text.startswith("(", sub.pos):
                sub.pos = sub.balanced()
            tag, arg = m.group(), text[group_start + 1 : sub.pos - 1]
            if tag == "T":
                tiles = text[group_start : sub.pos]
            elif tag in ("E", "S"):
                if not _INT.fullmatch(arg):
                    raise sub.fail("an integer", group_start + 1)
                if tag == "E":
                    bits = int(arg)
                else:
                    space = int(arg)
        return _replace(
            shape,
            minor_to_major=_ints(m2m_text),
            tiles=tiles,
            memory_space=space,
            element_size_bits=bits,
            layout=body,
        )


def _replace(shape: Shape, **changes: object) -> Shape:
    fields = {f: getattr(shape, f) for f in Shape.__slots__}
    fields.update(changes)
    return Shape(**fields)  # type: ignore[arg-type]


def parse_shape_at(text: str, pos: int) -> tuple[Shape, int]:
    """Parse one shape starting at ``pos`` (e.g. inside instruction text); return (shape, end)."""
    m = _FAST.match(text, pos)
    if m and _FAST_END.match(text, m.end()):
        return _fast(m), m.end()
    parser = _Parser(text, pos)
    return parser.shape(), parser.pos


@functools.lru_cache(maxsize=65536)
def parse_shape(text: str) -> Shape:
    """Parse a whole string as one shape; surrounding whitespace is allowed."""
    stripped = text.strip()
    m = _FAST.fullmatch(stripped)
    if m:
        return _fast(m)
    start = len(text) - len(text.lstrip())
    parser = _Parser(text, start)
    shape = parser.shape()
    if parser.pos != start + len(stripped):
        raise parser.fail("end of shape")
    return shape


def byte_size(shape: Shape, pointer_size: int = 8) -> int | None:
    """``ShapeUtil::ByteSizeOf(shape, pointer_size)``: no tiling, bounds for dynamic dims.

    None when a '?' dim or an unknown element type makes the size unknown.
    """
    if shape.elements is not None:
        if shape.element_type == "b":
            return byte_size(shape.elements[0], pointer_size)
        return pointer_size * len(shape.elements)
    if shape.element_type == "token":
        return 0
    if shape.element_type == "opaque":
        return pointer_size
    n = shape.num_elements
    if n is None:
        return None
    if shape.element_size_bits:
        return -(-n * shape.element_size_bits // 8)
    size = element_bytes(shape.element_type or "")
    return None if size is None else n * size


def tiled_byte_size(shape: Shape) -> int | None:
    """``ShapeUtil::ArraySize`` (xla/shape_util.cc): the bytes of an array in its tiled
    layout. Only the first tile pads ("We assume the sub-tiles won't cause additional
    padding"): the i-th most minor dimension (in minor_to_major order) is rounded up to
    the tile's i-th last size, a dimension past the shape's rank counts 1 (a scalar's
    `T(128)` is 128 elements), the rest are taken whole; then times the element size
    (or `E(bits)` rounded up to bytes). Untiled: byte_size. None for tuples, unknown
    sizes, and tiles with `*` (a combined dimension) or a layout without minor_to_major.
    """
    if shape.is_tuple or shape.element_type in ("b", "token", "opaque"):
        return None
    if not shape.tiles:
        return byte_size(shape)
    first = shape.tiles[1 : shape.tiles.index(")")]
    if "*" in first or shape.minor_to_major is None or -1 in shape.dims:
        return None
    tile = _ints(first)
    order = shape.minor_to_major
    n = 1
    for i in range(len(tile)):
        dim = shape.dims[order[i]] if i < len(order) else 1
        step = tile[len(tile) - 1 - i]
        n *= -(-dim // step) * step
    for i in range(len(tile), len(order)):
        n *= shape.dims[order[i]]
    if shape.element_size_bits:
        return -(-n * shape.element_size_bits // 8)
    size = element_bytes(shape.element_type or "")
    return None if size is None else n * size


def subshape(shape: Shape, index: tuple[int, ...]) -> Shape:
    """``ShapeUtil::GetSubshape``; IndexError if ``index`` does not exist in ``shape``."""
    for i in index:
        if not shape.is_tuple or shape.elements is None or not 0 <= i < len(shape.elements):
            raise IndexError(f"shape index {index} not in {format_without_layout(shape)}")
        shape = shape.elements[i]
    return shape


def parse_shape_index(text: str) -> tuple[int, ...]:
    """'{}' -> (), '{1,2}' -> (1, 2) (``ShapeIndex::ToString``)."""
    m = re.fullmatch(r"\s*\{(.*)\}\s*", text, re.DOTALL)
    if not m or not _INT_LIST.fullmatch(m.group(1)):
        raise ShapeSyntaxError("a shape index like {} or {1,2}", text, 0)
    return _ints(m.group(1))


def format_without_layout(shape: Shape) -> str:
    """``Shape::ToString(false)``, with XLA's '/*index=N*/' marker before every 5th element."""
    if shape.elements is not None:
        if shape.element_type == "b":
            return f"b({format_without_layout(shape.elements[0])})"
        parts = []
        for i, element in enumerate(shape.elements):
            sep = "" if i == 0 else f", /*index={i}*/" if i % 5 == 0 else ", "
            parts.append(sep + format_without_layout(element))
        return "(" + "".join(parts) + ")"
    dims = ",".join(
        ("?" if d < 0 else f"<={d}") if dyn else str(d)
        for d, dyn in zip(shape.dims, shape.dynamic, strict=True)
    )
    return f"{shape.element_type}[{dims}]"


#: The hlo_values columns a value's shape gives, in the order `value_facts` returns them.
VALUE_SHAPE_COLUMNS = (
    "element_type",
    "dims",
    "is_dynamic",
    "minor_to_major",
    "tiles",
    "memory_space",
    "logical_bytes",
    "is_tuple",
    "tiled_bytes",
)


def value_facts(shape: Shape) -> tuple:
    """A shape's hlo_values columns (VALUE_SHAPE_COLUMNS): one rule for text and proto."""
    return (
        shape.element_type,
        list(shape.dims) if not shape.is_tuple else None,
        any(shape.dynamic) if not shape.is_tuple else False,
        list(shape.minor_to_major) if shape.minor_to_major is not None else None,
        shape.tiles,
        shape.memory_space,
        byte_size(shape),
        shape.is_tuple,
        tiled_byte_size(shape),
    )
