"""One self-contained HTML file about the warehouse: a fleet overview, then a
section per top module; with a baseline, the biggest changes first.

Self-contained means it opens from disk with no server and fetches nothing:
charts are matplotlib SVGs inlined in the page, the sorting script is inline,
and a Content-Security-Policy forbids every request (`default-src 'none'`), so
a browser refuses a fetch even if one crept in.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import html
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from bufferhouse import queries
from bufferhouse.errors import PlotError
from bufferhouse.render import human_bytes
from bufferhouse.schema.warehouse import database_path
from bufferhouse.version import __version__
from bufferhouse.visual.data import (
    ModuleRef,
    Timeline,
    indefinite_by_category,
    module_refs,
    timeline,
)

#: Columns summed per memory space in the categories overview (the categories query's).
CATEGORY_COLUMNS = (
    "parameter_bytes",
    "output_bytes",
    "alias_bytes",
    "constant_bytes",
    "thread_local_bytes",
    "temp_bytes",
    "total_bytes",
)


@dataclass
class ModuleSection:
    """What the report shows for one top module."""

    module: ModuleRef
    timeline: Timeline | None
    no_timeline: str | None
    peak_buffers: list[dict]
    by_source: list[dict]


@dataclass
class ReportData:
    """Everything the report shows, gathered from the canned queries (no HTML)."""

    db: str
    label: str | None
    baseline: str | None
    generated_at: str
    module_count: int
    backends: dict[str, int]
    top_modules: list[dict]
    top_layers: dict[int, dict[str, int]]
    categories: list[dict]
    memory_spaces: list[dict]
    padding: list[dict]
    fragmentation: list[dict]
    recompiles: list[dict]
    sections: list[ModuleSection]
    changes: list[dict] | None = None
    changes_note: str | None = None
    notes: list[str] = field(default_factory=list)


def _rows(con: duckdb.DuckDBPyConnection, name: str, **params: object) -> list[dict]:
    return queries.run(con, name, params).to_pylist()


def _in_scope(rows: list[dict], scope: set[int] | None) -> list[dict]:
    return rows if scope is None else [r for r in rows if r["module_id"] in scope]


def gather(
    con: duckdb.DuckDBPyConnection,
    db: str,
    *,
    label: str | None = None,
    baseline: str | None = None,
    top: int = 10,
    sections: int = 5,
    rows: int = 15,
) -> ReportData:
    """Collect the report's data from the canned queries on `con`.

    `label` (`key=value`) limits everything to the modules carrying it; `top`
    modules are ranked by heap peak, the first `sections` of them get a section
    of their own, and tables show at most `rows` rows.
    """
    queries.use_package_views(con)
    modules = _rows(con, "modules", label=label)
    if label is not None and not modules:
        present = con.execute(
            "SELECT DISTINCT key || '=' || value FROM labels ORDER BY 1 LIMIT 20"
        ).fetchall()
        raise PlotError(
            f"no module carries the label {label!r}; labels: "
            + (", ".join(r[0] for r in present) or "none")
        )
    scope = {m["module_id"] for m in modules} if label is not None else None

    top_modules = _rows(con, "top-modules", top=top, label=label)
    refs = module_refs(con, [r["module_id"] for r in top_modules])
    for r in top_modules:
        r["hash_prefix"] = refs[r["module_id"]].hash_prefix
    top_ids = [r["module_id"] for r in top_modules]
    layers = indefinite_by_category(con, top_ids, 0)
    for module_id, temp_peak in con.execute(
        "SELECT module_id, temp_peak_bytes FROM heap_peaks "
        "WHERE color = 0 AND module_id IN (SELECT unnest($ids))",
        {"ids": top_ids},
    ).fetchall():
        layers[module_id]["temp"] = temp_peak or 0

    by_color: dict[int, dict] = {}
    for r in _in_scope(_rows(con, "categories"), scope):
        acc = by_color.setdefault(r["color"], {"color": r["color"], "modules": 0})
        acc["modules"] += 1
        for c in CATEGORY_COLUMNS:
            acc[c] = acc.get(c, 0) + (r[c] or 0)

    spaces: dict[tuple, dict] = {}
    for r in _in_scope([x for x in _rows(con, "memory-spaces") if x["scope"] == "module"], scope):
        key = (r["backend"], r["color"], r["space_name"])
        acc = spaces.setdefault(
            key,
            {
                "backend": r["backend"],
                "color": r["color"],
                "space_name": r["space_name"],
                "modules": 0,
                "total_bytes": 0,
                "indefinite_bytes": 0,
                "temp_allocation_bytes": 0,
                "heap_peak_bytes": None,
            },
        )
        acc["modules"] += 1
        for c in ("total_bytes", "indefinite_bytes", "temp_allocation_bytes"):
            acc[c] += r[c] or 0
        if r["heap_peak_bytes"] is not None:
            acc["heap_peak_bytes"] = max(acc["heap_peak_bytes"] or 0, r["heap_peak_bytes"])

    padding = [r for r in _in_scope(_rows(con, "padding-by-module"), scope) if r["padding_bytes"]]
    padding = padding[:rows]
    fragmentation = _rows(con, "fragmentation", top=None)  # then scoped: all of them
    fragmentation = [r for r in _in_scope(fragmentation, scope) if r["waste_bytes"]]
    fragmentation = fragmentation[:rows]
    named = module_refs(con, [r["module_id"] for r in padding + fragmentation])
    for r in top_modules + padding + fragmentation:
        ref = refs.get(r["module_id"]) or named[r["module_id"]]
        r["module"] = f"{ref.module_name} \u00b7 {ref.hash_prefix}"

    module_sections = []
    for r in top_modules[:sections]:
        ref = refs[r["module_id"]]
        key = str(ref.module_id)
        try:
            tl, why = timeline(con, ref, space=0, top=5), None
        except PlotError as exc:
            tl, why = None, str(exc)
        module_sections.append(
            ModuleSection(
                module=ref,
                timeline=tl,
                no_timeline=why,
                peak_buffers=_rows(con, "peak-buffers", module=key, top=rows),
                by_source=_rows(con, "by-source", module=key)[:rows],
            )
        )

    data = ReportData(
        db=db,
        label=label,
        baseline=baseline,
        generated_at=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        module_count=len(modules),
        backends=dict(Counter(m["backend"] for m in modules).most_common()),
        top_modules=top_modules,
        top_layers=layers,
        categories=[by_color[c] for c in sorted(by_color)],
        memory_spaces=[spaces[k] for k in sorted(spaces, key=lambda k: (str(k[0]), k[1]))],
        padding=padding,
        fragmentation=fragmentation,
        recompiles=_rows(con, "recompiles", label=label)[:rows],
        sections=module_sections,
    )
    if baseline is not None:
        data.changes, data.changes_note = _changes(con, db, label, baseline)
    return data


def _changes(
    con: duckdb.DuckDBPyConnection, db: str, label: str | None, baseline: str
) -> tuple[list[dict], str]:
    """Per-module heap-peak changes, baseline -> this run, largest absolute change first."""
    is_label = "=" in baseline and not os.path.exists(baseline)
    if is_label and label is None:
        raise PlotError(
            f"--baseline {baseline} is a label of this warehouse: pass --label for the run "
            "to compare with it (e.g. --label run=nightly)"
        )
    try:
        from bufferhouse.compare import diff
    except ImportError:  # the diff stage is not installed: a plain per-name delta
        diff = None
    if diff is not None:
        result = diff(baseline, label if label is not None else db, db=db)
        rows = [r for r in result.modules.to_pylist() if r["status"] != "same"]
        note = (
            "Modules paired by bufferhouse diff (by jit name, then parameter signature, "
            "then instruction mix); unchanged modules are left out."
        )
        return rows, note
    if not is_label:
        raise PlotError(
            f"--baseline {baseline}: comparing with another warehouse or a dump tree needs "
            "bufferhouse.diff, which this installation lacks; give a label of this warehouse"
        )
    return _simple_changes(con, label, baseline), (
        "Heap peak per jit name (the largest module of that name on each side); "
        "bufferhouse diff pairs recompiled modules more carefully."
    )


def _simple_changes(con: duckdb.DuckDBPyConnection, label: str | None, baseline: str) -> list[dict]:
    def peaks(which: str | None) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in _rows(con, "modules", label=which):
            if r["heap_peak_bytes"] is not None:
                out[r["module_name"]] = max(out.get(r["module_name"], 0), r["heap_peak_bytes"])
        return out

    base, head = peaks(baseline), peaks(label)
    rows = []
    for name in sorted(set(base) | set(head)):
        b, h = base.get(name), head.get(name)
        status = (
            "added"
            if b is None
            else "removed"
            if h is None
            else ("grown" if h > b else "shrunk" if h < b else "same")
        )
        if status == "same":
            continue
        delta = (h or 0) - (b or 0)
        rows.append(
            {
                "module_name": name,
                "status": status,
                "match": "name" if b is not None and h is not None else None,
                "base_bytes": b,
                "head_bytes": h,
                "delta_bytes": delta,
                "change_pct": round(100.0 * delta / b, 2) if b else None,
            }
        )
    rows.sort(key=lambda r: (-abs(r["delta_bytes"]), r["module_name"]))
    return rows


# ---------------------------------------------------------------- rendering

_CSS = """
:root { --fg: #1d1d1f; --muted: #5f6368; --line: #dadce0; --band: #f6f8fa; --accent: #1a73e8; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: var(--fg); background: #fff; }
header, main { max-width: 1280px; margin: 0 auto; padding: 0 24px; }
header { padding-top: 20px; border-bottom: 1px solid var(--line); }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 36px 0 8px; padding-top: 8px; border-top: 2px solid var(--fg); }
h3 { font-size: 15px; margin: 22px 0 6px; }
.meta, .note { color: var(--muted); font-size: 13px; }
nav { margin: 10px 0 14px; font-size: 13px; }
nav a { margin-right: 14px; color: var(--accent); text-decoration: none; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 12px 0; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 8px 14px; min-width: 150px; }
.card b { display: block; font-size: 20px; }
.card span { color: var(--muted); font-size: 12px; }
figure.chart { margin: 8px 0 16px; }
figure.chart svg { width: 100%; height: auto; display: block; }
figure.chart svg text { white-space: pre; }
figure.chart figcaption { color: var(--muted); font-size: 12px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 12.5px; margin: 6px 0 14px; }
th, td { padding: 3px 10px; border-bottom: 1px solid var(--line); text-align: left;
  vertical-align: top; white-space: nowrap; }
