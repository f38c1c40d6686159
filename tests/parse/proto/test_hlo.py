"""HLO instruction text and stack-frame tables (docs/format.md §4.2, §11.7–11.8)."""

from __future__ import annotations

import contextlib
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bufferhouse.parse.hlo import (
    Instruction,
    InstructionSyntaxError,
    SourceLocation,
    parse_instruction,
    parse_stack_frames,
)
from bufferhouse.parse.shapes import parse_shape
from tests.conftest import DATA

# Distinct `from instruction:` texts of the dev corpus and samples, plus HLO module lines for
# opcodes that define no buffer (get-tuple-element, bitcast, call, ...).
CORPUS = (DATA / "instructions.txt").read_text().splitlines()


def _depths(text: str, depth: int):
    for c in text:
        depth += (c in "([{") - (c in ")]}")
        yield c, depth


def _independent_split(text: str) -> tuple[str, str, str, str]:
    """(name, shape, opcode, operand text) by bracket counting, without the parser."""
    head, _, rest = text.removeprefix("ROOT ").partition(" = ")
    i = next(k for k, (c, d) in enumerate(_depths(rest, 0)) if c == " " and d == 0)
    opcode, _, args = rest[i + 1 :].partition("(")
    j = next(k for k, (_, d) in enumerate(_depths(args, 1)) if d == 0)
    return head.lstrip("%"), rest[:i], opcode, args[:j]


def test_corpus_data_covers_opcodes():
    opcodes = {_independent_split(t)[2] for t in CORPUS}
    for op in (
        "while",
        "conditional",
        "fusion",
        "constant",
        "parameter",
        "tuple",
        "get-tuple-element",
        "sort",
        "reduce",
        "call",
        "scatter",
        "dot",
    ):
        assert op in opcodes
    assert len(CORPUS) >= 250


@pytest.mark.parametrize("text", CORPUS)
def test_corpus_instructions(text):
    name, shape, opcode, args = _independent_split(text)
    inst = parse_instruction(text)
    assert (inst.name, inst.shape, inst.opcode) == (name, shape, opcode)
    parse_shape(inst.shape)
    if opcode in ("constant", "parameter"):
        assert inst.operands == ()
    else:
        assert inst.operands == tuple(re.findall(r"%([\w.\-]+)", args))
    if opcode == "parameter":
        assert inst.parameter_number == int(args)
    if opcode == "fusion":
        assert inst.fusion_kind is not None and inst.fusion_kind.startswith("k")
    expected_called = re.findall(
        r"(?:calls|to_apply|body|condition|branch_computations)=\{?(%[^,}]+(?:, %[^,}]+)*)", text
    )
    assert inst.called == tuple(
        n.lstrip("%") for group in expected_called for n in group.split(", ")
    )
    if "stack_frame_id=" in text:
        assert inst.stack_frame_id == int(re.search(r"stack_frame_id=(\d+)", text).group(1))
    if " source_line=" in text:
        assert inst.source_line == int(re.search(r" source_line=(\d+)", text).group(1))
    if 'op_name="' in text:
        assert inst.op_name and inst.op_name in text


def test_fusion_example_from_brief():
    text = (
        "%fusion.40 = (u32[1]{0:T(128)}, u32[1]{0:T(128)}) fusion(%Arg_0.1), kind=kLoop, "
        'calls=%fused_computation.56, metadata={op_name="jit(_normal)/jit(main)/slice" '
        'source_file="/home/x/pallas_reference.py" source_line=90}, '
        'backend_config={"flag_configs":[],"scoped_memory_configs":[],"used_scoped_memory_'
        'configs":[],"output_chunk_bound_config":{"output_chunk_bound":["1"]}}'
    )
    assert parse_instruction(text) == Instruction(
        name="fusion.40",
        shape="(u32[1]{0:T(128)}, u32[1]{0:T(128)})",
        opcode="fusion",
        operands=("Arg_0.1",),
        fusion_kind="kLoop",
        called=("fused_computation.56",),
        op_name="jit(_normal)/jit(main)/slice",
        source_file="/home/x/pallas_reference.py",
        source_line=90,
    )


