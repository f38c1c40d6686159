"""Instruction texts read as whole columns by Arrow's RE2 kernels, for the common form.

hlo.parse_instruction reads one text at a time in Python, about 9 µs each, and a
large module prints hundreds of thousands of distinct texts. Most of them are
`%name = SHAPE opcode(%a, %b), key=value, ..., metadata={...}`, which RE2 reads in
C++ without the GIL (about 3.5 µs a text, all columns). The grammar is strict: it
takes only texts that parse_instruction reads the same way, each part matching them
in one way only, and leaves every other text to parse_instruction
(tests/test_instruction_columns.py holds the two equal, column by column).
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bufferhouse.parse import hlo, shapes
from bufferhouse.schema import TABLES_BY_NAME, arrow_schema

#: instructions column -> the hlo.Instruction attribute it is read from: the columns an
#: instruction text gives (columns.parse_batch's table, whichever way a text is read).
PARSED_FROM = {
    "opcode": "opcode",
    "shape": "shape",
    "operands": "operands",
    "parameter_number": "parameter_number",
    "fusion_kind": "fusion_kind",
    "called_computations": "called",
    "custom_call_target": "custom_call_target",
    "op_name": "op_name",
    "op_type": "op_type",
    "source_file": "source_file",
    "source_line": "source_line",
    "stack_frame_id": "stack_frame_id",
}
PARSED = pa.schema(
    [arrow_schema(TABLES_BY_NAME["instructions"]).field(name) for name in PARSED_FROM]
)

__all__ = ["other_rows", "read_fast"]

# -- patterns -------------------------------------------------------------------------------
# RE2 syntax (no lookarounds, no backreferences), from the pieces of hlo and shapes where they
# can be shared. Whitespace is plain ASCII spaces (RE2's \s and Python's differ outside ASCII),
# and no pattern takes a newline.
#
# Two kinds of pattern, for speed: RE2 tells whether a text matches with its DFA (a few ns a
# byte), but reads submatches with the NFA (~60 ns a byte) unless the pattern is one-pass
# (each byte leaves one way on; any match then reads its submatches in ~7 ns a byte) and has
# at most four groups. So _VALID, read by the DFA, holds the grammar with all its
# constraints; the passes (_HEAD_PASS, _META_PASS, _RARE_PASS), each one-pass with four
# groups at most, read the fields of the texts _VALID takes. They may accept more text than
# _VALID, never read its texts otherwise. '%' is only in names (the text's, its operands,
# called computations, control predecessors, in that order): the called computations are
# the names between the operands and the control predecessors, whatever their keys.


def _chars(spec: str) -> frozenset[str]:
    """The characters of a class body made of ranges 'a-z' and single characters."""
    out, i = set(), 0
    while i < len(spec):
        if i + 2 < len(spec) and spec[i + 1] == "-":
            out.update(chr(c) for c in range(ord(spec[i]), ord(spec[i + 2]) + 1))
            i += 3
        else:
            out.add(spec[i])
            i += 1
    return frozenset(out)


def _class(chars: frozenset[str] | set[str]) -> str:
    """A character class of `chars`, in ranges."""
    codes, parts = sorted(ord(c) for c in chars), []
    while codes:
        end = 0
        while end + 1 < len(codes) and codes[end + 1] == codes[end] + 1:
            end += 1
        low, high = re.escape(chr(codes[0])), re.escape(chr(codes[end]))
        parts.append(low if not end else f"{low}{high}" if end == 1 else f"{low}-{high}")
        codes = codes[end + 1 :]
    return "[" + "".join(parts) + "]"


def _keyed(chars: tuple[str, str], then: dict[str, str | None], default: str | None) -> str:
    """A word of `chars` (first, rest) followed by `then[word]`, or by `default` if the word
    is not in `then`; None: the word is not taken. Written as the trie of `then`'s words, so
    the pattern stays one-pass when no continuation starts with a char of the word."""
    first, rest = (_chars(c) for c in chars)
    tail = _class(rest) + "*"

    def node(word: str) -> str | None:
        alternatives = []
        nexts = sorted({w[len(word)] for w in then if len(w) > len(word) and w.startswith(word)})
        others = (rest if word else first) - set(nexts)
        ends = bool(word) and (word not in then or then[word] is not None)
        if ends and word in then:
            alternatives.append(then[word])
        if default is not None and others:  # another word, ending here or further on
            optional = "?" if ends and word not in then else ""
            alternatives.append(f"(?:{_class(others)}{tail}){optional}{default}")
        elif default is not None and ends and word not in then:
            alternatives.append(default)
        for c in nexts:
            branch = node(word + c)
            if branch is not None:
                alternatives.append(re.escape(c) + branch)
        return "(?:" + "|".join(alternatives) + ")" if alternatives else None

    out = node("")
    assert out is not None
    return out


def _word_except(chars: tuple[str, str], words: set[str] | frozenset[str]) -> str:
    """A word of `chars` that is none of `words` (RE2 has no negative lookahead)."""
    return _keyed(chars, dict.fromkeys(words), "")


# No '%' but in names: then the names after the operands are the called computations.
# A quoted string as hlo._scan skips it (any escaped char but a newline).
_STRING = r'"[^"\\\n%]*(?:\\[^\n%][^"\\\n%]*)*"'
# A quoted value whose escapes hlo._unquote reads as the char after the backslash.
_QUOTED = r'"[^"\\\n%]*(?:\\[\\"\'][^"\\\n%]*)*"'
_INNER_PLAIN = r'[^"(){}\[\]\\\n%]'  # inside brackets, commas too


def _balanced(depth: int, plain: str, percent: str = "%") -> str:
    """Text hlo._scan crosses without stopping outside brackets: `plain` chars, strings and
    bracket pairs nested at most `depth` deep (inside them any char but brackets, quotes,
    backslash, newline and `percent`)."""
    string = _STRING.replace("%", percent)
    items = [string]
    if depth:
        inner = _balanced(depth - 1, _INNER_PLAIN.replace("%", percent), percent)
        items += [rf"\{{{inner}\}}", rf"\({inner}\)", rf"\[{inner}\]"]
    return f"{plain}*(?:(?:{'|'.join(items)}){plain}*)*"


def _uncaptured(pattern: str) -> str:
    """A Python pattern of plain syntax with its groups made non-capturing."""
    token = re.compile(r"\\.|\[\^?\]?(?:\\.|[^\\\]])*\]|\((?!\?)")
    return token.sub(lambda m: "(?:" if m.group() == "(" else m.group(), pattern)


def _group(name: str | None, body: str) -> str:
    return f"(?:{body})" if name is None else f"(?P<{name}>{body})"


_NAME = hlo._NAME.pattern  # [A-Za-z_][A-Za-z0-9_.\-]*
_MARKER = shapes._INDEX_MARKER.pattern  # /*index=N*/
_ARRAY = _uncaptured(shapes._FAST.pattern)
# An array as parse_shape_at reads it (its own fast pattern), or a tuple of arrays.
_SHAPE = rf"{_ARRAY}|\((?:{_ARRAY}(?:, (?:{_MARKER})?{_ARRAY})*)?\)"
_HEAD = rf"^ *(?:ROOT )?%{_NAME} = "
# A constant's arguments as hlo._scan crosses them to the ')' that closes them; the passes
# read any arguments so (of the common form, operands have '%' at depth 0 only).
_LITERAL = _balanced(2, _INNER_PLAIN)
_ARGUMENTS = _balanced(2, r'[^"(){}\[\]\\\n]', "")
# Operands `%a, %b` (XLA writes /*index=N*/ before every fifth one).
_OPERANDS = rf"(?:%{_NAME}(?:, (?:{_MARKER})?%{_NAME})*)?"
_KEY_CHARS = ("A-Za-z_", "A-Za-z0-9_.-")
_META_KEY_CHARS = ("A-Za-z_", "A-Za-z0-9_")


def _ascii_but(chars: str) -> str:
    return _class(_chars(" -~") - set(chars))


def _ascii_value(depth: int, but: str, matched: bool = False) -> str:
    """An attribute's value as _balanced reads it, in printable ASCII without the chars of
    `but`. Small, for the one-pass programs that copy it at each node of a trie of keys
    (RE2 reads submatches one-pass only for programs of a few thousand instructions, and a
    class outside ASCII costs several); unless `matched`, any bracket closes any (what
    _VALID has checked)."""
    inside = but.replace(",", "")  # commas end a value outside brackets only
    text = _ascii_but('"\\' + inside)
    items = [f'"{text}*(?:\\\\{_ascii_but(inside)}{text}*)*"']
    if depth:
        inner = _ascii_value(depth - 1, inside, matched)
        pairs = ["{}", "()", "[]"] if matched else ["{([})]"]
        items += [f"[{re.escape(p[: len(p) // 2])}]{inner}[{re.escape(p[len(p) // 2 :])}]"
                  for p in pairs]  # fmt: skip
    plain = _ascii_but('"(){}[]\\' + but)
    return f"{plain}*(?:(?:{'|'.join(items)}){plain}*)*"


# An attribute's value, to the next ',' outside brackets and strings.
_SMALL_VALUE = _ascii_value(2, ",%", matched=True)
_PASS_VALUE = _ascii_value(2, ",")  # '%' too: called computations
_CALLED_VALUE = rf"%{_NAME}|\{{%{_NAME}(?:, %{_NAME})*\}}"
# metadata={k=v ...}: pairs one space apart, values quoted or bare. Its keys land in the same
# fields as the attributes' (hlo._metadata), so kind= and custom_call_target= are left to
# the slow path.
_META_VALUE = rf"(?:{_QUOTED}|[A-Za-z0-9_.:/+\-]*)"
_META_NUMBER = "[0-9]{1,9}"  # fits int32: larger numbers are the slow path's to word
_META_FIELDS = {
    "op_type": _META_VALUE,
    "op_name": _META_VALUE,
    "source_file": _META_VALUE,
    "source_line": _META_NUMBER,
    "stack_frame_id": _META_NUMBER,
}


_CONTROL = rf"\{{%{_NAME}(?:, %{_NAME})*\}}"


def _valid() -> str:
    """The common form, whole: what the DFA checks before any field is read."""
    pair = _keyed(
        _META_KEY_CHARS,
        {k: f"={v}" for k, v in _META_FIELDS.items()} | {"kind": None, "custom_call_target": None},
        f"={_META_VALUE}",
    )
    # Attributes parse_instruction does not read (nor stops at), and called computations
    # (the names after the operands, whatever their keys: '%' is nowhere else but in
    # control-predecessors, after them).
    skipped = hlo._CALLED_KEYS | {
        "kind", "custom_call_target", "metadata", "backend_config", "control-predecessors"
    }  # fmt: skip
    called = "|".join(sorted(hlo._CALLED_KEYS))
    other = f"(?:, (?:{_word_except(_KEY_CHARS, skipped)}=(?:{_SMALL_VALUE})|(?:{called})=(?:{_CALLED_VALUE})))*"
    return (
        rf"{_HEAD}(?:{_SHAPE}) "
        rf"(?:parameter\({_META_NUMBER}\)|constant\({_LITERAL}\)"
        rf"|{_word_except(('a-z', 'a-z0-9_-'), hlo._LITERAL_ARGS)}\({_OPERANDS}\))"
        rf"(?:, kind=[A-Za-z0-9_]+)?{other}"
        rf"(?:, custom_call_target={_QUOTED}{other})?"
        rf"(?:, control-predecessors={_CONTROL})?"
        # After metadata parse_instruction stops at backend_config without reading it.
        rf"(?:, metadata=\{{(?:{pair}(?: {pair})*)?\}}(?:, backend_config=[^%]*)?"
        rf"|, backend_config=(?:{_SMALL_VALUE}))?$"
    )


def _attributes(groups: set[str]) -> str:
    """The text to the end of its metadata, one-pass, with `groups` read. Each attribute
    and metadata pair is read after a trie of keys; backend_config is not taken, so the
    match ends before it (where parse_instruction stops). Metadata fields are read as
    `=value`, so that a key given no value ("op_name=") is not an absent one ("")."""

    def g(name: str, body: str) -> str:
        return _group(name if name in groups else None, body)

    pair = _keyed(
        _META_KEY_CHARS,
        {k: g(k, "=" + v.replace("{1,9}", "+")) for k, v in _META_FIELDS.items()},
        f"={_META_VALUE}",
    )
    then: dict[str, str | None] = {
        # '{' then pairs each followed by ' ' or '}': one copy of each group.
        "metadata": rf"=\{{(?:\}}|(?:{pair}[ }}])+)",
        "backend_config": None,
    }
    if "target" in groups:
        then["custom_call_target"] = "=" + g("target", _QUOTED)
    if "control" in groups:
        then["control-predecessors"] = "=" + g("control", _CONTROL)
    # Any other attribute (kind and called computations too) as the value it is.
    attribute = _keyed(_KEY_CHARS, then, f"=(?:{_PASS_VALUE})")
    return rf"{_HEAD}(?:{_SHAPE}) [a-z][a-z0-9_-]*\({_ARGUMENTS}\)(?:, {attribute})*"


_VALID = _valid()
# The passes: one-pass, four groups at most.
_HEAD_PASS = (
    rf"{_HEAD}(?P<shape>{_SHAPE}) (?P<opcode>[a-z][a-z0-9_-]*)\((?P<args>{_ARGUMENTS})\)"
    rf"(?:, kind=(?P<kind>[A-Za-z0-9_]+))?"
)
_META_PASS = _attributes({"op_name", "source_file", "source_line", "stack_frame_id"})
#: Read only in texts that hold one of these (most hold none).
_RARE_PASS = _attributes({"op_type", "target", "control"})
_RARE_MARKS = "op_type=|custom_call_target=|control-predecessors="
_CALLED_MARKS = r"=\{?%"
_SPLIT_NAMES = rf"(?:, (?:{_MARKER})?)?%"


# -- the columns ------------------------------------------------------------------------------
def _where(n: int, rows: np.ndarray) -> pa.Array:
    """Take indexes that spread len(rows) values over `n` rows: at `rows`, null elsewhere."""
    where = np.full(n, -1, np.int64)
    where[rows] = np.arange(len(rows))
    return pa.array(where, pa.int64(), mask=where < 0)


def _matching(texts: pa.Array, pattern: str) -> np.ndarray:
    """Indexes of the texts `pattern` matches (a DFA search: no submatches)."""
    found = pc.fill_null(pc.match_substring_regex(texts, pattern), False)
    return np.flatnonzero(found.to_numpy(zero_copy_only=False))


def _read(
    texts: pa.Array, pattern: str, unread: np.ndarray, rows: np.ndarray | None = None
) -> pa.StructArray:
    """`pattern`'s groups in each text (of the texts at `rows`: null elsewhere), marking in
    `unread` any text of those it does not read (none should be)."""
    some = texts if rows is None else texts.take(pa.array(rows, pa.int64()))
    found = pc.extract_regex(some, pattern)
    if found.null_count:
        failed = np.flatnonzero(found.is_null().to_numpy(zero_copy_only=False))
        unread[failed if rows is None else rows[failed]] = True
    return found if rows is None else found.take(_where(len(texts), rows))


def _field(found: pa.Array, name: str) -> pa.Array:
    """A group of a pass as a column: null where the group took no part in the match (RE2
    gives ""), or where the pass was not run."""
    values = pc.struct_field(found, name)
    return pc.if_else(pc.equal(values, ""), pa.scalar(None, pa.string()), values)


def _unquoted(values: pa.Array) -> pa.Array:
    """Values as hlo._unquote reads them: quoted ones without their quotes and with each
    escape (only \\, \" and \' are taken) as the char it escapes; bare ones as they are."""
    quoted = pc.starts_with(values, '"')
    inner = pc.utf8_slice_codeunits(values, 1, -1)
    if pc.any(pc.match_substring(inner, "\\")).as_py():
        inner = pc.replace_substring_regex(inner, r"\\(.)", r"\1")
    return pc.if_else(quoted, inner, values)


def _meta(found: pa.Array, key: str) -> pa.Array:
    """A metadata field read as `=value`: the value, null where the key is absent."""
    return pc.utf8_slice_codeunits(_field(found, key), 1)


def _names(joined: pa.Array) -> pa.Array:
    """Lists of names from `%a, %b`-like strings ("" gives []): split at each '%' with the
    separator before it, the empty piece before the first '%' dropped."""
    return pc.list_slice(pc.split_pattern_regex(joined, _SPLIT_NAMES), 1)


def _called(texts: pa.Array, operands: pa.Array, control: pa.Array) -> pa.ListArray:
    """The called computations of texts of the common form: the names after the text's own
    name and its operands, and before its control predecessors ('%' is nowhere else)."""
    pieces = pc.split_pattern(texts, "%")
    counts = pc.list_value_length(pieces).to_numpy()
    skip = 2 + pc.list_value_length(operands).to_numpy()
    last = counts - pc.fill_null(pc.count_substring(control, "%"), 0).to_numpy()
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    at = np.arange(counts.sum()) - np.repeat(starts, counts)
    keep = (np.repeat(skip, counts) <= at) & (at < np.repeat(last, counts))
    names = pc.extract_regex(pieces.flatten().filter(pa.array(keep)), rf"^(?P<name>{_NAME})")
    offsets = np.concatenate(([0], np.cumsum(last - skip))).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), names.field("name"))


