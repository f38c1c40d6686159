"""Family B: the TPU compiler's and runtime's summaries (`Ran out of memory in memory
space`, `Total hbm usage >=`, `Largest program allocations in hbm:`, `Attempting to
reserve ... at the bottom of memory`).

Apart from the XLA family because its blocks of `name  SIZE` figures and numbered
allocations are read by rules of their own.
"""

from __future__ import annotations

import re

from bufferhouse.parse.oom.coded import read_first
from bufferhouse.parse.oom.grammar import (
    ENTRY,
    FIELD,
    LARGEST,
    PROGRAM_REQ,
    RAN_OUT,
    RESERVE,
    SEP,
    SZ,
    TOTAL,
    Event,
    Lines,
    Problem,
    close_cut_entry,
    close_entry,
    decimal,
    entry_field,
    entry_line,
    entry_name,
    error_type,
    finish,
    join_wrapped,
    line_text,
    open_fragment_entry,
    rank_of,
    slug,
    start_kind,
    unbalanced,
    wrapped,
)

#: Figures of the TPU summaries that have columns of their own: figure key -> column.
TPU_BLOCK_FIGURES = {
    "total_usage/reserved": "reserved_bytes",
    "total_usage/program": "program_bytes",
    "total_usage/arguments": "arguments_bytes",
    "program_requirement/global": "global_bytes",
    "program_requirement/scoped": "scoped_bytes",
    "program_requirement/hlo_temp": "hlo_temp_bytes",
}

_FREE = re.compile(
    r"There are (?P<free>" + SZ + r") free, (?P<reserved>" + SZ + r") reserved,"
    r" and (?P<reservable>" + SZ + r") reservable"
)
_OUTPUT = re.compile(
    r"Output size (?P<out>" + SZ + r"?); shares (?P<shared>" + SZ + r"?) with arguments\.?"
)
_CAPACITY = re.compile(
    r"(?P<space>[A-Za-z]+) capacity (?P<size>" + SZ + r"?)\s*(?P<rest>\(.*\))?:?"
)
_BLOCK = re.compile(r"(?P<name>[A-Z][\w -]*?)(?: include some or all of)?:")
_FIGURE = re.compile(
    r"(?P<name>[A-Za-z][\w .()/-]*?)\s+(?P<size>-?(?:\d+(?:\.\d*)?|\.\d+)\s?[A-Za-z]*)"
    r"(?P<rest>(?:\s.*|\(.*)?)"
)
_UTILIZATION = re.compile(r"(?<![\d.])(?P<pct>[\d.]+)% utilization")  # see grammar._METADATA
_UNPADDED = re.compile(r"Unpadded \((?P<size>" + SZ + r"?)\)")
_PADDED = re.compile(r"Padded \((?P<size>" + SZ + r"?)\)")
_FRAGMENTATION = re.compile(r"(?<![\d.])(?P<pct>[\d.]+)% fragmentation \((?P<size>" + SZ + r"?)\)")


def _first_lines(ev: Event, src: Lines, first: str, cut: bool, texts: list[str]) -> tuple[int, str]:
    """Read the message's first line (joined with the lines a terminal wrapped off it) into
    `ev` and `texts`; returns where the rest starts and the first line as joined. A cut
    message has none: it is marked so."""
    start = 0
    if cut:
        ev.problems.append(
            Problem(
                ev.line,
                "message starts without its first line (RESOURCE_EXHAUSTED: ... Ran out of memory ...)",
            )
        )
    else:
        error_type(ev, first)
        while True:  # a first line a terminal wrapped
            nxt = src.get(start + 1)
            if nxt is None or not nxt.strip() or _tpu_known(nxt.strip()) or start_kind(nxt):
                break
            if first.rstrip().endswith((".", ")", "well)")) and not unbalanced(first):
                break
            ev.problems.append(
                Problem(
                    src.number(start + 1),
                    "line joined to the one before (wrapped by a terminal?)",
                    nxt,
                )
            )
            first += nxt
            start += 1
        texts.append(first)
        _tpu_first(ev, first)
        start += 1
    return start, first


