"""Shapes as XLA prints them, from ShapeProtos: the text path's shape columns come
from the printed text, so the proto path prints first and parses with the same grammar."""

from __future__ import annotations

from collections.abc import Iterable

from bufferhouse.errors import ParseError
from bufferhouse.parse import shapes
from bufferhouse.parse.proto import hlo_pb2

__all__ = ["PRIMITIVE_NAMES", "ShapeTexts", "index_text", "shape_text", "subshape", "value_columns"]


#: xla.PrimitiveType number -> the name XLA prints (xla_data.proto).
PRIMITIVE_NAMES = {
    1: "pred", 2: "s8", 3: "s16", 4: "s32", 5: "s64", 6: "u8", 7: "u16", 8: "u32",
    9: "u64", 10: "f16", 11: "f32", 12: "f64", 13: "tuple", 14: "opaque", 15: "c64",
    16: "bf16", 17: "token", 18: "c128", 19: "f8e5m2", 20: "f8e4m3fn", 21: "s4",
    22: "u4", 23: "f8e4m3b11fnuz", 24: "f8e5m2fnuz", 25: "f8e4m3fnuz", 26: "s2",
    27: "u2", 28: "f8e4m3", 29: "f8e3m4", 30: "s1", 31: "u1", 32: "f4e2m1fn",
    33: "f8e8m0fnu", 34: "b",
}  # fmt: skip

_TUPLE = 13


class ShapeTexts(dict):
    """shape_text by the shape's serialized bytes: a module repeats a few shapes many times,
    and serializing (in C) is far cheaper than printing (in Python)."""

    def __call__(self, shape: hlo_pb2.ShapeProto) -> str:
        key = shape.SerializeToString()
        text = self.get(key)
        if text is None:
            text = self[key] = shape_text(shape)
        return text


def shape_text(shape: hlo_pb2.ShapeProto, layout: bool = True) -> str:
    """The shape as XLA prints it (ShapeUtil::HumanString[WithLayout])."""
    if shape.element_type == _TUPLE:
        # XLA marks every fifth element of a long tuple with its index
        return (
            "("
            + ", ".join(
                (f"/*index={i}*/" if i and i % 5 == 0 else "") + shape_text(s, layout)
                for i, s in enumerate(shape.tuple_shapes)
            )
            + ")"
        )
    name = PRIMITIVE_NAMES.get(shape.element_type, f"type{shape.element_type}")
    if name == "b":  # a buffer type wraps its element shape
        inner = shape_text(shape.tuple_shapes[0], layout) if shape.tuple_shapes else ""
        return f"b({inner})"
    dynamic = shape.is_dynamic_dimension
    dims = ",".join(
        (f"<={d}" if i < len(dynamic) and dynamic[i] else str(d))
        for i, d in enumerate(shape.dimensions)
    )
    text = f"{name}[{dims}]"
    if layout and shape.HasField("layout"):
        # A scalar's layout is printed only when it says something: TPU's `f32[]{:T(128)}`,
        # `u32[]{:S(2)}`; CPU's scalars print bare (`f32[]`, never `f32[]{}`).
        printed = _layout_text(shape.layout)
        if shape.dimensions or printed != "{}":
            text += printed
    return text


def _layout_text(layout: hlo_pb2.LayoutProto) -> str:
    parts = ",".join(str(d) for d in layout.minor_to_major)
    extra = ""
    if layout.tiles:  # Layout::Print: one `T`, then each tile: `T(8,128)(2,1)`
        extra += "T" + "".join(
            "(" + ",".join(str(d) for d in tile.dimensions) + ")" for tile in layout.tiles
        )
    if layout.element_size_in_bits:
        extra += f"E({layout.element_size_in_bits})"
    if layout.memory_space:
        extra += f"S({layout.memory_space})"
    return "{" + parts + (":" + extra if extra else "") + "}"


def subshape(shape: hlo_pb2.ShapeProto, index: Iterable[int]) -> hlo_pb2.ShapeProto | None:
    for i in index:
        if shape.element_type != _TUPLE or i >= len(shape.tuple_shapes):
            return None
        shape = shape.tuple_shapes[i]
    return shape


def index_text(index: Iterable[int]) -> str:
    return "{" + ",".join(str(i) for i in index) + "}"


def value_columns(shape_texts: list[str | None], where: str) -> dict[str, object]:
    """hlo_values' shape-derived columns, by the same parser the text path uses."""
    per: dict[str, list] = {k: [] for k in shapes.VALUE_SHAPE_COLUMNS}
    cache: dict[str | None, tuple] = {}
    for text in shape_texts:
        row = cache.get(text)
        if row is None:
            if text is None:
                row = (None,) * len(shapes.VALUE_SHAPE_COLUMNS)
            else:
                try:
                    s = shapes.parse_shape(text)
                except shapes.ShapeSyntaxError as exc:
                    raise ParseError(where, 0, f"shape not understood: {exc}", text) from None
                row = shapes.value_facts(s)
            cache[text] = row
        for k, v in zip(per, row):
            per[k].append(v)
    return per
