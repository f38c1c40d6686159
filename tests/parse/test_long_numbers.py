"""A number of any length is a located error, in both text readers (issue 41 item 4).

Python's int() refuses more than 4,300 digits with a ValueError that named no line
("internal error while parsing"); a 20-digit number already got the worded "does
not fit in 64 bits" error. Each line kind that prints a number is tried with 5,000
digits, read by the line reader and by the column reader (its compiled kernels hand
such a line to the line reader's wording), and the two must give the same error.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import bufferhouse
from bufferhouse.errors import ParseError
from bufferhouse.parse import parse_module
from bufferhouse.parse.text import native
from tests.conftest import DATA

SRC = DATA / "proto" / "both" / "donate_sgd"
STEM = "module_0000.jit_donate_sgd.cpu_after_optimizations"
HUGE = "9" * 5000

#: (file suffix, a line's text before the number, the field the error names).
CASES = [
    ("-buffer-assignment.txt", "allocation 0: size ", "size"),
    ("-buffer-assignment.txt", "allocation 0: size 32768, parameter ", "parameter"),
    ("-buffer-assignment.txt", " value: <54 params__w1__.1 @0> (size=32768,offset=", "offset"),
    ("-buffer-assignment.txt", " value: <", "value id"),
    ("-buffer-assignment-values.txt", "Total bytes used: ", "total"),
    ("-buffer-assignment-values.txt", "  reduce_sum.5, operand ", "operand"),
    ("-live-range.txt", "    ", "step"),
    ("-live-range.txt", "    params__b1__.1{}:", "start"),
    ("-live-range.txt", "    params__b1__.1{}:0-", "end"),
    ("-live-range.txt", "    dot{}: ", "bytes"),
]


def _tree(tmp_path: Path, suffix: str, before: str) -> tuple[Path, int]:
    """The fixture with the first number after `before` (at a line start) made HUGE;
    the 1-based number of the line changed."""
    tree = tmp_path / "t"
    shutil.copytree(SRC, tree)
    for p in tree.glob("*.hlo.pb"):
        p.unlink()  # the text alone: a failed text must not fall back to the proto here
    path = tree / f"{STEM}{suffix}"
    lines = path.read_text().split("\n")
    pattern = re.compile(re.escape(before) + r"(\d+)")
    for i, line in enumerate(lines):
        m = pattern.match(line)
        if m:
            lines[i] = line[: m.start(1)] + HUGE + line[m.end(1) :]
            path.write_text("\n".join(lines))
            return tree, i + 1
    raise AssertionError(f"no line starts {before!r}")


def _files(tree: Path) -> list[tuple[str, str]]:
    roles = [
        ("buffer_assignment", "-buffer-assignment.txt"),
        ("values", "-buffer-assignment-values.txt"),
        ("live_range", "-live-range.txt"),
    ]
    return [(role, str(tree / f"{STEM}{suffix}")) for role, suffix in roles]


@pytest.mark.parametrize(("suffix", "before", "field"), CASES, ids=[c[2] for c in CASES])
def test_a_5000_digit_number_is_a_located_error_in_both_readers(
    tmp_path: Path, suffix: str, before: str, field: str
) -> None:
    tree, lineno = _tree(tmp_path, suffix, before)
    errors = []
    for accelerate in (False, True):
        with pytest.raises(ParseError) as info:
            parse_module(_files(tree), accelerate=accelerate, vector_min_bytes=0)
        errors.append(info.value)
    line_reader, column_reader = errors
    assert line_reader.path.endswith(suffix) and line_reader.line == lineno
    assert f"{field} 99999999999999999999... (5000 digits) does not fit in 64 bits" in (
        line_reader.message
    )
    assert (column_reader.path, column_reader.line, column_reader.message) == (
        line_reader.path,
        line_reader.line,
        line_reader.message,
    )


def test_the_column_reader_is_built() -> None:
    """The comparison above is between two readers only when the kernels are built."""
    assert native.MISSING is None, native.MISSING


def test_an_ingest_reports_it_located_and_loads_the_rest(tmp_path: Path) -> None:
    tree, lineno = _tree(tmp_path, "-live-range.txt", "    params__b1__.1{}:")
    good = tmp_path / "good"
    shutil.copytree(SRC, good)
    report = bufferhouse.ingest([tree, good], db=tmp_path / "w.duckdb", jobs=1)
    assert len(report.loaded) == 1 and len(report.failed) == 1
    error = report.failed[0].error
    assert error.line == lineno and "does not fit in 64 bits" in error.message
    assert "internal error" not in error.message


def test_twenty_digits_keep_their_message() -> None:
    """The short form is unchanged: the number as printed."""
    from bufferhouse.parse.text.grammar import number

    with pytest.raises(ParseError) as info:
        number("99999999999999999999", "size", "f.txt", 3, "line")
    assert info.value.message == "size 99999999999999999999 does not fit in 64 bits"
    assert number("0" * 5000 + "7", "size", "f.txt", 3, "line") == 7
