"""Parse HLO instruction text (``HloInstruction::ToString``) and HLO stack-frame tables.

The instruction text is what dumps print after ``from instruction:``; the stack-frame tables
head the optimized HLO module text of newer XLA and resolve ``stack_frame_id`` in metadata.
Only the fields the warehouse stores are extracted; unknown attributes are skipped.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from bufferhouse.parse.shapes import (
    _FAST,
    _FAST_END,
    _INDEX_MARKER,
    ShapeSyntaxError,
    TextSyntaxError,
    parse_shape_at,
)

__all__ = [
    "Instruction",
    "InstructionSyntaxError",
    "SourceLocation",
    "parse_instruction",
    "parse_stack_frames",
]


class InstructionSyntaxError(TextSyntaxError):
    """Instruction text that does not follow the grammar; ``pos`` is a 0-based offset."""


@dataclass(frozen=True, slots=True)
class Instruction:
    """The parts of one HLO instruction that buffer analysis needs (names without '%')."""

    name: str
    shape: str
    opcode: str
    operands: tuple[str, ...]
    parameter_number: int | None = None
    fusion_kind: str | None = None
    called: tuple[str, ...] = ()
    op_name: str | None = None
    op_type: str | None = None
    source_file: str | None = None
    source_line: int | None = None
    stack_frame_id: int | None = None
    custom_call_target: str | None = None


@dataclass(frozen=True, slots=True)
class SourceLocation:
    """Where a stack frame points: file, line, function and column, each None if not printed."""

    file: str | None
    line: int | None
    function: str | None
    column: int | None


_HEAD = re.compile(r"\s*(?:ROOT\s+)?%?(?P<name>[^\s=%]+) = ")
_OPCODE = re.compile(r" +(?P<opcode>[a-z][a-z0-9_-]*)\(")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_KEY = re.compile(r",\s*([A-Za-z_][A-Za-z0-9_.\-]*)=")
_PARAM = re.compile(r"\s*([0-9]{1,19})\s*")
_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_CALLED_KEYS = frozenset(
    {
        "calls",
        "to_apply",
        "body",
        "condition",
        "branch_computations",
        "true_computation",
        "false_computation",
        "called_computations",
        "async_wrapped",
        "select",
        "scatter",
    }
)
# Opcodes whose parenthesised arguments are literals, not operand names.
_LITERAL_ARGS = frozenset({"constant", "parameter"})
_CLOSE = {"(": ")", "{": "}", "[": "]"}
_ESCAPES = {"n": 10, "t": 9, "r": 13, '"': 34, "'": 39, "\\": 92, "?": 63, "a": 7, "b": 8,
            "f": 12, "v": 11}  # fmt: skip


@functools.lru_cache(maxsize=16)
def _specials(stops: str) -> re.Pattern[str]:
    return re.compile("[" + re.escape('"(){}[]' + stops) + "]")


_STRING_TAIL = re.compile(r'(?:[^"\\]|\\.)*"', re.DOTALL)


def _scan(text: str, pos: int, stops: str) -> int:
    """Offset of the first char of ``stops`` at bracket depth 0 from ``pos`` (skips strings).

    Jumps from one bracket, quote or stop character to the next with a regex,
    so long JSON configs cost one step per token, not per character.
    """
    stack: list[str] = []
    special = _specials(stops)
    n = len(text)
    i = pos
    while True:
        m = special.search(text, i)
        if m is None:
            break
        i = m.start()
        c = text[i]
        if c == '"':
            tail = _STRING_TAIL.match(text, i + 1)
            if tail is None:
                raise InstructionSyntaxError("a closing '\"'", text, n)
            i = tail.end()
            continue
        if not stack and c in stops:
            return i
        if c in _CLOSE:
            stack.append(_CLOSE[c])
        elif c in ")}]":
            if not stack or stack.pop() != c:
                raise InstructionSyntaxError("balanced brackets", text, i)
        elif stack and c in stops:
            pass
        i += 1
    if stack:
        raise InstructionSyntaxError(f"{stack[-1]!r}", text, n)
    return n


def _split_top(text: str, sep: str = ",") -> list[str]:
    """Split at ``sep`` chars outside brackets and strings."""
    parts, pos = [], 0
    while pos <= len(text):
        end = _scan(text, pos, sep)
        parts.append(text[pos:end])
        pos = end + 1
    return parts


def _utf8(c: str) -> bytes:
    return c.encode("utf-8", "surrogatepass")


def _unquote(value: str) -> str:
    """Undo ``absl::CEscape`` of a quoted value (octal escapes are raw UTF-8 bytes)."""
    if len(value) < 2 or value[0] != '"' or value[-1] != '"':
        return value
    body = value[1:-1]
    if "\\" not in body:
        return body
    out, i = bytearray(), 0
    while i < len(body):
        c = body[i]
        if c != "\\" or i + 1 == len(body):
            out += _utf8(c)
            i += 1
            continue
        nxt = body[i + 1]
        octal = re.match(r"[0-7]{1,3}", body[i + 1 : i + 4])
        hexa = re.match(r"x([0-9a-fA-F]{1,2})", body[i + 1 : i + 4])
        if octal:
            out.append(int(octal.group(), 8) & 0xFF)
            i += 1 + octal.end()
        elif hexa:
            out.append(int(hexa.group(1), 16))
            i += 1 + hexa.end()
        else:
            out += bytes([_ESCAPES[nxt]]) if nxt in _ESCAPES else _utf8(nxt)
            i += 2
    return out.decode("utf-8", errors="replace")


_INTEGER = re.compile(r"-?[0-9]{1,19}")


def _int_or_none(value: str | None) -> int | None:
    return int(value) if value and _INTEGER.fullmatch(value) else None


_META_PAIR = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)=("(?:[^"\\]|\\.)*"|[^\s"]*)')


def _metadata(body: str) -> dict[str, str]:
    """``metadata={k=v k="quoted v" ...}``: space-separated pairs, quoted values unescaped."""
    fields: dict[str, str] = {}
    pos, n = 0, len(body.rstrip())
    while pos < n:
        m = _META_PAIR.match(body, pos)
        if m is None or m.end() == pos:
            # Something unusual (a bare word, a brace): the general splitter decides.
            return _metadata_slow(body)
        fields[m.group(1)] = _unquote(m.group(2))
        pos = m.end()
    return fields


def _metadata_slow(body: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for part in _split_top(body.strip(), " "):
        key, eq, value = part.partition("=")
        if eq:
            fields[key] = _unquote(value)
    return fields


def _operand_names(args: str, text: str, offset: int) -> tuple[str, ...]:
    """Operand names from the text between the opcode's parentheses."""
    names = []
    for part in _split_top(_COMMENT.sub(" ", args)):
        part = part.strip()
        if not part:
            continue
        token = part.rsplit("%", 1)[1] if "%" in part else part.rsplit(None, 1)[-1]
        m = _NAME.match(token)
        if not m:
            raise InstructionSyntaxError("an operand name", text, offset)
        names.append(m.group())
    return tuple(names)


