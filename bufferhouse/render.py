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
from dataclasses import dataclass
from typing import BinaryIO, TextIO

import pyarrow as pa

FORMATS = ("table", "csv", "json", "markdown", "parquet")
#: A shortened cell keeps at least this many characters (the ellipsis included).
MIN_CELL_WIDTH = 12


@dataclass(frozen=True)
class RenderOptions:
    """How text meant for a person is shaped (table and markdown only; csv, json and
    parquet always carry the exact values).

    human_bytes: byte columns (`size`, `bytes`, `*_bytes`, `*_size`) as KiB/MiB/GiB.
    max_width: shorten the widest text cells (with "…") so table lines fit this many
    columns, as a terminal shows them; None leaves cells whole.
    """

    human_bytes: bool = False
    max_width: int | None = None


def is_byte_column(field: pa.Field) -> bool:
    """A column that counts bytes, by the naming rule the schema follows."""
    name = field.name
    named = name in ("size", "bytes") or name.endswith(("_bytes", "_size"))
    return named and (pa.types.is_integer(field.type) or pa.types.is_decimal(field.type))


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


def _rows(table: pa.Table, human: bool = False) -> list[list[str]]:
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    cell = [human_bytes if human and is_byte_column(f) else _cell for f in table.schema]
    return [[cell[i](col[r]) for i, col in enumerate(columns)] for r in range(table.num_rows)]


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _fit(widths: list[int], numeric: list[bool], names: Sequence[str], limit: int) -> list[int]:
    """Column widths whose lines fit `limit`: the widest text column is narrowed first,
    never below its header or MIN_CELL_WIDTH; numbers are never cut."""
    widths = list(widths)
    floor = [
        w if num else max(min(len(n), w), MIN_CELL_WIDTH)
        for w, num, n in zip(widths, numeric, names)
    ]
    while sum(widths) + 2 * (len(widths) - 1) > limit:
        over = sum(widths) + 2 * (len(widths) - 1) - limit
        shrinkable = [i for i, w in enumerate(widths) if w > floor[i]]
        if not shrinkable:
            break
        i = max(shrinkable, key=lambda j: widths[j])
        others = sorted((widths[j] for j in shrinkable if j != i), reverse=True)
        target = max(floor[i], widths[i] - over, others[0] if others else 0)
        widths[i] = target if target < widths[i] else widths[i] - 1
    return widths


def _is_numeric(field: pa.Field) -> bool:
    return (
        pa.types.is_integer(field.type)
        or pa.types.is_floating(field.type)
        or pa.types.is_decimal(field.type)
    )


def render_table(table: pa.Table, out: TextIO, options: RenderOptions | None = None) -> None:
    options = options or RenderOptions()
    names = table.column_names
    rows = _rows(table, options.human_bytes)
    widths = [max([len(n)] + [len(r[i]) for r in rows]) for i, n in enumerate(names)]
    numeric = [_is_numeric(f) for f in table.schema]
    if options.max_width is not None:
        fitted = _fit(widths, numeric, names, options.max_width)
        if fitted != widths:
            widths = fitted
            names = [_shorten(n, w) for n, w in zip(names, widths)]
            rows = [[_shorten(c, w) for c, w in zip(r, widths)] for r in rows]

    def line(cells: Sequence[str]) -> str:
        parts = [c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric)]
        return "  ".join(parts).rstrip()

    out.write(line(names) + "\n")
    out.write("  ".join("-" * w for w in widths) + "\n")
    for r in rows:
        out.write(line(r) + "\n")
    out.write(f"({table.num_rows} row{'s' if table.num_rows != 1 else ''})\n")


def render_csv(table: pa.Table, out: TextIO, options: RenderOptions | None = None) -> None:
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


def render_json(table: pa.Table, out: TextIO, options: RenderOptions | None = None) -> None:
    for row in table.to_pylist():
        out.write(json.dumps({k: _jsonable(v) for k, v in row.items()}, ensure_ascii=False) + "\n")


def render_markdown(table: pa.Table, out: TextIO, options: RenderOptions | None = None) -> None:
    names = table.column_names
    numeric = [_is_numeric(f) for f in table.schema]
    out.write("| " + " | ".join(names) + " |\n")
    out.write("| " + " | ".join("---:" if n else "---" for n in numeric) + " |\n")
    for r in _rows(table, bool(options and options.human_bytes)):
        cells = [c.replace("|", "\\|").replace("\n", " ") for c in r]
        out.write("| " + " | ".join(cells) + " |\n")


def render_parquet(table: pa.Table, out: BinaryIO) -> None:
    import pyarrow.parquet as pq  # 0.012 s of every command's start, for -f parquet only

    pq.write_table(table, out, compression="zstd")


def render(
    table: pa.Table, fmt: str, out: TextIO | BinaryIO, options: RenderOptions | None = None
) -> None:
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
    renderer(table, out, options)  # type: ignore[arg-type]


def render_to_string(table: pa.Table, fmt: str, options: RenderOptions | None = None) -> str:
    buf = io.StringIO()
    render(table, fmt, buf, options)
    return buf.getvalue()


#: What a result showing these columns side by side needs said beside it: figures that
#: look alike and are different peaks (docs/metrics.md).
COLUMN_NOTES: dict[frozenset[str], str] = {
    frozenset({"heap_peak_bytes", "xla_peak_bytes"}): (
        "heap_peak_bytes and xla_peak_bytes are different peaks. heap_peak_bytes: memory "
        "space 0's parameters, outputs, constants and thread-local buffers plus the temp "
        "bytes live at the worst step (what the device holds). xla_peak_bytes: XLA's "
        "memory_analysis().peak_memory_in_bytes, which on CPU counts only the static "
        "buffers (each parameter, constant and output allocation by its largest value; no "
        "temporaries, no thread-local), so it is far below on CPU (docs/metrics.md)."
    ),
}


def column_notes(names: Sequence[str]) -> list[str]:
    """The COLUMN_NOTES a result with these column names calls for."""
    held = set(names)
    return [note for columns, note in COLUMN_NOTES.items() if columns <= held]
