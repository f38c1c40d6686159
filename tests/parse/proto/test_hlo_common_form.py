"""parse_instruction's common-form regex against the general tokenizer (_parse_general).

The regex is only a fast path: for every text, parse_instruction must return what
_parse_general returns, or raise the same error (message and offset). Compared on every
instruction text of the test data and on generated and damaged texts; a text on which the
two disagree is a bug in the regex.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from bufferhouse.parse import hlo
from bufferhouse.parse.hlo import InstructionSyntaxError, parse_instruction
from tests.conftest import DATA

pytestmark = pytest.mark.slow  # every generated and damaged instruction text, both parsers

MARK = " from instruction:"
EXAMPLES = settings(max_examples=1_000, deadline=None, derandomize=True)


def outcome(parse, text: str) -> object:
    try:
        return parse(text)
    except InstructionSyntaxError as e:
        return (type(e), str(e), e.pos, e.text)


def assert_same(text: str) -> str:
    """Which path parse_instruction took, after checking that both paths agree."""
    fast, general = outcome(parse_instruction, text), outcome(hlo._parse_general, text)
    assert fast == general, (
        f"{text!r}:\n  parse_instruction: {fast}\n  _parse_general:    {general}"
    )
    return "common form" if hlo._COMMON_FORM.match(text) else "general path"


def _lines(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8", errors="replace", newline="") as f:
            return f.read().split("\n")
    except (OSError, EOFError, zlib.error):  # the corrupt .gz fixtures
        return []


def _data_texts() -> list[str]:
    """Every distinct ` from instruction:` text of the test data, as found and with the one
    leading space that ingest drops, plus the HLO lines of tests/data/instructions.txt."""
    paths = [
        *sorted(DATA.glob("samples/*.txt")),
        *sorted(DATA.glob("corpus/**/*.txt.gz")),
        *(p for d in ("edge", "bad") for p in sorted((DATA / d).rglob("*")) if p.is_file()),
    ]
    texts: dict[str, None] = {}
    for path in paths:
        for line in _lines(path):
            if MARK in line:
                text = line.partition(MARK)[2]
                texts[text] = texts[text[1:] if text.startswith(" ") else text] = None
    for line in (DATA / "instructions.txt").read_text().splitlines():
        texts[line] = None
    return list(texts)


DATA_TEXTS = _data_texts()


def test_data_texts_agree_and_mostly_take_the_regex():
    assert len(DATA_TEXTS) > 4_000
    for text in DATA_TEXTS:
        assert_same(text)
    common = sum(hlo._COMMON_FORM.match(t) is not None for t in DATA_TEXTS)
    assert common >= 0.95 * len(DATA_TEXTS), f"{common} of {len(DATA_TEXTS)} in the common form"


# -- generated texts: mostly what XLA prints, with a corner case in some piece ---------------
def mostly(good: st.SearchStrategy[str], odd: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """``good`` about nine times in ten, else ``odd`` (shrinking towards ``good``)."""
    return st.sampled_from(range(10)).flatmap(lambda i: odd if i == 9 else good)


NAMES = mostly(
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_.\-]{0,6}", fullmatch=True),
    st.sampled_from(["1a", "a b", "a=b", "a%b", "ROOT", "a)", "é", ""]),
)
ARRAYS = st.builds(
    lambda elem, dims, layout: f"{elem}[{','.join(dims)}]{layout}",
    mostly(st.sampled_from(["f32", "u32", "pred", "s4", "bf16", "token"]), st.just("F32")),
    st.lists(mostly(st.sampled_from(["0", "2", "128"]), st.sampled_from(["?", "<=4", "1" * 20, ""])), max_size=3),
    mostly(
        st.sampled_from(["", "{}", "{0}", "{1,0}", "{1,0:T(8,128)}", "{0:T(2,128)(1,1)E(4)S(1)}", "{:T(128)S(6)}", "{0:T(2,*)}"]),
        st.sampled_from(["{0:S(1)E(4)}", "{0:X(1)}", "{0", "sparse{1}", "{0:E(x)}", "{0}{1}", "{,}"]),
    ),
)  # fmt: skip


@st.composite
def shapes(draw, depth: int = 0) -> str:
    if depth == 2 or draw(st.integers(0, 3)):
        return draw(ARRAYS)
    parts = draw(st.lists(shapes(depth + 1), max_size=7))
    text = ""
    for i, part in enumerate(parts):
        text += "" if i == 0 else draw(mostly(st.just(", "), st.sampled_from([",", ",  "])))
        if i and i % 5 == 0:
            text += draw(mostly(st.just(f"/*index={i}*/"), st.just("")))
        text += part
    return draw(mostly(st.just("("), st.just("b("))) + text + ")"


OPERANDS = mostly(
    NAMES.map(lambda n: "%" + n),
    st.sampled_from(
        ["x", "f32[2]{0} %p.1", "/*index=5*/%f", "%1x", "0", " 3 ", "{...}", "{ {1, 0}, {0, 1} }",
         '"a)b"', '"a\\"b"', "(f32[], s32[]) %t", "/* x */ %y", "%a(b)", "%a]", "[%b"]
    ),
)  # fmt: skip
STRINGS = mostly(
    st.text(alphabet='ab "\\{},=()[]\n/é', max_size=8).map(
        lambda s: '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
    ),
    st.sampled_from(['"a\\303\\251"', '"\\x41\\t"', '"a\\\nb"', '"unterminated', '"q\\"x" y"']),
)
META_PAIRS = st.tuples(
    mostly(
        st.sampled_from(["op_type", "op_name", "op_name", "source_file", "source_line", "stack_frame_id", "source_end_line", "deduplicated_name"]),
        st.sampled_from(["kind", "custom_call_target", "profile_type", "x.y", "1k", "op_names"]),
    ),
    mostly(
        st.one_of(STRINGS, st.sampled_from(["7", "90", "0"])),
        st.sampled_from(["-5", "0012", "9" * 20, "", "abc", "{1,2}", "x}", "a=b", "1 2", "x)"]),
    ),
)  # fmt: skip


@st.composite
def metadata(draw) -> str:
    body = ""
    for i, (key, value) in enumerate(draw(st.lists(META_PAIRS, max_size=6))):
        body += (
            draw(mostly(st.just(" "), st.sampled_from(["", "  ", "\n"]))) if i else ""
        ) + f"{key}={value}"
    return draw(mostly(st.just("{"), st.just(" {"))) + body + "}"


ATTRIBUTES = mostly(
    st.one_of(
        st.tuples(st.just("kind"), st.sampled_from(["kLoop", "kOutput", "kCustom"])),
        st.tuples(st.sampled_from(["calls", "to_apply", "body", "condition"]), NAMES.map(lambda n: "%" + n)),
        st.tuples(st.sampled_from(["branch_computations", "called_computations"]), st.just("{%a, %b.1}")),
        st.tuples(st.just("custom_call_target"), STRINGS),
        st.tuples(st.sampled_from(["dimensions", "window", "sharding", "op_name"]), st.sampled_from(["{0,1}", "{size=3x3 stride=2x2}", "{}", "{replicated}", "x"])),
        st.tuples(st.just("metadata"), metadata()),
        st.tuples(st.just("backend_config"), st.sampled_from(['{"a":{"b":[1,{"c":"d,e"}]},"f":"}"}', '{"x":{"y":{"z":{"w":[1]}}}}', '"s"', "{}"])),
    ),
    st.tuples(
        st.sampled_from(["kind", "calls", "metadata", "backend_config", "x.y-z", "1bad", "metadata "]),
        st.sampled_from(["kOutput ", "%c, %d", "{", "}", "[1,2]", "(a, b)", "", "{a=b}{c=d}", '"x'])
    ),
)  # fmt: skip


@st.composite
def instruction_texts(draw) -> str:
    head = draw(
        mostly(st.sampled_from(["", "ROOT "]), st.sampled_from(["  ROOT ", " ", "ROOT  ", "root "]))
    )
    name = draw(mostly(st.just("%"), st.just(""))) + draw(NAMES)
    opcode = draw(
        mostly(
            st.sampled_from(
                ["add", "fusion", "parameter", "constant", "tuple", "custom-call", "while"]
            ),
            st.sampled_from(["Add", "a b", ""]),
        )
    )
    if opcode in ("parameter", "constant"):
        args = draw(
            mostly(
                st.sampled_from(["0", "12", "{...}"]),
                st.sampled_from(["007", " 3 ", "1" * 20, "", "x", "%p", "{{1},{2}}"]),
            )
        )
    else:
        args = ""
        for i, operand in enumerate(draw(st.lists(OPERANDS, max_size=7))):
            args += (
                "" if i == 0 else draw(mostly(st.just(", "), st.sampled_from([",", ",  ", " ,"])))
            )
            if i and i % 5 == 0:
                args += draw(mostly(st.just(f"/*index={i}*/"), st.just("")))
            args += operand
    attributes = "".join(
        draw(mostly(st.just(", "), st.sampled_from([",", ",  ", ",\n", " , "]))) + f"{k}={v}"
        for k, v in draw(st.lists(ATTRIBUTES, max_size=5))
    )
    tail = draw(mostly(st.just(""), st.sampled_from([" ", "\r", "\n", ",", " junk", ")", ', x="'])))
    equals = draw(mostly(st.just(" = "), st.sampled_from(["=", " =  "])))
    space = draw(mostly(st.just(" "), st.sampled_from(["  ", ""])))
    return f"{head}{name}{equals}{draw(shapes())}{space}{opcode}({args}){attributes}{tail}"


@EXAMPLES
@given(instruction_texts())
def test_generated_texts_agree(text):
    event(assert_same(text))


CHUNKS = st.sampled_from(
    ['"', "\\", "{", "}", "(", ")", "[", "]", ",", " ", "=", "%", "\n", "/*index=5*/", "ROOT ",
     ", backend_config={}", ", metadata={}", ' op_name="x"', " kind=kLoop", '\\"', "é", "\x00"]
)  # fmt: skip


def _damage(text: str, edits: list[tuple[int, int, str]]) -> str:
    """`text` with each (at, cut, chunk) edit: `cut` characters at `at` replaced by `chunk`."""
    for at, cut, chunk in edits:
        at = min(at, len(text))
        text = text[:at] + chunk + text[at + cut :]
    return text


#: Real instruction texts of the test data, damaged by one to three edits.
DAMAGED_TEXTS = st.builds(
    _damage,
    st.sampled_from(DATA_TEXTS),
    st.lists(st.tuples(st.integers(0, 400), st.integers(0, 6), CHUNKS), min_size=1, max_size=3),
)


@EXAMPLES
@given(DAMAGED_TEXTS)
def test_damaged_data_texts_agree(text):
    event(assert_same(text))


@EXAMPLES
@given(st.text(alphabet='%= fu32[]{}(),:/*"\\abcdefkmnoprstxyz.0123456789\n', max_size=80))
def test_arbitrary_texts_agree(text):
    event(assert_same(text))


def test_regex_readings_that_the_general_path_rejects_or_reads_otherwise():
    """Corner cases the regex must not take, or must read as _parse_general does."""
    for text in [
        '%a = f32[] add(%b), metadata={a=xop_name="y"}',  # _metadata_slow: no op_name
        '%a = f32[] add(%b), metadata={op_name="x" op_name="y"}',  # the last one wins
        '%a = f32[] add(%b), metadata={op_name="x"}, metadata={op_name="y"}',
        '%a = f32[] add(%b), metadata={kind="k"}, kind=kLoop',
        "%a = f32[] fusion(%b), kind=kLoop, metadata={kind=kOther}",
        '%a = f32[] add(%b), backend_config={"x":{"y":1}}, metadata={op_name="x"}',
        '%a = f32[] add(%b), metadata={op_name="x"}, backend_config={{{, junk',
        '%a = f32[] add(%b), metadata={op_name="x"}, sharding={replicated}',
        '%a = f32[] add(%b), metadata={op_name="a\\\nb"}',
        "%a = f32[] add(%b), metadata={source_line=0012 stack_frame_id=-3}",
        "%a = f32[] add(%b), metadata={source_line=99999999999999999999}",
        "%a = f32[] add(%b), metadata={ op_name=x}, kind=kLoop",
        "%a = f32[] parameter(007)",
        "%a = f32[] parameter( 3 )",
        "%a = (f32[], f32[]) tuple(%b, /*index=1*/%c), calls=%x, calls=%y",
        "%a = f32[2]{0}{1} add(%b)",
        "%a = f32[2]{0:S(1)E(4)} add(%b)",
        "%a = (f32[2]{0}, (s32[])) tuple(%b, %c)",
        "%a = f32[] add(%b) ",
        "%a = f32[] add(%b), kind=kLoop ",
    ]:
        assert_same(text)
