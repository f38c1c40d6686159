"""The compiled instruction-text kernel (native/_instructions.c, through
instructions.read_fast) against hlo.parse_instruction, on texts of the common form and
near misses: quotes and escapes, brackets, metadata keys, numbers at the int32 and int64
limits, non-ASCII and whitespace. Whatever the kernel reads must be parse_instruction's
columns; a text parse_instruction refuses is never read; any other text may be left.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from bufferhouse.errors import ParseError
from bufferhouse.parse.text import columns, instructions, native
from tests.parse.text.test_instruction_columns import check, expected

pytestmark = pytest.mark.skipif(native.MISSING is not None, reason="not built")
EXAMPLES = settings(max_examples=400, deadline=None, derandomize=True)


def mostly(good, odd):
    """`good` about nine times in ten, else `odd`."""
    return st.sampled_from(range(10)).flatmap(lambda i: odd if i == 9 else good)


NAMES = mostly(
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_.\-]{0,4}", fullmatch=True),
    st.sampled_from(["1a", "a b", "é", ""]),
)
ESCAPES = ["\\\\", '\\"', "\\'", "\\n", "\\t", "\\?", "\\x41", "\\x4", "\\xg", "\\101", "\\7",
           "\\0", "\\303\\251", "\\377", "\\351", "\\é", "\\z", "\\\n", "\n", "\r", "\x00"]  # fmt: skip
QUOTED = st.lists(
    mostly(st.sampled_from([*"ab /.:é,=%", "{}", "()", "[", "😀"]), st.sampled_from(ESCAPES)),
    max_size=6,
).map(lambda parts: '"' + "".join(parts) + '"')
BARE = st.sampled_from(
    ["", "x", "kLoop", "a=b", "a,b", "a\\b", "é", "a\u00a0b", "x}", "{1}", "a b"]
)
NUMBERS = st.sampled_from(
    ["0", "7", "007", "2147483647", "2147483648", "-1", "-2147483648", "-2147483649",
     "9" * 19, "9" * 20, '"12"', '"-3"', '"1 2"', "+5", "-", "1e3", "٣"]
)  # fmt: skip
META_KEYS = mostly(
    st.sampled_from(["op_name", "op_type", "source_file", "source_line", "stack_frame_id"]),
    st.sampled_from(["kind", "custom_call_target", "source_end_line", "x.y", "1k", "_k"]),
)


@st.composite
def metadata(draw) -> str:
    pairs = []
    for key in draw(st.lists(META_KEYS, max_size=5)):
        numeric = key in ("source_line", "stack_frame_id")
        value = draw(mostly(NUMBERS if numeric else QUOTED, st.one_of(BARE, NUMBERS, QUOTED)))
        pairs.append(f"{key}={value}")
    spaces = draw(mostly(st.just(" "), st.sampled_from(["", "  ", "\t", "\u00a0"])))
    return "{" + spaces.join(pairs) + "}"


CALLED = mostly(
    st.one_of(NAMES.map(lambda n: "%" + n), st.lists(NAMES, min_size=1, max_size=3).map(
        lambda ns: "{" + ", ".join("%" + n for n in ns) + "}")),
    st.sampled_from(["{}", "%a %b", "a", "{%a,%b}", "%a}", "{%a, }"]),
)  # fmt: skip
NESTED = st.sampled_from(
    ['{"a":{"b":[1,{"c":"d,e"}]}}', "{0,1}", "{size=3x3}", "(a, [b])", '"s\\",t"', "",
     "{" * 130 + "}" * 130, "{" * 20 + "}" * 20, "{(})", "{", '"open', "]"]
)  # fmt: skip
ATTRIBUTES = st.one_of(
    st.tuples(st.just("kind"), st.one_of(st.sampled_from(["kLoop", "kOutput"]), BARE, QUOTED)),
    st.tuples(st.just("custom_call_target"), st.one_of(QUOTED, BARE)),
    st.tuples(st.sampled_from(["calls", "to_apply", "branch_computations", "body"]), CALLED),
    st.tuples(st.sampled_from(["dimensions", "backend_config", "control-predecessors"]), NESTED),
    st.tuples(st.just("metadata"), st.one_of(metadata(), st.sampled_from(["x", "{", "{a=b}c"]))),
)
SHAPES = mostly(
    st.sampled_from(["f32[]", "f32[8,128]{1,0:T(8,128)(2,1)E(4)S(1)}", "s32[2]{0:T(2,*)}",
                     "f32[<=4,?]{1,0}", "(f32[], /*index=1*/s32[2]{0})", "()",
                     "((f32[], s32[2]{0}), /*index=1*/())", "(((f32[])))"]),
    st.sampled_from(["f32[" + "9" * 20 + "]", "f32[2]{0:X(1)}", "(/*index=0*/f32[])",
                     "(" * 40 + "f32[]" + ")" * 40, "(f32[],s32[])", "b(f32[])", "F32[]",
                     "f32[2]{0}{1}", "f32[2]{0", "f32[2]sparse{1}"]),
)  # fmt: skip
ARGUMENTS = {
    "parameter": NUMBERS,
    "constant": mostly(
        st.sampled_from(["0.5", "{ {1, 2}, {3, 4} }", '"a)b"']),
        st.sampled_from(["{" * 200 + "}" * 200, "(", "x)y"]),
    ),
    "add": st.lists(
        mostly(
            st.one_of(
                NAMES.map(lambda n: "%" + n),
                st.sampled_from(["f32[2]{0} %a", "(f32[], s32[]) %t", "/*index=5*/f32[] %b"]),
            ),
            st.sampled_from(["/*index=5*/%b", "f32[] %a %b", "f32[]%a", "f32[]  %a", "", "0"]),
        ),
        max_size=6,
    ).map(", ".join),
}


@st.composite
def texts(draw) -> str:
    head = draw(
        mostly(st.sampled_from(["", "ROOT ", "  "]), st.sampled_from(["ROOT  ", "root ", "\u00a0"]))
    )
    opcode = draw(st.sampled_from(["parameter", "constant", "add", "fusion", "custom-call"]))
    args = draw(ARGUMENTS.get(opcode, ARGUMENTS["add"]))
    attributes = "".join(
        draw(mostly(st.just(", "), st.sampled_from([",", " , ", ",\u00a0"]))) + f"{k}={v}"
        for k, v in draw(st.lists(ATTRIBUTES, max_size=5))
    )
    tail = draw(
        mostly(st.just(""), st.sampled_from([" ", "\r", "\u00a0", "\u2028", "\x85", " x", "é"]))
    )
    return f"{head}%{draw(NAMES)} = {draw(SHAPES)} {opcode}({args}){attributes}{tail}"


@EXAMPLES
@given(st.lists(texts(), min_size=1, max_size=6))
def test_generated_texts_read_as_parse_instruction_reads_them(batch):
    event(f"{check(batch)} of {len(batch)} read")


#: Texts the kernel must read (not leave): escapes, number limits, keys in metadata that
#: set other fields, dynamic shapes, whitespace at the end, deep brackets.
READ = [
    '%a = f32[] add(%b), metadata={op_name="a\\303\\251\\x41\\n\\"\\q" source_line=2147483647 stack_frame_id=-2147483648}',
    '%a = f32[<=4,?]{1,0} custom-call(%b), custom_call_target="x\\"y", kind=kOutput',
    "%a = f32[] parameter(2147483647)",
    "%a = f32[] fusion(%b), kind=kLoop\r",
    "%w = ((f32[], s32[2]{0}), /*index=1*/()) while(%t), condition=%c, body=%b",
    "%a = f32[2]{0} add(f32[2]{0} %b, (f32[], /*index=1*/s32[]) %c, /*index=2*/%d)",
    "%a = f32[] add(%b) \u2028",
    "%a = f32[] add(%b), metadata={source_line=" + "9" * 20 + ' op_type=x,y stack_frame_id="7"}',
    '%a = f32[] fusion(%b), kind=kLoop, metadata={kind="kOther" custom_call_target=t}',
    "%a = f32[] add(%b), to_apply=%f, metadata={op_name=x}, backend_config={\"\\\n'}\r",
    '%a = (f32[], s32[]) while(%t), condition=%c, body=%b, frontend_attributes={x="é"}\u00a0',
    "%a = f32[] constant(" + "{" * 100 + "}" * 100 + "), dimensions=" + "[" * 100 + "]" * 100,
    "ROOT %t = (f32[2]{0:T(2)S(1)}, /*index=1*/s32[]) tuple(%a, /*index=1*/%b), sharding={{maximal device=0}, {replicated}}",
    '%k = f32[] conditional(%p, %x, %y), branch_computations={%t, %f.1}, metadata={op_type="\\303\\xa9"}',
]
EDITS = st.tuples(
    st.integers(0, 250),
    st.integers(0, 3),
    st.sampled_from(['"', "\\", "{", "}", "(", ")", "[", "]", ",", " ", "=", "%", "é", "\u00a0",
                     "\x00", "\\3", "\\x", "9", "-", "\r", "\n", "kind=", "op_name=", ", to_apply=%g"]),
)  # fmt: skip


@EXAMPLES
@given(st.sampled_from(READ), st.lists(EDITS, min_size=1, max_size=2))
def test_damaged_texts_read_as_parse_instruction_reads_them(text, edits):
    for at, cut, chunk in edits:
        text = text[:at] + chunk + text[at + cut :]
    event(f"{check([text])} read")


def test_what_the_kernel_reads():
    assert check(READ) == len(READ)


def test_what_the_kernel_leaves():
    """Texts whose columns the kernel cannot give: numbers past int32 (parse_batch words
    them), bytes that would not be UTF-8 once unquoted (parse_instruction replaces
    them), nesting past its bound; and texts parse_instruction refuses."""
    left = [
        "%a = f32[] parameter(2147483648)",
        "%a = f32[] add(%b), metadata={stack_frame_id=-2147483649}",
        '%a = f32[] add(%b), metadata={op_name="\\377"}',
        "%a = f32[] constant(" + "{" * 200_000 + "}" * 200_000 + ")",
        "%a = f32[] add(%b), dimensions=" + "(" * 1_000_000,
        '%a = f32[] add(%b), metadata={op_name="' + "\\" * 999_999,
        "%a = f32[] add(%b), dimensions={0)",
        "%a = (/*index=0*/f32[], s32[]) tuple(%b, %c)",
        "%a = " + "(" * 101 + "f32[]" + ")" * 101 + " tuple()",
    ]
    assert check(left) == 0
    with pytest.raises(ParseError, match="stack_frame_id"):
        columns.parse_batch(pa.array(left[1:2]), pa.array([1], pa.int64()), "dump.txt")


def test_long_texts_are_read_in_one_pass():
    many = "%a = f32[] add(%b)" + ", x={1}" * 100_000 + ", to_apply=%f" * 1000
    table, rows = instructions.read_fast(pa.array([many]))
    assert rows.tolist() == [0] and table.column("called_computations")[0].as_py() == ["f"] * 1000


def test_texts_of_any_string_column_and_nulls():
    """Slices, large_string, nulls (never read) and invalid UTF-8 (never read: the kernel
    writes only valid strings)."""
    texts = ["not one", "%a = f32[] add(%b)", None, "%c = s32[] parameter(1)"]
    whole = instructions.read_fast(pa.array(texts))
    assert whole[1].tolist() == [1, 3]
    for array, rows in [
        (pa.array(texts).slice(1), [0, 2]),
        (pa.array(texts, pa.large_string()), [1, 3]),
        (pa.chunked_array([texts[:2], texts[2:]]), [1, 3]),
    ]:
        table, got = instructions.read_fast(array)
        assert got.tolist() == rows and table.equals(whole[0])
    hidden = pa.StringArray.from_buffers(  # a null whose offsets span a text
        2, pa.py_buffer(b"\0\0\0\0\x12\0\0\0\x12\0\0\0"), pa.py_buffer(b"%a = f32[] add(%b)"),
        pa.py_buffer(b"\x02"),
    )  # fmt: skip
    assert instructions.read_fast(hidden)[1].tolist() == []
    raw = b'%a = f32[] add(%b), metadata={op_name="\xff"}'
    offsets = pa.py_buffer(b"\0\0\0\0" + len(raw).to_bytes(4, "little"))
    bad = pa.StringArray.from_buffers(1, offsets, pa.py_buffer(raw))
    assert instructions.read_fast(bad)[1].tolist() == []


def test_the_columns_are_valid_arrow():
    batch = [
        "%a = f32[] add(%b, %c), to_apply=%f",
        "%a = f32[] add(",
        '%a = f32[] add(%b), custom_call_target="é", metadata={op_name="x"}',
    ]
    table, rows = instructions.read_fast(pa.array(batch))
    table.validate(full=True)
    assert table.schema == instructions.PARSED and rows.tolist() == [0, 2]
    assert table.to_pylist() == [expected(batch[0]), expected(batch[2])]