# -- The common form, in one regex ---------------------------------------------------------
# Each piece accepts only text that the general path reads the same way, and can match it in
# one way only (so backtracking never finds another reading); other text goes to
# _parse_general. Strings are _STRING_TAIL's (any char escaped) or, in metadata, _META_PAIR's
# quoted values (no escaped newline). No atomic groups or possessive quantifiers: Python 3.10.
_STRING = r'"[^"\\]*(?:\\[\s\S][^"\\]*)*"'
_META_STRING = r'"[^"\\]*(?:\\[^\n][^"\\]*)*"'


def _uncaptured(pattern: str) -> str:
    """``pattern`` with its unnamed groups made non-capturing: fewer groups, faster matches."""
    token = re.compile(r"\\.|\[\^?\]?(?:\\.|[^\\\]])*\]|\((?!\?)")
    return token.sub(lambda m: "(?:" if m.group() == "(" else m.group(), pattern)


def _balanced(depth: int, plain: str = r'[^"(){}\[\]]') -> str:
    """Text _scan crosses without stopping at a char outside ``plain`` at depth 0: ``plain``
    chars, strings and bracket pairs nested at most ``depth`` deep, as `plain* (item plain*)*`."""
    items = [_STRING]
    if depth:
        inner = _balanced(depth - 1)
        items += [rf"\{{{inner}\}}", rf"\({inner}\)", rf"\[{inner}\]"]
    return f"{plain}*(?:(?:{'|'.join(items)}){plain}*)*"


