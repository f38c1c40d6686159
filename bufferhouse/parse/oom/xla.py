"""Family A: XLA's BufferAssignment summary (`Out of memory while trying to allocate`,
stats, `Peak buffers:`), as GPU and CPU print it.

Apart from the TPU family because its blocks, order and cut-short rules are its own.
"""

from __future__ import annotations

import re

from bufferhouse.parse.oom.grammar import (
    BA_DEBUG,
    BA_STATS,
    BUF,
    FIELD,
    PEAK,
    SEP,
    SZ,
    XLA_FIRST,
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
    wrapped,
)
from bufferhouse.parse.oom.sizes import shown

_XLA_FIRST_SIZE = re.compile(r"(?P<size>" + SZ + r"?)(?: bytes)?\.")
_STAT = re.compile(
    r"(?P<name>[\w -]+?) (?P<kind>allocation|fragmentation):\s*(?P<size>\S+)"
    r"(?:\s*\(\s*(?P<pct>-?[\d.]+)%\))?"
)


def _first_lines(ev: Event, src: Lines, first: str, cut: bool, texts: list[str]) -> tuple[int, str]:
    """Read the message's first line (joined with the lines a terminal wrapped off it) into
    `ev` and `texts`; returns where the rest starts and the first line as joined. A cut
    message has none: it is marked so."""
    if cut:
        ev.problems.append(
            Problem(
                ev.line,
                "message starts without its first line (RESOURCE_EXHAUSTED: Out of memory ...)",
            )
        )
        start = 0
    else:
        error_type(ev, first)
        m = XLA_FIRST.search(first)
        assert m is not None
        req = m.group("req")
        texts.append(first)
        start = 1
        # A first line a terminal wrapped: the request ends with "bytes." or a unit and "."
        while not req.endswith(".") and src.get(1) not in (None, "") and start == 1:
            nxt = src.get(1)
            if nxt is None or start_kind(nxt) or _known_xla(nxt.strip()):
                break
            ev.problems.append(
                Problem(
                    src.number(1), "line joined to the one before (wrapped by a terminal?)", nxt
                )
            )
            first += nxt
            req += nxt.strip()
            texts[0] = first
            start = 2
        sm = _XLA_FIRST_SIZE.fullmatch(req)
        if sm:
            ev.figure("requested", sm.group("size"), ev.line)
        elif req:
            ev.problems.append(
                Problem(
                    ev.line,
                    f"expected `allocate N bytes.` after `Out of memory while trying to`, found {shown(req)}",
                )
            )
            ev.truncated = True
    return start, first


def parse_xla(ev: Event, src: Lines, first: str, cut: bool, entries: bool = False) -> Event:
    """Fill `ev` from its first line on (`cut`: the log lost that line, so it starts in
    the stats; `entries`: it starts in the buffer list); a state (head, stats, peak)
    says which lines belong next."""
    texts: list[str] = []
    start, first = _first_lines(ev, src, first, cut, texts)
    state = "head" if not cut else "peak" if entries else "stats"
    last = start - 1
    buf = open_fragment_entry(ev, first) if entries else None
    last_field: tuple[str, str] | None = None
    saw_stats, saw_peak = False, entries
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
        if start_kind(t) in (
            "allocation",
            "tpu_compile",
            "tpu_runtime",
            "buffer_assignment",
            "other",
        ):
            break
        if BA_DEBUG.fullmatch(s):
            state = "stats"
        elif BA_STATS.fullmatch(s):
            state, saw_stats = "stats", True
        elif state == "stats" and (m := _STAT.fullmatch(s)):
            saw_stats = True
            key = f"{slug(m.group('name'))}_{m.group('kind')}"
            ev.figure(key, m.group("size"), n)
            if m.group("pct") is not None:
                ev.fields[f"{key}_percent"] = decimal(ev, m.group("pct"), n, f"{key} percent")
        elif PEAK.fullmatch(s):
            state, saw_peak = "peak", True
        elif state == "peak" and (m := BUF.fullmatch(s)):
            if buf is not None:
                close_entry(ev, buf)
                ev.truncated = True
                ev.problems.append(
                    Problem(n, f"{entry_name(buf, 'buffer')} ends without its ===== line")
                )
            buf, last_field = {"rank": rank_of(ev, m.group("n"), n), "line": n}, None
        elif buf is not None and (m := FIELD.fullmatch(s)):
            entry_field(ev, buf, m.group("key"), m.group("value"), n)
            last_field = (m.group("key"), m.group("value"))
        elif buf is not None and SEP.fullmatch(s):
            close_entry(ev, buf)
            buf, last_field = None, None
        elif buf is not None and last_field is not None and wrapped(last_field[1], s):
            last_field = join_wrapped(ev, buf, last_field, s, n)
        else:
            fits = entry_line if buf is not None else _xla_line
            j = src.resumes(i, fits)
            if j is None:
                break
            what = (
                "a buffer field (Size:, Operator:, XLA Label:, Shape:) or ====="
                if buf
                else (
                    "a `Buffer N:` line"
                    if state == "peak"
                    else "a stats line (`... allocation: SIZE`)"
                )
            )
            ev.problems.append(Problem(n, f"expected {what}; skipped", s))
            i = j
            continue
        texts.extend(line_text(src, k) for k in range(last + 1, i + 1))
        last = i
        i += 1
    _end(ev, src, buf, last, state, saw_stats, saw_peak)
    finish(ev, src, max(last, 0), texts)
    return ev


def _end(
    ev: Event,
    src: Lines,
    buf: dict | None,
    last: int,
    state: str,
    saw_stats: bool,
    saw_peak: bool,
) -> None:
    """What the message's end says of it: an entry cut short, stats without their total,
    a peak list without a buffer."""
    if buf is not None:
        close_cut_entry(ev, buf, src.number(last), "buffer")
    elif saw_stats and "total_allocation" not in ev.figures and not saw_peak:
        ev.truncated = True
        ev.problems.append(
            Problem(src.number(last), "stats are cut short (no `total allocation:` line)")
        )
    elif state == "peak" and not ev.buffers:
        ev.truncated = True
        ev.problems.append(
            Problem(src.number(last), "`Peak buffers:` lists no buffer (cut short?)")
        )


def _known_xla(s: str) -> bool:
    return bool(
        BA_DEBUG.fullmatch(s)
        or BA_STATS.fullmatch(s)
        or _STAT.fullmatch(s)
        or PEAK.fullmatch(s)
        or BUF.fullmatch(s)
        or FIELD.fullmatch(s)
        or SEP.fullmatch(s)
    )


def _xla_line(s: str) -> bool:
    return _known_xla(s)