def test_metadata_quoting():
    text = (
        r'%add.1 = f32[2]{0} add(%a, %b), metadata={op_type="Add" '
        r'op_name="jit(f)/a \"quoted\" name=x, y} {" source_file="/tmp/my dir/f.py" '
        r'source_line=7 source_end_line=9 stack_frame_id=3 deduplicated_name="add"}, '
        r'frontend_attributes={_xla_x="1,2"}'
    )
    inst = parse_instruction(text)
    assert inst.op_name == 'jit(f)/a "quoted" name=x, y} {'
    assert (inst.op_type, inst.source_file, inst.source_line, inst.stack_frame_id) == (
        "Add",
        "/tmp/my dir/f.py",
        7,
        3,
    )
    assert inst.operands == ("a", "b")


def test_metadata_octal_escapes_are_utf8():
    inst = parse_instruction(r'%x = f32[] negate(%y), metadata={op_name="caf\303\251\t\\"}')
    assert inst.op_name == "café\t\\"


@pytest.mark.parametrize(
    ("text", "target", "operands", "called"),
    [
        (
            "%custom-call.1 = f32[4,4]{1,0} custom-call(f32[4,4]{1,0} %p.1), "
            'custom_call_target="Sharding", sharding={replicated}',
            "Sharding",
            ("p.1",),
            (),
        ),
        (
            "%cublas-gemm.1 = (f32[2,2]{1,0}, s8[0]{0}) custom-call(%p0, %p1), "
            'custom_call_target="__cublas$gemm", backend_config={"gemm_backend_config":'
            '{"alpha_real":1,"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"]}},'
            '"note":"a, b) c\\"d"}',
            "__cublas$gemm",
            ("p0", "p1"),
            (),
        ),
        (
            "%tpu_custom_call.3 = (f32[8,128]{1,0:T(8,128)}, u8[1024]{0}) custom-call("
            '%get-tuple-element.3, %copy.4), custom_call_target="tpu_custom_call", '
            "called_computations={%body.1, %cond.2}, api_version=API_VERSION_STATUS_RETURNING, "
            "operand_layout_constraints={f32[8,128]{1,0}, f32[128]{0}}",
            "tpu_custom_call",
            ("get-tuple-element.3", "copy.4"),
            ("body.1", "cond.2"),
        ),
    ],
)
def test_custom_call(text, target, operands, called):
    inst = parse_instruction(text)
    assert (inst.opcode, inst.custom_call_target, inst.operands, inst.called) == (
        "custom-call",
        target,
        operands,
        called,
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ROOT %tuple.149.0 = (f32[], s32[]) tuple(%a, %b)", ("tuple.149.0", "tuple", ("a", "b"))),
        ("  ROOT tuple = () tuple()", ("tuple", "tuple", ())),
        ("add.3 = f32[] add(x, y.1)", ("add.3", "add", ("x", "y.1"))),
        ("%c = s32[] constant(466688986)", ("c", "constant", ())),
        ("%c = f32[16]{0} constant({...})", ("c", "constant", ())),
        ("%c = pred[2,2]{1,0} constant({ { 1, 0 }, { 0, 1 } })", ("c", "constant", ())),
        ("%i = s32[4]{0} iota(), iota_dimension=0", ("i", "iota", ())),
        (
            "%gte = f32[] get-tuple-element((f32[], s32[]) %t), index=0",
            ("gte", "get-tuple-element", ("t",)),
        ),
        (
            "%t = (f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[]) tuple(%a, %b, %c, %d, %e, "
            "/*index=5*/%f)",
            ("t", "tuple", ("a", "b", "c", "d", "e", "f")),
        ),
    ],
)
def test_name_opcode_operands(text, expected):
    inst = parse_instruction(text)
    assert (inst.name, inst.opcode, inst.operands) == expected


def test_parameter_and_called_computations():
    inst = parse_instruction("%p = (f32[], u32[]{:T(128)S(6)}) parameter(12), sharding={maximal}")
    assert (inst.parameter_number, inst.operands, inst.shape) == (
        12,
        (),
        "(f32[], u32[]{:T(128)S(6)})",
    )
    inst = parse_instruction(
        "%w = (s32[], f32[]) while(%t), condition=%cond.1, body=%body.2, "
        'backend_config={"known_trip_count":{"n":"4"}}'
    )
    assert inst.called == ("cond.1", "body.2")
    inst = parse_instruction(
        "%c = f32[] conditional(%p, %a, %b), true_computation=%t.1, false_computation=%f.2"
    )
    assert (inst.called, inst.operands) == (("t.1", "f.2"), ("p", "a", "b"))
    inst = parse_instruction(
        "%s = f32[8]{0} select-and-scatter(%o, %s, %i), window={size=2}, select=%ge, scatter=%add"
    )
    assert inst.called == ("ge", "add")