# Operands as _operand_names reads '%name' (with /*index=N*/ before every fifth one).
_OPERAND = r"%([A-Za-z_][A-Za-z0-9_.\-]*)"
_PLAIN_OPERANDS = rf"(?:{_OPERAND}(?:, (?:{_INDEX_MARKER.pattern})?{_OPERAND})*)?"
# An attribute's value ends at the first ',' outside brackets and strings, or at the end.
_VALUE_CHAR = r'[^"(){}\[\],]'
_ATTRIBUTE = (
    r",\s*(?!metadata=)([A-Za-z_][A-Za-z0-9_.\-]*)="
    rf"({_balanced(3, plain=_VALUE_CHAR)})(?=,|\Z)"
)
# metadata={...} as _metadata reads it: `key=value` pairs one space apart, values quoted or
# without brackets. A group in a repetition keeps its last match, as the dict its last value.
_META_KEYS = ("op_type", "op_name", "source_file", "source_line", "stack_frame_id")
_META_VALUE = rf'(?:{_META_STRING}|[^\s"(){{}}\[\]]*)'
_METADATA = (
    r"\{(?:(?: |(?<=\{))(?:"
    + "".join(f"{key}=(?P<{key}>{_META_VALUE})|" for key in _META_KEYS)
    + rf"(?!(?:kind|custom_call_target)=)[A-Za-z_][A-Za-z0-9_]*={_META_VALUE}))*\}}"
)
_ARRAY_SHAPE = _uncaptured(_FAST.pattern)
_COMMON_FORM = re.compile(
    f"{_HEAD.pattern}"
    # An array as parse_shape_at's own fast pattern reads it, or a tuple of arrays.
    rf"(?P<shape>{_ARRAY_SHAPE}{_FAST_END.pattern}"
    rf"|\((?:{_ARRAY_SHAPE}(?:, (?:{_INDEX_MARKER.pattern})?{_ARRAY_SHAPE})*)?\))"
    f"{_OPCODE.pattern}"
    # (?P<plain>) marks `%a, %b` operands, read without _operand_names.
    rf"(?P<args>{_uncaptured(_PLAIN_OPERANDS)}(?=\))(?P<plain>)|{_balanced(3)})\)"
    # A fusion's `kind=kX, calls=%c` first, then any other attributes before metadata.
    rf"(?:,\s*kind=(?P<kind>[A-Za-z0-9_]+)(?=,|\Z))?"
    rf"(?:,\s*calls=%(?P<calls>{_NAME.pattern})(?=,|\Z))?"
    rf"(?P<attributes>(?:{_uncaptured(_ATTRIBUTE)})*)"
    # After metadata the general path stops at backend_config without reading it.
    rf"(?:,\s*metadata={_METADATA}(?=,|\Z)(?:\Z|,\s*backend_config=)|\Z)"
)
_ATTRIBUTES = re.compile(_ATTRIBUTE)
_OPERANDS = re.compile(_OPERAND)
_CALLED = re.compile(r"%?([A-Za-z_][A-Za-z0-9_.\-]*)")


def _meta_string(value: str) -> str:
    """_unquote(value), without the call for the usual quoted value without escapes."""
    if value[:1] == '"' and "\\" not in value:
        return value[1:-1]
    return _unquote(value)


