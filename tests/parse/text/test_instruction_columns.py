"""The instruction texts read as columns (parse/text/instructions.py) against
hlo.parse_instruction, the reference: for every text the column reader takes, each
`_PARSED` column must be what parse_instruction gives; every other text is left to it.

Compared on every instruction text of the test data, of a tests/synth module, and on the
generated and damaged texts of tests/parse/proto/test_hlo_common_form.py, and through parse_batch
(warnings and errors in text order, as before the column reader).
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from bufferhouse.errors import DumpError, ParseError
from bufferhouse.parse import hlo
from bufferhouse.parse.text import columns, instructions, native
from tests import synth
from tests.parse.proto.test_hlo_common_form import (
    DAMAGED_TEXTS,
    DATA_TEXTS,
    EXAMPLES,
    MARK,
    instruction_texts,
)

pytestmark = pytest.mark.slow  # every generated and damaged instruction text, both parsers
#: Tests of what the compiled kernel reads (without it, read_fast reads nothing).
needs_kernel = pytest.mark.skipif(native.MISSING is not None, reason="not built")


def expected(text: str) -> dict | None:
    """What parse_batch stored for `text` before the column reader: a row, or None."""
    try:
        fields = columns._FIELDS(hlo.parse_instruction(text))
    except hlo.InstructionSyntaxError:
        return None
    row = dict(zip(columns._PARSED.names, fields))
    for name in ("operands", "called_computations"):
        row[name] = list(row[name])
    return row


def check(texts: list[str]) -> int:
    """How many of `texts` the column reader took, after checking each against
    parse_instruction (a text it refuses is never taken: its row would be None)."""
    array = pa.array(texts, pa.string())
    table, rows = instructions.read_fast(array)
    assert len(table) == len(rows)
    assert np.all(np.diff(rows) > 0)
    for i, got in zip(rows.tolist(), table.to_pylist()):
        assert got == expected(texts[i]), f"{texts[i]!r}"
    return len(rows)


@needs_kernel
def test_data_texts_read_as_columns_equal_parse_instruction():
    fast = check(DATA_TEXTS)
    # 9176 of 9190 (the RE2 reader it replaced: 9148); the rest: junk after the text.
    assert fast >= 9176, f"{fast} of {len(DATA_TEXTS)}"


@pytest.fixture(scope="module")
def synth_texts(tmp_path_factory) -> list[str]:
    out = tmp_path_factory.mktemp("synth")
    result = synth.synthesize(out, 2, "stacktrace")
    text = result.paths["-buffer-assignment.txt"].read_text()
    return list(
        dict.fromkeys(line.partition(MARK)[2][1:] for line in text.split("\n") if MARK in line)
    )


@needs_kernel
def test_synth_module_texts_read_as_columns_equal_parse_instruction(synth_texts):
    assert check(synth_texts) == len(synth_texts)  # every one, as the RE2 reader did


@EXAMPLES
@given(st.lists(instruction_texts(), min_size=1, max_size=8))
def test_generated_texts(texts):
    event(f"{check(texts)} of {len(texts)} read as columns")


@EXAMPLES
@given(DAMAGED_TEXTS)
def test_damaged_data_texts(text):
    event(f"{check([text])} read as columns")


def test_corner_cases():
    """Texts the column reader must leave alone or read exactly as parse_instruction."""
    texts = [
        '%a = f32[] add(%b), metadata={op_name="x" op_name="y"}',  # the last one wins
        '%a = f32[] add(%b), metadata={op_name=""}',
        "%a = f32[] add(%b), metadata={op_name= source_file=y}",
        '%a = f32[] add(%b), metadata={op_name="a\\"b\\\\c\\\'d"}',
        '%a = f32[] add(%b), metadata={op_name="a\\nb"}',  # \n: the slow path's
        '%a = f32[] add(%b), metadata={op_name="q" kind=kX}',
        '%a = f32[] add(%b), metadata={custom_call_target="t"}',
        "%a = f32[] add(%b), metadata={source_line=0012 stack_frame_id=7}",
        "%a = f32[] add(%b), metadata={source_line=1234567890}",  # 10 digits
        '%a = f32[] add(%b), metadata={source_line="12"}',
        "%a = f32[] parameter(1234567890)",
        "%a = f32[] parameter(123456789)",
        "%a = f32[] parameter(007)",
        '%a = f32[] constant({ {1, 2}, {3, 4} }), metadata={op_name="c"}',
        '%a = f32[] constant("a)b"), metadata={op_name="c"}',
        "%a = (f32[], s32[]) while(%t), condition=%c, body=%b",
        "%a = (f32[], s32[]) while(%t), body=%b, condition=%c",
        "%a = f32[] conditional(%p, %x, %y), branch_computations={%t, %f.1}",
        '%a = f32[] reduce(%x, %z), dimensions={1}, to_apply=%add, metadata={op_name="r"}',
        '%a = f32[] custom-call(%x), custom_call_target="foo\\"bar", api_version=API_VERSION_1',
        '%a = f32[] custom-call(%x), window={size=3}, custom_call_target="t", called_computations={%c}',
        '%a = f32[] fusion(%x), kind=kLoop, calls=%f, metadata={op_name="f"}, backend_config={"a":"%"}',
        '%a = f32[] fusion(%x), kind=kLoop, calls=%f, metadata={}, backend_config={"a":[}',
        '%a = f32[] add(%b), backend_config={"x":1}, metadata={op_name="x"}',
        '%a = f32[] add(%b), sharding={replicated}, metadata={op_name=", metadata={op_name=\\"y\\"}"}',
        '%a = f32[] add(%b), frontend_attributes={x=", metadata={op_name=y}"}, metadata={op_name="z"}',
        '%a = f32[] add(%b), frontend_attributes={x=", metadata={op_name=y}"}',
        '%a = f32[] add(%b), control-predecessors={%c}, metadata={op_name="x"}',
        "%a = f32[2]{0:T(2)S(1)} add(%b, /*index=1*/%c)",
        "%a = (f32[2]{0}, /*index=1*/s32[]) tuple(%b, %c)",
        '%a = f32[] add(%b), metadata={op_name="x"} ',
        "ROOT %a = f32[] add(%b)",
        "%a = f32[] add(%b), kind=kLoop",
        '%a = f32[] add(%b), metadata={op_name="é" source_file="\\303\\251"}',
        "%a = f32[] add(%b), metadata={op_name=x\u00a0y}",
        "%a = f32[] add(%b), attr=\u00a0",
    ]
    check(texts)
    check([t.replace("%", "") for t in texts])


@needs_kernel
def test_the_usual_forms_are_read_as_columns():
    """What XLA prints most, read by the column reader (not only left to the slow path)."""
    texts = [
        '%p.1 = f32[8,128]{1,0:T(8,128)} parameter(3), metadata={op_name="x"}',
        "ROOT %t = (f32[2]{0}, s32[]) tuple(%a, %b)",
        '%f = f32[4]{0} fusion(%a, %b), kind=kLoop, calls=%fused.1, metadata={op_type="Add" '
        'op_name="jit(f)/add" source_file="/x/y.py" source_line=12 source_end_line=12 '
        'stack_frame_id=3}, backend_config={"outer_dimension_partitions":["2"]}',
        "%w = (s32[], f32[]) while(%t), condition=%cond, body=%body, "
        'control-predecessors={%c.1, %c.2}, metadata={op_name="while"}',
        "%r = f32[] reduce(%x, %z), dimensions={0}, to_apply=%add",
        '%c = f32[2]{0} custom-call(%x), custom_call_target="__cublas$gemm", '
        "api_version=API_VERSION_STATUS_RETURNING",
        "%k = f32[] conditional(%p, %x, %y), branch_computations={%t, %f.1}",
        "%z = f32[] constant(0.5)",
    ]
    assert check(texts) == len(texts)


# -- through parse_batch -------------------------------------------------------------------
def _batch(texts: list[str]):
    lines = pa.array([10 * (i + 1) for i in range(len(texts))], pa.int64())
    return columns.parse_batch(pa.array(texts, pa.string()), lines, "dump.txt")


def test_parse_batch_rows_and_warnings_in_text_order():
    texts = [
        DATA_TEXTS[0],
        "not an instruction",
        "%a = f32[] add(%b), control-predecessors={%c}",  # slow, read
        DATA_TEXTS[1],
        "%a = f32[] add(",
        "%a = f32[] fusion(%x), kind=kLoop, calls=%f",
    ]
    table, warnings = _batch(texts)
    assert table.to_pylist() == [expected(t) or dict.fromkeys(columns._PARSED.names) for t in texts]
    assert [(w.path, w.line) for w in warnings] == [("dump.txt", 20), ("dump.txt", 50)]
    assert all(isinstance(w, DumpError) and "not understood" in w.message for w in warnings)
    for fast_only in ([texts[0], texts[3]], [texts[1]], []):
        assert _batch(fast_only)[0].to_pylist() == [
            expected(t) or dict.fromkeys(columns._PARSED.names) for t in fast_only
        ]


@needs_kernel
def test_without_the_compiled_reader_every_text_is_parse_instructions(monkeypatch):
    texts = [DATA_TEXTS[0], "not an instruction", DATA_TEXTS[1]]
    assert len(instructions.read_fast(pa.array(texts))[1]) == 2
    monkeypatch.setattr(native, "MISSING", "not built")
    table, rows = instructions.read_fast(pa.array(texts))
    assert len(rows) == len(table) == 0 and table.schema == columns._PARSED
    assert _batch(texts)[0].to_pylist() == [
        expected(t) or dict.fromkeys(columns._PARSED.names) for t in texts
    ]


def test_parse_batch_numbers_too_large_raise_at_their_line():
    texts = [DATA_TEXTS[0], "%a = f32[] parameter(3000000000)", "%b = f32[] parameter(4000000000)"]
    with pytest.raises(ParseError) as info:
        _batch(texts)
    assert info.value.line == 20
    assert re.search("parameter_number", str(info.value))


@needs_kernel
def test_the_other_rows_are_left_to_the_slow_path():
    """read_fast reads the common form; other_rows is the rest, which parse_batch reads
    with parse_instruction (null, with a warning, where that fails too)."""
    texts = ["%a = f32[] add(%b)", "not an instruction", "%c = f32[] parameter(1)"]
    fast, rows = instructions.read_fast(pa.array(texts))
    assert rows.tolist() == [0, 2]
    assert instructions.other_rows(len(texts), rows).tolist() == [1]
    assert fast.to_pylist() == [expected(texts[0]), expected(texts[2])]
    table, warnings = _batch(texts)
    assert table.to_pylist() == [
        expected(texts[0]),
        dict.fromkeys(columns._PARSED.names),
        expected(texts[2]),
    ]
    assert [(w.path, w.line) for w in warnings] == [("dump.txt", 20)]