def read_fast(texts: pa.Array | pa.ChunkedArray) -> tuple[pa.Table, np.ndarray]:
    """The PARSED columns of the texts of the common form, and the (ascending) indexes of
    those texts; hlo.parse_instruction reads each of them the same."""

    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    rows = _matching(texts, _VALID)
    while True:
        if not len(rows):
            return PARSED.empty_table(), rows
        some = texts.take(pa.array(rows, pa.int64())) if len(rows) < len(texts) else texts
        unread = np.zeros(len(rows), bool)
        head = _read(some, _HEAD_PASS, unread)
        meta = _read(some, _META_PASS, unread)
        rare = _read(some, _RARE_PASS, unread, _matching(some, _RARE_MARKS))
        if not unread.any():
            break
        # Texts _VALID took that a pass did not read go the slow way (none should:
        # tests/test_instruction_columns.py checks that rows are all _VALID took).
        rows = rows[~unread]
    texts = some
    opcode, args = head.field("opcode"), head.field("args")
    is_parameter = pc.equal(opcode, "parameter")
    literal = pc.or_(is_parameter, pc.equal(opcode, "constant"))
    operands = _names(pc.if_else(literal, "", args))
    calling = pa.array(_matching(texts, _CALLED_MARKS), pa.int64())
    # The called computations of the texts that have some, then [] for the others.
    no_calls = pa.array([[]], pa.list_(pa.string()))
    called = pa.concat_arrays(
        [
            _called(
                texts.take(calling), operands.take(calling), _field(rare, "control").take(calling)
            ),
            no_calls,
        ]
        if len(calling)
        else [no_calls]
    )
    where = np.full(len(texts), len(calling), np.int64)
    where[calling.to_numpy()] = np.arange(len(calling))
    columns = {
        "opcode": opcode,
        "shape": head.field("shape"),
        "operands": operands,
        "parameter_number": pc.cast(pc.if_else(is_parameter, args, None), pa.int32()),
        "fusion_kind": _field(head, "kind"),
        "called_computations": called.take(pa.array(where)),
        "custom_call_target": _unquoted(_field(rare, "target")),
        "op_name": _unquoted(_meta(meta, "op_name")),
        "op_type": _unquoted(_meta(rare, "op_type")),
        "source_file": _unquoted(_meta(meta, "source_file")),
        "source_line": pc.cast(_meta(meta, "source_line"), pa.int32()),
        "stack_frame_id": pc.cast(_meta(meta, "stack_frame_id"), pa.int32()),
    }
    return pa.Table.from_arrays([columns[name] for name in PARSED.names], schema=PARSED), rows


def other_rows(n: int, rows: np.ndarray) -> np.ndarray:
    """The indexes of 0..n-1 not in `rows`: the texts read_fast left to the slow path."""
    left = np.ones(n, bool)
    left[rows] = False
    return np.flatnonzero(left)
