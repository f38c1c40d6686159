"""Text output for people: human byte columns and cells shortened to a width."""

from __future__ import annotations

import pyarrow as pa

from bufferhouse.render import RenderOptions, is_byte_column, render_to_string

TABLE = pa.table(
    {
        "module_name": ["jit_" + "x" * 70, "jit_small"],
        "size": pa.array([123_456_789, 5], pa.int64()),
        "module_id": pa.array([1882837163708560426, 7], pa.int64()),
        "paths": [["/dumps/" + "a" * 60 + "/m-buffer-assignment.txt"], []],
    }
)


def test_byte_columns_by_name_and_type():
    names = [f.name for f in TABLE.schema if is_byte_column(f)]
    assert names == ["size"]  # module_id is a number, not bytes
    assert is_byte_column(pa.field("heap_peak_bytes", pa.int64()))
    assert not is_byte_column(pa.field("size", pa.string()))


def test_human_bytes_in_table_and_markdown_only():
    human = RenderOptions(human_bytes=True)
    table = render_to_string(TABLE, "table", human)
    assert "117.7 MiB" in table and "5 B" in table and "1882837163708560426" in table
    assert "117.7 MiB" in render_to_string(TABLE, "markdown", human)
    assert "123456789" in render_to_string(TABLE, "csv", human)
    assert "123456789" in render_to_string(TABLE, "json", human)


def test_cells_shortened_to_fit_numbers_never():
    text = render_to_string(TABLE, "table", RenderOptions(max_width=70))
    lines = text.splitlines()
    assert all(len(line) <= 70 for line in lines[:-1]), [len(x) for x in lines]
    assert "…" in text
    assert "123456789" in text and "1882837163708560426" in text
    assert lines[0].split()[:2] == ["module_name", "size"]  # headers stay whole


def test_too_narrow_keeps_each_text_column_readable():
    text = render_to_string(TABLE, "table", RenderOptions(max_width=10))
    first = text.splitlines()[2]
    assert first.startswith("jit_xxxxxx") and "…" in first  # MIN_CELL_WIDTH, not zero


def test_no_width_leaves_cells_whole():
    assert "…" not in render_to_string(TABLE, "table", RenderOptions())