@pytest.mark.parametrize(
    ("text", "pos"),
    [
        ("", 0),
        ("%x f32[] add(%a)", 0),
        ("%x = f32[ add(%a)", 9),
        ("%x = f32[] add(%a", 17),
        ("%x = f32[] add(%a), metadata={", 30),
        ("%x = f32[] add(%a) junk", 18),
        ('%x = f32[] add(%a), metadata={op_name="x}', 41),
        ("%x = f32[] add(3)", 15),
    ],
)
def test_syntax_errors(text, pos):
    with pytest.raises(InstructionSyntaxError) as info:
        parse_instruction(text)
    assert info.value.pos == pos
    assert "expected" in str(info.value)


INSTRUCTION_ALPHABET = '%= fu32[]{}(),:/*"\\abcdefkmnoprstxyz.0123456789\n'


@given(st.one_of(st.text(), st.text(alphabet=INSTRUCTION_ALPHABET)))
@pytest.mark.slow
def test_arbitrary_text_raises_only_instruction_syntax_error(text):
    with contextlib.suppress(InstructionSyntaxError):
        parse_instruction(text)


@given(
    st.sampled_from(CORPUS),
    st.integers(0, 400),
    st.integers(0, 8),
    st.text(alphabet='(){}[]"\\%, =', max_size=2),
)
def test_damaged_corpus_instructions_raise_only_instruction_syntax_error(text, cut, n, insert):
    with contextlib.suppress(InstructionSyntaxError):
        parse_instruction(text[:cut] + insert + text[cut + n :])


def test_stack_frames_from_hlo_header():
    lines = iter((DATA / "hlo_stack_frames.txt").read_text().splitlines(keepends=True))
    frames = parse_stack_frames(lines)
    assert len(frames) == 8
    assert frames[1] == SourceLocation("run_one.py", 70, "<module>", 18)
    assert frames[4] == SourceLocation(
        "programs.py", 339, "_.<locals>.cond_switch.<locals>.<lambda>", 37
    )
    # Stopped at the first computation line; the rest of the iterator is left unread.
    assert next(lines).startswith("  %param_0 = ")


def test_stack_frames_absent_or_odd():
    assert parse_stack_frames([]) == {}
    no_tables = ["HloModule m, is_scheduled=true\n", "\n", "%f (p: f32[]) -> f32[] {\n"]
    assert parse_stack_frames(iter(no_tables)) == {}
    crlf = [
        "HloModule m\r\n",
        "\r\n",
        "FileNames\r\n",
        '1 "dir with \\"q\\"/a.py"\r\n',
        "FunctionNames\r\n",
        '1 "f"\r\n',
        "FileLocations\r\n",
        "1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=0 end_column=9}\r\n",
        "2 {file_name_id=9 line=4}\r\n",
        "StackFrames\r\n",
        "1 {file_location_id=1 parent_frame_id=1}\r\n",
        "2 {file_location_id=2}\r\n",
        "3 {file_location_id=7 parent_frame_id=1}\r\n",
        "\r\n",
        "ENTRY %main () -> () {\r\n",
        "1 {file_location_id=1}\r\n",
    ]
    assert parse_stack_frames(crlf) == {
        1: SourceLocation('dir with "q"/a.py', 3, "f", 0),
        2: SourceLocation(None, 4, None, None),
        3: SourceLocation(None, None, None, None),
    }


def test_metadata_fast_path_matches_general_splitter():
    import re

    from bufferhouse.parse.hlo import _metadata, _metadata_slow

    bodies = []
    for line in (DATA / "instructions.txt").read_text().splitlines():
        m = re.search(r"metadata=\{(.*?)\}(?:, [a-z_]+=|$)", line)
        if m:
            bodies.append(m.group(1))
    bodies += ['op_name="a b=c" source_line=3', 'op_name="q\\"x" op_type=y', "bare", ""]
    assert len(bodies) > 100
    for body in bodies:
        assert _metadata(body) == _metadata_slow(body), body