def parse_tpu(ev: Event, src: Lines, first: str, cut: bool, entries: bool = False) -> Event:
    """Fill `ev` from its first line on; a line belongs while it fits a summary block
    (`name  SIZE`), a numbered allocation or one of its fields."""
    texts: list[str] = []
    start, first = _first_lines(ev, src, first, cut, texts)
    block = "largest" if entries else ""
    last = start - 1
    buf = open_fragment_entry(ev, first) if entries else None
    last_field: tuple[str, str] | None = None
    in_label = False
    listed = entries
    i = start
    while True:
        t = src.get(i)
        if t is None:
            break
        s = t.strip()
        if not s or s == "\x00foreign":
            i += 1
            continue
        n = src.number(i)
        kind = start_kind(t)
        if kind in ("allocation", "tpu_compile", "tpu_runtime", "buffer_assignment", "other"):
            break
        if (m := TOTAL.fullmatch(s)) and buf is None:
            block = "total_usage"
            ev.fields.setdefault("memory_space", m.group("space"))
            ev.figure("total_usage", m.group("size"), n)
        elif (m := PROGRAM_REQ.fullmatch(s)) and buf is None:
            block = "program_requirement"
            ev.fields.setdefault("memory_space", m.group("space"))
            ev.figure("program_requirement", m.group("size"), n)
        elif (m := _OUTPUT.fullmatch(s)) and buf is None:
            ev.figure("output", m.group("out"), n)
            ev.figure("output_shared", m.group("shared"), n)
        elif (m := LARGEST.fullmatch(s)) and buf is None:
            block, listed = "largest", True
            ev.fields.setdefault("memory_space", m.group("space"))
        elif (m := ENTRY.fullmatch(s)) and (listed or buf is not None or not block):
            if buf is not None:
                close_entry(ev, buf)
                ev.truncated = True
                ev.problems.append(
                    Problem(n, f"{entry_name(buf, 'allocation')} ends without its ===== line")
                )
            listed = True
            buf, in_label = {"rank": rank_of(ev, m.group("n"), n), "line": n}, False
            entry_field(ev, buf, "Size", m.group("value"), n)
            last_field = ("Size", m.group("value"))
        elif buf is not None and (m := FIELD.fullmatch(s)):
            key = m.group("key")
            entry_field(ev, buf, key, m.group("value"), n)
            in_label = key in ("XLA label", "XLA Label")
            last_field = (key, m.group("value"))
        elif buf is not None and SEP.fullmatch(s):
            close_entry(ev, buf)
            buf, in_label, last_field = None, False, None
        elif buf is not None and in_label:
            # the label is the whole instruction text, which may hold newlines
            buf["xla_label"] = f"{buf.get('xla_label', '')}\n{t}"
        elif buf is not None and last_field is not None and wrapped(last_field[1], s):
            last_field = join_wrapped(ev, buf, last_field, s, n)
        elif (
            (m := _CAPACITY.fullmatch(s)) and buf is None and m.group("space").lower() != "exceeded"
        ):
            block = f"{slug(m.group('space'))}_capacity"
            ev.form = "tpu_runtime"
            ev.fields.setdefault("memory_space", m.group("space").lower())
            ev.figure("capacity", m.group("size"), n, m.group("rest"))
        elif (m := _BLOCK.fullmatch(s)) and buf is None:
            block = slug(m.group("name"))
        elif buf is None and block and block != "largest" and (m := _FIGURE.fullmatch(s)):
            key = f"{block}/{slug(m.group('name'))}"
            rest = m.group("rest") or ""
            ev.figure(key, m.group("size"), n, rest if "bytes" in rest else None)
            _figure_rest(ev, key, rest, n)
        else:
            fits = entry_line if buf is not None else _tpu_known
            j = src.resumes(i, fits)
            if j is None:
                break
            what = (
                "an allocation field (Shape:, Unpadded size:, XLA label:, Allocation type:) or ====="
                if buf is not None
                else "a summary line (`name  SIZE`) or a numbered allocation (`N. Size: ...`)"
            )
            ev.problems.append(Problem(n, f"expected {what}; skipped", s))
            i = j
            continue
        texts.extend(line_text(src, k) for k in range(last + 1, i + 1))
        last = i
        i += 1
    if buf is not None:
        close_cut_entry(ev, buf, src.number(last), "allocation")
    elif listed and not ev.buffers:
        ev.truncated = True
        ev.problems.append(
            Problem(src.number(last), "`Largest program allocations` lists nothing (cut short?)")
        )
    elif block and not listed and ev.form == "tpu_compile" and not cut:
        ev.truncated = True
        ev.problems.append(
            Problem(
                src.number(last),
                "summary ends before `Largest program allocations in ...:` (cut short?)",
            )
        )
    for key, column in TPU_BLOCK_FIGURES.items():
        if key in ev.figures:
            ev.fields[column] = ev.figures[key]
    finish(ev, src, max(last, 0), texts)
    return ev


def _tpu_known(s: str) -> bool:
    return bool(
        TOTAL.fullmatch(s)
        or PROGRAM_REQ.fullmatch(s)
        or _OUTPUT.fullmatch(s)
        or LARGEST.fullmatch(s)
        or ENTRY.fullmatch(s)
        or FIELD.fullmatch(s)
        or SEP.fullmatch(s)
        or (_CAPACITY.fullmatch(s) and not s.startswith("Exceeded"))
        or (_BLOCK.fullmatch(s) and len(s) < 80)
        or (_FIGURE.fullmatch(s) and len(s) < 200 and not s.startswith(("File ", "Traceback")))
    )


def _tpu_first(ev: Event, first: str) -> None:
    read_first(ev, first)
    if m := RAN_OUT.search(first):
        ev.fields["memory_space"] = m.group("space")
        if m.group("used"):
            ev.figure("used", m.group("used"), ev.line)
            ev.figure("capacity", m.group("cap"), ev.line)
        if m.group("exc"):
            ev.figure("exceeded", m.group("exc"), ev.line)
    if m := RESERVE.search(first):
        ev.fields.setdefault("memory_space", "hbm")
        ev.figure("requested", m.group("req"), ev.line)
    if m := _FREE.search(first):
        ev.figure("free", m.group("free"), ev.line)
        ev.figure("free_reserved", m.group("reserved"), ev.line)
        ev.figure("reservable", m.group("reservable"), ev.line)


def _figure_rest(ev: Event, key: str, rest: str, line: int) -> None:
    """`(60.1% utilization: Unpadded (10.36G) Padded (17.22G), 0.1% fragmentation (20.00M))`."""
    name = key.split("/")[-1]
    if m := _UTILIZATION.search(rest):
        ev.fields[f"{name}_utilization"] = decimal(ev, m.group("pct"), line, "utilization")
    if m := _UNPADDED.search(rest):
        ev.figure(f"{key}/unpadded", m.group("size"), line)
    if m := _PADDED.search(rest):
        ev.figure(f"{key}/padded", m.group("size"), line)
    if m := _FRAGMENTATION.search(rest):
        ev.figure(f"{key}/fragmentation", m.group("size"), line)
        ev.fields[f"{name}_fragmentation_percent"] = decimal(
            ev, m.group("pct"), line, "fragmentation percent"
        )