def _meta_int(value: str) -> int | None:
    """_int_or_none(_unquote(value)), without the calls for a plain decimal."""
    if value.isascii() and value.isdigit() and len(value) < 20:
        return int(value)
    return _int_or_none(_unquote(value))


# Instruction(...) sets each field through object.__setattr__ (a frozen dataclass), which
# costs a third as much as the regex; the fast path calls the slots' setters, in half the time.
_new = object.__new__
(_set_name, _set_shape, _set_opcode, _set_operands, _set_parameter_number, _set_fusion_kind,
 _set_called, _set_op_name, _set_op_type, _set_source_file, _set_source_line,
 _set_stack_frame_id, _set_custom_call_target) = (
    getattr(Instruction, field).__set__ for field in Instruction.__slots__
)  # fmt: skip


def parse_instruction(text: str) -> Instruction:
    """Parse ``[ROOT ]%name = SHAPE opcode(operands), key=value, ...``.

    Ingest parses every distinct instruction text of a dump, so text of the common form is
    read by one regex, _COMMON_FORM; any other text by _parse_general, the reference, which
    gives the same Instruction for every text the regex accepts
    (tests/parse/proto/test_hlo_common_form.py).
    """
    m = _COMMON_FORM.match(text)
    if m is None:
        return _parse_general(text)
    # Every group of _COMMON_FORM, in order.
    (name, shape, opcode, args, plain, kind, calls, attributes,
     op_type, op_name, source_file, line, frame) = m.groups()  # fmt: skip
    target = None
    called: tuple[str, ...] = () if calls is None else (calls,)
    if attributes:
        fields = {} if kind is None else {"kind": kind}
        more: list[str] = []
        for key, value in _ATTRIBUTES.findall(attributes):
            _read_attribute(key, value.strip(), fields, more)
        kind, target = fields.get("kind"), fields.get("custom_call_target")
        called += tuple(more)
    parameter_number = None
    if opcode == "parameter" and args.isascii() and args.isdigit() and len(args) < 20:
        operands: tuple[str, ...] = ()
        parameter_number = int(args)
    elif plain is None or opcode in _LITERAL_ARGS:
        operands, parameter_number = _operands(opcode, args, text, m.start("args"))
    elif "/" in args:  # an /*index=N*/ marker
        operands = tuple(_OPERANDS.findall(args))
    else:
        operands = tuple(args[1:].split(", %")) if args else ()
    inst = _new(Instruction)
    _set_name(inst, name)
    _set_shape(inst, shape)
    _set_opcode(inst, opcode)
    _set_operands(inst, operands)
    _set_parameter_number(inst, parameter_number)
    _set_fusion_kind(inst, kind)
    _set_called(inst, called)
    _set_op_name(inst, None if op_name is None else _meta_string(op_name))
    _set_op_type(inst, None if op_type is None else _meta_string(op_type))
    _set_source_file(inst, None if source_file is None else _meta_string(source_file))
    _set_source_line(inst, None if line is None else _meta_int(line))
    _set_stack_frame_id(inst, None if frame is None else _meta_int(frame))
    _set_custom_call_target(inst, target)
    return inst


