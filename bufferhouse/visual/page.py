"""The report's HTML: tables, inlined SVG charts, the page around them.

The stylesheet and the table-sorting script are package data files
(`visual/assets/report.css`, `report.js`), inlined into the page; the
Content-Security-Policy allows exactly that script by its hash.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
import unicodedata
from importlib import resources
from pathlib import Path

from bufferhouse.render import human_bytes
from bufferhouse.version import __version__
from bufferhouse.visual import plots
from bufferhouse.visual.data import ModuleRef
from bufferhouse.visual.gather import ModuleSection, ReportData


def asset(name: str) -> str:
    """The text of a package data file under visual/assets (report.css, report.js)."""
    return resources.files("bufferhouse.visual").joinpath("assets", name).read_text("utf-8")


#: Characters that are invisible or reorder the text around them: C0/C1 controls (but
#: tab and newline), the soft hyphen, bidi marks, embeddings, overrides and isolates
#: (U+061C, U+200E/F, U+202A-E, U+2066-9), zero-width ones (U+200B-D, U+2060-4, U+180E)
#: and the BOM (U+FEFF). A name is data: each is shown as its code point, <U+202E>.
HIDDEN = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb]"
)


def _code_point(c: str) -> str:
    return f"U+{ord(c):04X}"


def visible(text: str) -> str:
    """`text` escaped for HTML (attributes too) with each HIDDEN character as the
    literal text <U+XXXX>: safe in any context, and nothing reorders."""
    return HIDDEN.sub(lambda m: f"&lt;{_code_point(m.group())}&gt;", html.escape(text, quote=True))


def _e(text: object) -> str:
    """Text for an attribute or element: escaped, hidden characters made visible."""
    return visible("" if text is None else str(text))


def _t(text: object) -> str:
    """Text for element content: as _e, each hidden character marked up (a span that
    names it on hover), so it stands out from the name around it."""

    def mark(m: re.Match) -> str:
        c = m.group()
        name = unicodedata.name(c, "control character").lower()
        return f'<span class="cp" title="{_code_point(c)} {name}">&lt;{_code_point(c)}&gt;</span>'

    text = HIDDEN.sub(mark, html.escape("" if text is None else str(text), quote=True))
    # a long name breaks after _ . / (jit_decode_step), not mid-word
    return _BREAKS.sub(lambda m: m.group() + "<wbr>", text)


_BREAKS = re.compile(r"(?<=[^\s<>])[_./](?=[^\s<>&])")


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
        return f'<td class="wrap"><code>{_t(value)}</code></td>' if value else "<td></td>"
    if kind == "bool":
        return f"<td>{'yes' if value else 'no' if value is not None else ''}</td>"
    if kind == "list":
        return f"<td>{_e(', '.join(str(v) for v in value or []))}</td>"
    return f'<td class="wrap">{_t(value)}</td>'


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
    label = _e(caption)
    # the names a chart draws come through matplotlib, escaped but not made visible
    svg = HIDDEN.sub(
        lambda m: f"&lt;{_code_point(m.group())}&gt;", plots.inline_svg(fig, f"{name}-")
    )
    svg = svg.replace("<svg ", f'<svg role="img" aria-label="{label}" ', 1)
    return (
        f'<figure class="chart" data-chart="{_e(name)}">{svg}'
        f"<figcaption>{label}</figcaption></figure>"
    )


def _module_anchor(ref: ModuleRef) -> str:
    return f"module-{ref.hash_prefix}"


def render(data: ReportData) -> str:
    """The report as one HTML document (charts drawn here, with matplotlib)."""
    scope = f"modules labelled {data.label}" if data.label else "every module in the warehouse"
    nav = []
    parts: list[str] = []
    if data.changes is not None:
        nav.append(("changes", "Biggest changes"))
        parts += _changes_section(data, scope)
    nav.append(("overview", "Fleet overview"))
    parts += _overview_section(data)
    if data.oom_events:
        nav.append(("oom", "Out of memory"))
        parts += _oom_section(data)
    if data.snapshot_devices:
        nav.append(("runtime", "Device memory"))
        parts += _runtime_section(data)
    for s in data.sections:
        nav.append(
            (_module_anchor(s.module), f"{s.module.module_name} \u00b7 {s.module.hash_prefix}")
        )
        parts += _module_section(s)
    return _document(data, scope, nav, parts)


def _changes_section(data: ReportData, scope: str) -> list[str]:
    parts = ['<section id="changes"><h2>Biggest changes</h2>']
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
    return parts


def _overview_section(data: ReportData) -> list[str]:
    """The fleet overview: cards, the top modules, then the fleet-wide tables."""
    parts: list[str] = []
    parts.append('<section id="overview"><h2>Fleet overview</h2>')
    forms = (
        ""
        if data.module_count == data.compile_count
        else f" ({data.module_count:,} modules: a compile read in several forms is one)"
    )
    cards = [
        (f"{data.compile_count:,}", f"compiles{forms}"),
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
    parts += _top_modules_part(data)
    parts += _spaces_part(data)
    parts += _waste_part(data)
    parts.append("</section>")
    return parts


def _top_modules_part(data: ReportData) -> list[str]:
    parts: list[str] = []
    parts.append("<h3>Top modules by heap peak</h3>")
    if data.helper_count:
        parts.append(
            f'<p class="note">{data.helper_count:,} of jax\'s helper programs (jit__normal, '
            "jit_convert_element_type ...: <code>bh_is_helper</code>, docs/pictures.md) are "
            "left out here and from the recompiles.</p>"
        )
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
                ("directory", "directory", "code"),
                ("labels", "labels", "code"),
                ("backend", "backend", "text"),
                ("heap_peak_bytes", "heap peak", "bytes"),
                ("logical_peak_bytes", "logical peak", "bytes"),
                ("total_bytes", "total bytes", "bytes"),
            ],
            data.top_modules,
        )
    )
    return parts


def _spaces_part(data: ReportData) -> list[str]:
    """What the modules hold, by XLA category and by memory space."""
    parts: list[str] = []
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
    return parts


def _waste_part(data: ReportData) -> list[str]:
    """Padding, fragmentation and recompiles: what is spent for nothing."""
    parts: list[str] = []
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
    parts.append(
        "<h3>Recompiles</h3><p class=note>Jit names compiled into several modules within one "
        "dump directory (one process); the same name in two directories is two runs.</p>"
    )
    parts.append(
        _table(
            "recompiles",
            [
                ("module_name", "module", "code"),
                ("directory", "directory", "code"),
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
    return parts


def _oom_section(data: ReportData) -> list[str]:
    shown = len(data.oom_events)
    parts = ['<section id="oom"><h2>Out of memory</h2>']
    parts.append(
        f'<p class="note">{data.oom_event_count:,} RESOURCE_EXHAUSTED messages found in logs'
        f"{'' if shown == data.oom_event_count else f', the {shown} loaded last shown'}"
        " (<code>bufferhouse query oom-events</code>). Sizes as the messages printed them,"
        " most rounded from their unit.</p>"
    )
    parts.append(
        _table(
            "oom-events",
            [
                ("path", "log", "code"),
                ("line", "line", "int"),
                ("form", "form", "text"),
                ("program_name", "program", "code"),
                ("memory_space", "space", "text"),
                ("requested_bytes", "requested", "bytes"),
                ("capacity_bytes", "capacity", "bytes"),
                ("total_bytes", "needed", "bytes"),
                ("buffer_count", "buffers", "int"),
                ("largest_op_name", "largest buffer's op", "code"),
                ("truncated", "cut short", "bool"),
            ],
            data.oom_events,
        )
    )
    parts.append(
        "<h3>Culprits</h3><p class=note>Ops and source lines that top the buffer lists of"
        " the OOM messages, by how many events list them, then bytes.</p>"
    )
    parts.append(
        _table(
            "oom-culprits",
            [
                ("op_name", "op", "code"),
                ("source", "source", "code"),
                ("events", "events", "int"),
                ("buffers", "buffers", "int"),
                ("total_bytes", "bytes", "bytes"),
                ("largest_bytes", "largest", "bytes"),
                ("programs", "programs", "text"),
            ],
            data.oom_culprits,
        )
    )
    parts.append("</section>")
    return parts


def _runtime_section(data: ReportData) -> list[str]:
    parts = ['<section id="runtime"><h2>Device memory</h2>']
    parts.append(
        f'<p class="note">{data.snapshot_count:,} device memory profiles; the one loaded last,'
        f" <code>{_e(data.snapshot_path)}</code>: live buffers per device"
        " (<code>bufferhouse query live-memory</code>).</p>"
    )
    parts.append(
        _chart(
            "runtime-devices",
            plots.draw_devices(data.snapshot_devices),
            "Live buffer bytes per device in the snapshot",
        )
    )
    parts.append(
        _table(
            "runtime-devices",
            [
                ("device", "device", "code"),
                ("live_bytes", "live", "bytes"),
                ("array_count", "buffers", "int"),
                ("share_pct", "share %", "pct"),
            ],
            data.snapshot_devices,
        )
    )
    parts.append(
        "<h3>Top allocating lines</h3><p class=note>The Python line that made the buffers (the"
        " innermost frame outside jax), per device (<code>bufferhouse query"
        " live-by-source</code>).</p>"
    )
    parts.append(
        _table(
            "runtime-sources",
            [
                ("source", "source", "code"),
                ("device", "device", "code"),
                ("max_bytes", "bytes", "bytes"),
                ("max_count", "buffers", "int"),
            ],
            data.snapshot_sources,
        )
    )
    parts.append("</section>")
    return parts


def _module_section(s: ModuleSection) -> list[str]:
    parts: list[str] = []
    ref = s.module
    anchor = _module_anchor(ref)
    parts.append(f'<section id="{anchor}" class="module"><h2>{_t(ref.module_name)}</h2>')
    facts = [
        f"hash <code>{_e(ref.hash_prefix)}</code>",
        f"file <code>{_t(ref.file_stem)}</code>",
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
    return parts


def _document(data: ReportData, scope: str, nav: list[tuple[str, str]], parts: list[str]) -> str:
    script = asset("report.js")
    script_hash = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
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
            f"<style>{asset('report.css')}</style>",
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
            f"<script>{script}</script>",
            "</body>",
            "</html>",
            "",
        ]
    )


__all__ = ["asset", "render"]
