"""Render query results (Arrow tables) as text or files.

Formats: table (aligned, for terminals), csv, json (one object per line),
markdown, parquet. Zero rows is not an error: the header is still written.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from typing import BinaryIO, TextIO

import pyarrow as pa
import pyarrow.parquet as pq

FORMATS = ("table", "csv", "json", "markdown", "parquet")


def human_bytes(n: float | None) -> str:
    """1536 -> '1.5 KiB' (binary units, as XLA and XProf print them); None -> ''."""
    if n is None:
        return ""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return str(n)  # pragma: no cover


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return format(value, ".15g")
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_cell(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={_cell(v)}" for k, v in value.items()) + "}"
    return str(value)


def _rows(table: pa.Table) -> list[list[str]]:
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return [[_cell(col[r]) for col in columns] for r in range(table.num_rows)]


def _is_numeric(field: pa.Field) -> bool:
    return (
        pa.types.is_integer(field.type)
        or pa.types.is_floating(field.type)
        or pa.types.is_decimal(field.type)
    )


def render_table(table: pa.Table, out: TextIO) -> None:
    names = table.column_names
    rows = _rows(table)
    widths = [max([len(n)] + [len(r[i]) for r in rows]) for i, n in enumerate(names)]
    numeric = [_is_numeric(f) for f in table.schema]

    def line(cells: Sequence[str]) -> str:
        parts = [c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric)]
        return "  ".join(parts).rstrip()

    out.write(line(names) + "\n")
    out.write("  ".join("-" * w for w in widths) + "\n")
    for r in rows:
        out.write(line(r) + "\n")
    out.write(f"({table.num_rows} row{'s' if table.num_rows != 1 else ''})\n")


def render_csv(table: pa.Table, out: TextIO) -> None:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(table.column_names)
    writer.writerows(_rows(table))


def _jsonable(value: object) -> object:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def render_json(table: pa.Table, out: TextIO) -> None:
    for row in table.to_pylist():
        out.write(json.dumps({k: _jsonable(v) for k, v in row.items()}, ensure_ascii=False) + "\n")


def render_markdown(table: pa.Table, out: TextIO) -> None:
    names = table.column_names
    numeric = [_is_numeric(f) for f in table.schema]
    out.write("| " + " | ".join(names) + " |\n")
    out.write("| " + " | ".join("---:" if n else "---" for n in numeric) + " |\n")
    for r in _rows(table):
        cells = [c.replace("|", "\\|").replace("\n", " ") for c in r]
        out.write("| " + " | ".join(cells) + " |\n")


def render_parquet(table: pa.Table, out: BinaryIO) -> None:
    pq.write_table(table, out, compression="zstd")


def render(table: pa.Table, fmt: str, out: TextIO | BinaryIO) -> None:
    """Write `table` to `out` in `fmt` (parquet wants a binary stream)."""
    if fmt == "parquet":
        render_parquet(table, out)  # type: ignore[arg-type]
        return
    renderer = {
        "table": render_table,
        "csv": render_csv,
        "json": render_json,
        "markdown": render_markdown,
    }.get(fmt)
    if renderer is None:
        raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    renderer(table, out)  # type: ignore[arg-type]


def render_to_string(table: pa.Table, fmt: str) -> str:
    buf = io.StringIO()
    render(table, fmt, buf)
    return buf.getvalue()