def _parse_general(text: str) -> Instruction:
    """The general tokenizer: any instruction text, with positioned syntax errors."""
    head = _HEAD.match(text)
    if not head:
        raise InstructionSyntaxError("'%name = '", text, 0)
    try:
        _, shape_end = parse_shape_at(text, head.end())
    except ShapeSyntaxError as e:
        raise InstructionSyntaxError(f"a shape ({e})", text, e.pos) from None
    op = _OPCODE.match(text, shape_end)
    if not op:
        raise InstructionSyntaxError("' opcode('", text, shape_end)
    opcode = op.group(1)
    close = _scan(text, op.end(), ")")
    if close == len(text):
        raise InstructionSyntaxError("')' closing the operand list", text, close)
    args = text[op.end() : close]

    fields: dict[str, str] = {}
    called: list[str] = []
    seen: set[str] = set()
    pos, end = close + 1, len(text.rstrip())
    while pos < end:
        m = _KEY.match(text, pos)
        if not m:
            raise InstructionSyntaxError("', key=value'", text, pos)
        if m.group(1) == "backend_config" and "metadata" in seen:
            break  # XLA prints the (often huge) config after every field read here
        seen.add(m.group(1))
        key, pos = m.group(1), _scan(text, m.end(), ",")
        value = text[m.end() : pos].strip()
        if key == "metadata" and value.startswith("{") and value.endswith("}"):
            fields.update(_metadata(value[1:-1]))
        else:
            _read_attribute(key, value, fields, called)

    operands, parameter_number = _operands(opcode, args, text, op.end())
    return Instruction(
        name=head.group(1),
        shape=text[head.end() : shape_end],
        opcode=opcode,
        operands=operands,
        parameter_number=parameter_number,
        fusion_kind=fields.get("kind"),
        called=tuple(called),
        op_name=fields.get("op_name"),
        op_type=fields.get("op_type"),
        source_file=fields.get("source_file"),
        source_line=_int_or_none(fields.get("source_line")),
        stack_frame_id=_int_or_none(fields.get("stack_frame_id")),
        custom_call_target=fields.get("custom_call_target"),
    )


def _read_attribute(key: str, value: str, fields: dict[str, str], called: list[str]) -> None:
    """Collect what the warehouse keeps from one attribute other than ``metadata={...}``."""
    if key in _CALLED_KEYS:
        called += _CALLED.findall(value)
    elif key in ("kind", "custom_call_target"):
        fields[key] = _unquote(value)


def _operands(opcode: str, args: str, text: str, offset: int) -> tuple[tuple[str, ...], int | None]:
    """(operand names, parameter number) from the text between the opcode's parentheses."""
    if opcode not in _LITERAL_ARGS:
        return _operand_names(args, text, offset), None
    if opcode == "parameter":
        param = _PARAM.fullmatch(args)
        return (), int(param.group(1)) if param else None
    return (), None


_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_ENTRY = re.compile(r"([0-9]{1,19}) (.*)")
_PAIR = re.compile(r"([a-z_]+)=(-?[0-9]{1,19})")


def parse_stack_frames(lines: Iterable[str]) -> dict[int, SourceLocation]:
    """Map stack-frame id -> location of that frame, from the tables atop an HLO module.

    Reads the ``HloModule`` line, blank lines and the four tables, and stops at the first
    other line (the first computation), so a lazily read file is only read that far.
    """
    tables: dict[str, dict[int, str]] = {t: {} for t in _TABLES}
    current: dict[int, str] | None = None
    for raw in lines:
        line = raw.rstrip("\r\n")
        if not line.strip() or (current is None and line.startswith("HloModule")):
            continue
        if line in tables:
            current = tables[line]
            continue
        entry = _ENTRY.fullmatch(line)
        if current is None or entry is None:
            break
        current[int(entry.group(1))] = entry.group(2)

    def attrs(text: str) -> dict[str, int]:
        return {k: int(v) for k, v in _PAIR.findall(text)}

    def name(table: str, key: int | None) -> str | None:
        value = tables[table].get(key) if key is not None else None
        return None if value is None else _unquote(value)

    locations = {k: attrs(v) for k, v in tables["FileLocations"].items()}
    frames: dict[int, SourceLocation] = {}
    for frame_id, text in tables["StackFrames"].items():
        loc = locations.get(attrs(text).get("file_location_id", -1), {})
        frames[frame_id] = SourceLocation(
            file=name("FileNames", loc.get("file_name_id")),
            line=loc.get("line"),
            function=name("FunctionNames", loc.get("function_name_id")),
            column=loc.get("column"),
        )
    return frames