td.wrap { white-space: normal; max-width: 520px; overflow-wrap: anywhere; }
th { background: var(--band); position: sticky; top: 0; cursor: pointer; user-select: none; }
th::after { content: " \\2195"; color: #b0b0b0; font-size: 10px; }
th[aria-sort=ascending]::after { content: " \\2191"; color: var(--fg); }
th[aria-sort=descending]::after { content: " \\2193"; color: var(--fg); }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
td[title] { text-decoration: underline dotted #b0b0b0; }
tbody tr:nth-child(even) { background: #fbfbfc; }
code { font: 12px ui-monospace, "DejaVu Sans Mono", monospace; }
.up { color: #c5221f; } .down { color: #188038; }
.module-head { display: flex; gap: 18px; flex-wrap: wrap; color: var(--muted); font-size: 13px; }
"""

# Sorts any table.sortable by a header click: numbers by their exact value
# (data-v), text alphabetically, empty cells last; numbers start descending.
_JS = """
(function () {
  "use strict";
  function key(cell) {
    var v = cell.getAttribute("data-v");
    if (v !== null && v !== "") { return {kind: 0, value: parseFloat(v)}; }
    var t = cell.textContent.trim();
    if (t === "" || t === "\\u2014") { return {kind: 2, value: ""}; }
    return {kind: 1, value: t.toLowerCase()};
  }
  function compare(a, b) {
    if (a.kind !== b.kind) { return a.kind - b.kind; }
    if (a.kind === 0) { return a.value - b.value; }
    return a.value < b.value ? -1 : a.value > b.value ? 1 : 0;
  }
  function sortBy(table, th, col) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var numeric = th.classList.contains("n");
    var current = th.getAttribute("aria-sort");
    var ascending = current ? current === "descending" : !numeric;
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) {
      h.removeAttribute("aria-sort");
    });
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    var keyed = rows.map(function (row, i) { return [key(row.cells[col]), i, row]; });
    keyed.sort(function (x, y) {
      var empty = (x[0].kind === 2) - (y[0].kind === 2);
      if (empty !== 0) { return empty; }
      var c = compare(x[0], y[0]);
      return (ascending ? c : -c) || x[1] - y[1];
    });
    keyed.forEach(function (k) { body.appendChild(k[2]); });
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
      th.tabIndex = 0;
      th.addEventListener("click", function () { sortBy(table, th, col); });
      th.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortBy(table, th, col); }
      });
    });
  });
})();
"""


def _e(text: object) -> str:
    return html.escape("" if text is None else str(text), quote=True)


def _bytes_cell(n: int | None, signed: bool = False) -> str:
    if n is None:
        return '<td class="n" data-v="">\u2014</td>'
    shown = human_bytes(abs(n) if signed else n)
    if signed:
        shown = ("+" if n > 0 else "\u2212" if n < 0 else "") + shown
        css = " up" if n > 0 else " down" if n < 0 else ""
    else:
        css = ""
    return f'<td class="n{css}" data-v="{n}" title="{n:,} bytes">{shown}</td>'


def _cell(value: object, kind: str) -> str:
    if kind == "bytes":
        return _bytes_cell(value)  # type: ignore[arg-type]
    if kind == "delta":
        return _bytes_cell(value, signed=True)  # type: ignore[arg-type]
    if kind in ("int", "pct"):
        if value is None:
            return '<td class="n" data-v="">\u2014</td>'
        shown = f"{value:,}" if kind == "int" else f"{value:.1f}%"
        return f'<td class="n" data-v="{value}">{shown}</td>'
    if kind == "code":
        return f'<td class="wrap"><code>{_e(value)}</code></td>' if value else "<td></td>"
    if kind == "bool":
        return f"<td>{'yes' if value else 'no' if value is not None else ''}</td>"
    if kind == "list":
        return f"<td>{_e(', '.join(str(v) for v in value or []))}</td>"
    return f'<td class="wrap">{_e(value)}</td>'


def _table(name: str, columns: list[tuple[str, str, str]], rows: list[dict]) -> str:
    """columns: (key, header, kind) with kind bytes, delta, int, pct, code, list or text."""
    if not rows:
        return '<p class="note">Nothing to show.</p>'
    numeric = ("bytes", "delta", "int", "pct")
    head = "".join(
        f'<th scope="col"{" class=n" if kind in numeric else ""}>{_e(title)}</th>'
        for _, title, kind in columns
    )
    body = "\n".join(
        "<tr>" + "".join(_cell(r.get(key), kind) for key, _, kind in columns) + "</tr>"
        for r in rows
    )
    return (
        f'<div class="scroll"><table class="sortable" data-table="{_e(name)}">'
        f"<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody></table></div>"
    )


def _chart(name: str, fig, caption: str) -> str:
    from bufferhouse.visual import plots

    label = _e(caption)
    svg = plots.inline_svg(fig, prefix=f"{name}-")
    svg = svg.replace("<svg ", f'<svg role="img" aria-label="{label}" ', 1)
    return (
        f'<figure class="chart" data-chart="{_e(name)}">{svg}'
        f"<figcaption>{label}</figcaption></figure>"
    )


def _module_anchor(ref: ModuleRef) -> str:
    return f"module-{ref.hash_prefix}"


def render(data: ReportData) -> str:
    """The report as one HTML document (charts drawn here, with matplotlib)."""
    from bufferhouse.visual import plots

    scope = f"modules labelled {data.label}" if data.label else "every module in the warehouse"
    parts: list[str] = []
    nav = []
    if data.changes is not None:
        nav.append(("changes", "Biggest changes"))
    nav += [("overview", "Fleet overview")]
    nav += [
        (_module_anchor(s.module), f"{s.module.module_name} \u00b7 {s.module.hash_prefix}")
        for s in data.sections
    ]

    if data.changes is not None:
        parts.append('<section id="changes"><h2>Biggest changes</h2>')
        parts.append(
            f'<p class="note">Heap peak of memory space 0, baseline <code>{_e(data.baseline)}'
            f"</code> \u2192 {_e(scope)}. {_e(data.changes_note)}</p>"
        )
        if data.changes:
            shown = data.changes[:20]
            parts.append(
                _chart(
                    "changes",
                    plots.draw_changes(shown),
                    f"Heap peak change per module, largest first ({len(shown)} of "
                    f"{len(data.changes)} changed)",
                )
            )
        parts.append(
            _table(
                "changes",
                [
                    ("module_name", "module", "code"),
                    ("status", "status", "text"),
                    ("match", "paired by", "text"),
                    ("base_bytes", "baseline", "bytes"),
                    ("head_bytes", "this run", "bytes"),
                    ("delta_bytes", "change", "delta"),
                    ("change_pct", "change %", "pct"),
                ],
                data.changes,
            )
        )
        parts.append("</section>")

    parts.append('<section id="overview"><h2>Fleet overview</h2>')
    cards = [
        (f"{data.module_count:,}", "modules"),
        (", ".join(f"{k} {v}" for k, v in data.backends.items()) or "\u2014", "backends"),
    ]
    if data.top_modules:
        biggest = data.top_modules[0]
        cards.append(
            (
                human_bytes(biggest["heap_peak_bytes"]),
                f"largest heap peak: {biggest['module_name']}",
            )
        )
    parts.append(
        '<div class="cards">'
        + "".join(f"<div class=card><b>{_e(v)}</b><span>{_e(k)}</span></div>" for v, k in cards)
        + "</div>"
    )
    parts.append("<h3>Top modules by heap peak</h3>")
    if data.top_modules:
        parts.append(
            _chart(
                "top-modules",
                plots.draw_top_modules(data.top_modules, data.top_layers),
                "Heap peak of memory space 0 per module, split into parameters, outputs, "
                "constants, thread-local and the temp bytes live at the peak",
            )
        )
    parts.append(
        _table(
            "top-modules",
            [
                ("rank", "#", "int"),
                ("module", "module \u00b7 hash", "code"),
                ("backend", "backend", "text"),
                ("heap_peak_bytes", "heap peak", "bytes"),
                ("logical_peak_bytes", "logical peak", "bytes"),
                ("total_bytes", "total bytes", "bytes"),
            ],
            data.top_modules,
        )
    )
    parts.append(
        "<h3>Categories</h3><p class=note>XLA's memory_analysis() categories summed per memory "
        "space; they overlap (a donated parameter is parameter, output and alias).</p>"
    )
    parts.append(
        _table(
            "categories",
            [
                ("color", "space", "int"),
                ("modules", "modules", "int"),
                ("parameter_bytes", "parameters", "bytes"),
                ("output_bytes", "outputs", "bytes"),
                ("alias_bytes", "aliased", "bytes"),
                ("constant_bytes", "constants", "bytes"),
                ("thread_local_bytes", "thread-local", "bytes"),
                ("temp_bytes", "temp", "bytes"),
                ("total_bytes", "total", "bytes"),
            ],
            data.categories,
        )
    )
    parts.append("<h3>Memory spaces</h3>")
    parts.append(
        _table(
            "memory-spaces",
            [
                ("backend", "backend", "text"),
                ("color", "color", "int"),
                ("space_name", "space", "text"),
                ("modules", "modules", "int"),
                ("total_bytes", "total bytes", "bytes"),
                ("indefinite_bytes", "indefinite", "bytes"),
                ("temp_allocation_bytes", "temp allocations", "bytes"),
                ("heap_peak_bytes", "largest heap peak", "bytes"),
            ],
            data.memory_spaces,
        )
    )
    parts.append(
        "<h3>Padding</h3><p class=note>Assigned bytes beyond the shapes' logical bytes, "
        "per module and memory space, worst first.</p>"
    )
    parts.append(
        _table(
            "padding",
            [
                ("module", "module \u00b7 hash", "code"),
                ("color", "space", "int"),
                ("slices", "slices", "int"),
                ("assigned_bytes", "assigned", "bytes"),
                ("logical_bytes", "logical", "bytes"),
                ("padding_bytes", "padding", "bytes"),
                ("padding_pct", "padding %", "pct"),
            ],
            data.padding,
        )
    )
    parts.append(
        "<h3>Fragmentation</h3><p class=note>Temp allocations whose size exceeds the "
        "most bytes they hold at once, worst first.</p>"
    )
    parts.append(
        _table(
            "fragmentation",
            [
                ("module", "module \u00b7 hash", "code"),
                ("allocation_index", "allocation", "int"),
                ("color", "space", "int"),
                ("size", "size", "bytes"),
                ("max_live_bytes", "most in use", "bytes"),
                ("waste_bytes", "unused", "bytes"),
                ("waste_pct", "unused %", "pct"),
            ],
            data.fragmentation,
        )
    )
    parts.append("<h3>Recompiles</h3><p class=note>Jit names compiled into several modules.</p>")
    parts.append(
        _table(
            "recompiles",
            [
                ("module_name", "module", "code"),
                ("modules", "modules", "int"),
                ("distinct_contents", "distinct dumps", "int"),
                ("module_numbers", "module numbers", "list"),
                ("min_heap_peak_bytes", "smallest heap peak", "bytes"),
                ("max_heap_peak_bytes", "largest heap peak", "bytes"),
                ("peaks_differ", "peaks differ", "bool"),
            ],
            data.recompiles,
        )
    )
    parts.append("</section>")

    for s in data.sections:
        ref = s.module
        anchor = _module_anchor(ref)
        parts.append(f'<section id="{anchor}" class="module"><h2>{_e(ref.module_name)}</h2>')
        facts = [
            f"hash <code>{_e(ref.hash_prefix)}</code>",
            f"file <code>{_e(ref.file_stem)}</code>",
            f"backend {_e(ref.backend)}",
            f'heap peak <b title="{ref.heap_peak_bytes or 0:,} bytes">{_e(human_bytes(ref.heap_peak_bytes))}</b>',
            f"logical peak {_e(human_bytes(ref.logical_peak_bytes))}",
            f"total {_e(human_bytes(ref.total_bytes))}",
        ]
        if ref.labels:
            facts.append(f"labels {_e(ref.labels)}")
        parts.append(
            '<div class="module-head">' + "".join(f"<span>{f}</span>" for f in facts) + "</div>"
        )
        if s.timeline is not None:
            parts.append(
                _chart(
                    f"timeline-{ref.hash_prefix}",
                    plots.draw_timeline(s.timeline),
                    f"Live bytes of {ref.module_name} over program order, memory space 0, "
                    "stacked by category; the dashed line marks the heap peak",
                )
            )
        else:
            parts.append(f'<p class="note">No timeline: {_e(s.no_timeline)}.</p>')
        parts.append("<h3>Buffers at the heap peak</h3>")
        parts.append(
            _table(
                f"peak-buffers-{ref.hash_prefix}",
                [
                    ("size", "size", "bytes"),
                    ("logical_bytes", "logical", "bytes"),
                    ("category", "category", "text"),
                    ("instruction", "instruction", "code"),
                    ("shape", "shape", "code"),
                    ("op_name", "op_name", "code"),
                    ("source", "source", "code"),
                ],
                s.peak_buffers,
            )
        )
        parts.append("<h3>Bytes at the peak by source line</h3>")
        parts.append(
            _table(
                f"by-source-{ref.hash_prefix}",
                [
                    ("key", "source", "code"),
                    ("buffers", "buffers", "int"),
                    ("bytes", "bytes", "bytes"),
                    ("logical_bytes", "logical", "bytes"),
                ],
                s.by_source,
            )
        )
        parts.append('<p class="note"><a href="#top">back to top</a></p></section>')

    script_hash = base64.b64encode(hashlib.sha256(_JS.encode()).digest()).decode()
    csp = (
        "default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
        f"script-src 'sha256-{script_hash}'; base-uri 'none'; form-action 'none'"
    )
    meta = (
        f"warehouse <code>{_e(data.db)}</code> \u00b7 {_e(scope)} \u00b7 "
        f"generated {_e(data.generated_at)} by bufferhouse {_e(__version__)}"
    )
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            '<meta name="referrer" content="no-referrer">',
            f"<title>bufferhouse report \u2014 {_e(Path(data.db).name)}</title>",
            f"<style>{_CSS}</style>",
            "</head>",
            '<body id="top">',
            "<header>",
            "<h1>bufferhouse memory report</h1>",
            f'<p class="meta">{meta}</p>',
            "<nav>" + "".join(f'<a href="#{_e(a)}">{_e(t)}</a>' for a, t in nav) + "</nav>",
            "</header>",
            "<main>",
            *parts,
            "</main>",
            f"<script>{_JS}</script>",
            "</body>",
            "</html>",
            "",
        ]
    )


@dataclass
class Written:
    """A written report: its data and where it went."""

    data: ReportData
    path: Path
    bytes: int


def write_report(
    output: str | os.PathLike[str],
    *,
    db: str | os.PathLike[str] | None = None,
    label: str | None = None,
    baseline: str | None = None,
    top: int = 10,
    sections: int = 5,
    rows: int = 15,
) -> Written:
    """Write one self-contained HTML report of the warehouse to `output`.

    `label` (`key=value`) limits the report to one run; `baseline` (a label,
    another warehouse file or a dump tree) adds the biggest heap-peak changes
    from it to this run, first.

    >>> visual.write_report("report.html", db="fleet.duckdb", label="run=nightly",
    ...                     baseline="run=previous")
    """
    from bufferhouse.visual import open_warehouse, plots

    plots._matplotlib()  # fail before any work when the extra is missing
    path = database_path(db)
    with open_warehouse(db) as con:
        data = gather(
            con, path, label=label, baseline=baseline, top=top, sections=sections, rows=rows
        )
    text = render(data)
    target = Path(output)
    target.write_text(text, encoding="utf-8")
    return Written(data, target, len(text.encode()))


__all__ = ["ModuleSection", "ReportData", "Written", "gather", "render", "write_report"]
