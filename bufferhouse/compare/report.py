"""A diff as text: markdown for a pull-request comment, or aligned columns for a terminal."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from bufferhouse.compare.gate import PEAK_TITLES, pct, signed
from bufferhouse.errors import DiffError
from bufferhouse.render import human_bytes

if TYPE_CHECKING:  # the result type only annotates here; compare/__init__ imports this module
    from bufferhouse.compare import DiffResult


def _grid(headers: list[str], rows: list[list[str]], right: set[int], fmt: str) -> list[str]:
    if fmt == "markdown":
        out = ["| " + " | ".join(headers) + " |"]
        out.append(
            "| " + " | ".join("---:" if i in right else "---" for i in range(len(headers))) + " |"
        )
        for r in rows:
            cells = [c.replace("|", "\\|").replace("\n", " ") for c in r]
            out.append("| " + " | ".join(cells) + " |")
        return out
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))
        ).rstrip()

    return [line(headers), "  ".join("-" * w for w in widths)] + [line(r) for r in rows]


def _code(text: str | None, fmt: str) -> str:
    if text is None:
        return ""
    return f"`{text}`" if fmt == "markdown" and "`" not in text else text


def _section(title: str, fmt: str) -> list[str]:
    return ["", f"#### {title}" if fmt == "markdown" else title, ""]


def _limited(rows: list, top: int | None) -> tuple[list, int]:
    if top is None or len(rows) <= top:
        return rows, 0
    return rows[:top], len(rows) - top


def _more(hidden: int, what: str) -> list[str]:
    if not hidden:
        return []
    return ["", f"... and {hidden} more {what} not shown (the result tables hold every row)."]


def render(r: DiffResult, fmt: str = "markdown", top: int | None = 25) -> str:
    """The diff as markdown (a pull-request comment) or a terminal table; see DiffResult.report."""
    if fmt not in ("markdown", "table"):
        raise DiffError(f"report format must be markdown or table, got {fmt!r}")
    md = fmt == "markdown"
    s = r.summary()
    arrow = "→" if md else "->"
    title = f"bufferhouse diff: {_code(r.base.spec, fmt)} {arrow} {_code(r.head.spec, fmt)}"
    if r.module is not None:
        title += f", module {_code(r.module, fmt)}"
    out = [f"### {title}" if md else title, ""]
    peak_title = PEAK_TITLES[r.peak]
    base_sum, head_sum = s["base_bytes"], s["head_bytes"]
    change = pct(100.0 * (head_sum - base_sum) / base_sum) if base_sum else ""
    unknown = f", {s['unknown']} unknown" if s["unknown"] else ""
    out.append(
        f"{s['matched']} matched module{'s' if s['matched'] != 1 else ''} "
        f"({s['grown']} grown, {s['shrunk']} shrunk, {s['same']} unchanged{unknown}), "
        f"{s['added']} added, {s['removed']} removed "
        f"({r.base.modules} base modules, {r.head.modules} head modules). "
        f"{peak_title.capitalize()} summed over the matched modules: {human_bytes(base_sum)} "
        f"{arrow} {human_bytes(head_sum)} ({signed(s['delta_bytes'])}"
        f"{', ' + change if change else ''})."
    )
    if r.gate is not None:
        word = "Gate passed:" if r.gate.passed else "Gate failed:"
        out += ["", f"{'**' + word + '**' if md else word} {r.gate.details(limit=top or 10)}."]

    names = Counter(r.modules.column("module_name").to_pylist())

    def module(x: dict) -> str:
        text = _code(x["module_name"], fmt)
        if names[x["module_name"]] > 1:  # say which compile of the name
            numbers = [x["base_number"], x["head_number"]]
            text += " #" + f" {arrow} #".join("" if n is None else str(n) for n in numbers)
        return text

    changed = [row for row in r.modules.to_pylist() if row["status"] != "same"]
    out += _section(f"Modules by {peak_title} change", fmt)
    if changed:
        shown, hidden = _limited(changed, top)
        rows = [
            [
                module(x),
                x["status"],
                x["match"] or "",
                human_bytes(x["base_bytes"]),
                human_bytes(x["head_bytes"]),
                signed(x["delta_bytes"]),
                pct(x["change_pct"]),
            ]
            for x in shown
        ]
        headers = ["module", "status", "match", "base", "head", "delta", "change"]
        out += _grid(headers, rows, {3, 4, 5, 6}, fmt) + _more(hidden, "rows")
    else:
        out.append(f"No module's {peak_title} changed.")

    figures = [
        row
        for row in r.changes.to_pylist()
        if row["status"] not in ("same", "added", "removed") and row["delta_bytes"]
    ]
    n_same = len([x for x in r.modules.to_pylist() if x["status"] == "same"])
    if figures:
        shown, hidden = _limited(figures, top)
        rows = [
            [
                module(x),
                x["metric"],
                human_bytes(x["base_bytes"]),
                human_bytes(x["head_bytes"]),
                signed(x["delta_bytes"]),
                pct(x["change_pct"]),
            ]
            for x in shown
        ]
        headers = ["module", "figure", "base", "head", "delta", "change"]
        label = f"Every changed figure of the matched modules ({len(figures)})"
        if md:
            out += ["", f"<details><summary>{label}</summary>", ""]
        else:
            out += _section(label, fmt)
        out += _grid(headers, rows, {2, 3, 4, 5}, fmt) + _more(hidden, "rows")
        if md:
            out += ["", "</details>"]
    if n_same:
        out += [
            "",
            f"{n_same} matched module{'s' if n_same != 1 else ''} unchanged in {peak_title}.",
        ]

    if r.buffers is not None and r.sources is not None:
        out += _drill_down(r, fmt, top)
    if r.causes is not None:
        out += _causes(r, fmt, top, module)
    return "\n".join(out).rstrip("\n") + "\n"


def _drill_down(r: DiffResult, fmt: str, top: int | None) -> list[str]:
    out: list[str] = []
    assert r.buffers is not None and r.sources is not None
    buffers = r.buffers.to_pylist()
    counts = Counter(x["status"] for x in buffers)
    base_total = sum(x["base_size"] or 0 for x in buffers)
    head_total = sum(x["head_size"] or 0 for x in buffers)
    out += _section(f"Buffers live at the heap peak of {_code(r.module, fmt)}", fmt)
    out.append(
        f"{counts['new']} new, {counts['gone']} gone, {counts['grown']} grown, "
        f"{counts['shrunk']} shrunk, {counts['same']} same; "
        f"{human_bytes(base_total)} {'→' if fmt == 'markdown' else '->'} {human_bytes(head_total)} "
        f"({signed(head_total - base_total)}). Buffers match by op_name and shape, "
        "then by defining instruction, then (without an op_name) by opcode and shape."
    )
    changed = [x for x in buffers if x["status"] != "same"]
    if changed:
        out.append("")
        shown, hidden = _limited(changed, top)
        several = len({x["pair"] for x in buffers}) > 1
        arrow = "→" if fmt == "markdown" else "->"
        compiles = {
            x["pair"]: f" {arrow} ".join(
                "-" if n is None else f"#{n}" for n in (x["base_number"], x["head_number"])
            )
            for x in r.modules.to_pylist()
        }
        rows = []
        for x in shown:
            instruction = x["head_instruction"] or x["base_instruction"]
            row = [
                x["status"],
                _code(x["op_name"] or instruction, fmt),
                _code(x["shape"], fmt),
                x["head_category"] or x["base_category"] or "",
                human_bytes(x["base_size"]),
                human_bytes(x["head_size"]),
                signed(x["delta_bytes"]),
                x["source"] or "",
            ]
            rows.append(([compiles[x["pair"]]] if several else []) + row)
        headers = ["status", "op_name or instruction", "shape", "category", "base", "head"]
        headers += ["delta", "source"]
        right = {4, 5, 6}
        if several:
            headers = ["modules", *headers]
            right = {i + 1 for i in right}
        out += _grid(headers, rows, right, fmt) + _more(hidden, "rows")

    sources = [
        x
        for x in r.sources.to_pylist()
        if x["delta_bytes"] or x["base_buffers"] != x["head_buffers"]
    ]
    out += _section(f"Bytes at the heap peak of {_code(r.module, fmt)} by source line", fmt)
    if sources:
        shown, hidden = _limited(sources, top)
        rows = [
            [
                _code(x["source"], fmt),
                f"{x['base_buffers']} {'→' if fmt == 'markdown' else '->'} {x['head_buffers']}",
                human_bytes(x["base_bytes"]),
                human_bytes(x["head_bytes"]),
                signed(x["delta_bytes"]),
                pct(x["change_pct"]),
            ]
            for x in shown
        ]
        headers = ["source", "buffers", "base", "head", "delta", "change"]
        out += _grid(headers, rows, {2, 3, 4, 5}, fmt) + _more(hidden, "rows")
    else:
        out.append("No source line holds more or less than before.")
    return out


_MEASURE_TITLES = {
    "total_bytes": "total",
    "heap_peak_bytes": "heap peak",
    "logical_peak_bytes": "logical peak",
}


def _by_cause(rows: list[dict]) -> str:
    sums: dict[str, int] = {}
    for x in rows:
        sums[x["cause"]] = sums.get(x["cause"], 0) + x["bytes"]
    ranked = sorted(sums.items(), key=lambda kv: (-abs(kv[1]), kv[0]))
    return ", ".join(f"{cause} {signed(n)}" for cause, n in ranked if n)


def _causes(r: DiffResult, fmt: str, top: int | None, module: Callable[[dict], str]) -> list[str]:
    """Why each module changed: a total per cause and measure, then the largest rows."""
    assert r.causes is not None
    md = fmt == "markdown"
    arrow = "→" if md else "->"
    rows = r.causes.to_pylist()
    out = _section("Causes of each matched module's change", fmt)
    measures = list(dict.fromkeys(x["measure"] for x in rows))
    known = [x for x in rows if x["bytes"] is not None]
    for m in measures:
        summary = _by_cause([x for x in known if x["measure"] == m])
        if summary:
            out.append(f"{_MEASURE_TITLES[m].capitalize()}, summed over the modules: {summary}.")
    missing = [x for x in rows if x["cause"] == "no-peak"]
    if missing:
        names = ", ".join(sorted({_code(x["module_name"], fmt) for x in missing}))
        out.append(f"No attribution where a side lacks the figure (no-peak): {names}.")
    shown_rows = [x for x in known if x["bytes"]]
    shown_rows.sort(key=lambda x: -abs(x["bytes"]))
    if not shown_rows:
        if not missing:
            matched = r.summary()["matched"]
            out.append("No matched module's memory changed." if matched else "No matched modules.")
        return out
    by_pair = {x["pair"]: x for x in r.modules.to_pylist()}
    shown, hidden = _limited(shown_rows, top)
    table = []
    for x in shown:
        name = x["op_name"] or x["head_instruction"] or x["base_instruction"] or ""
        shapes = f"{x['base_shape'] or '-'} {arrow} {x['head_shape'] or '-'}"
        table.append(
            [
                module(by_pair[x["pair"]]),
                _MEASURE_TITLES[x["measure"]],
                x["cause"],
                signed(x["bytes"]),
                str(x["buffers"]) if x["buffers"] else "",
                _code(name, fmt) if name else "",
                shapes if x["base_shape"] or x["head_shape"] else "",
                x["source"] or "",
                x["matched_by"] or "",
            ]
        )
    headers = ["module", "measure", "cause", "bytes", "values", "op_name or instruction"]
    headers += ["shape", "source", "matched by"]
    out.append("")
    out += _grid(headers, table, {3, 4}, fmt) + _more(hidden, "rows")
    out += [
        "",
        "The rows of a module and measure sum exactly to its change; "
        "what the values do not explain is fragmentation (docs/diff.md).",
    ]
    return out


__all__ = ["render"]
