"""The report's data, gathered from the canned queries: plain records, no HTML.

Kept apart from the page (`visual.page`) so what the report shows can be tested
against the queries without parsing HTML.
"""

from __future__ import annotations

import datetime as dt
import os
from collections import Counter
from dataclasses import dataclass, field

import duckdb

from bufferhouse import queries
from bufferhouse.errors import PlotError
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
    #: Compiles among them (compile_modules): one compile read as a text dump, an
    #: .hlo.pb and a profile is three modules and one compile.
    compile_count: int
    backends: dict[str, int]
    top_modules: list[dict]
    top_layers: dict[int, dict[str, int]]
    categories: list[dict]
    memory_spaces: list[dict]
    padding: list[dict]
    fragmentation: list[dict]
    recompiles: list[dict]
    sections: list[ModuleSection]
    #: Compiles in scope that are jax's helper programs (bh_is_helper), left out of the
    #: top modules and recompiles.
    helper_count: int = 0
    changes: list[dict] | None = None
    changes_note: str | None = None
    notes: list[str] = field(default_factory=list)
    #: OOM events from logs (the oom-events query, at most `rows`) and how many there are.
    oom_events: list[dict] = field(default_factory=list)
    oom_event_count: int = 0
    #: The oom-culprits query: ops and source lines that top the OOM buffer lists.
    oom_culprits: list[dict] = field(default_factory=list)
    #: Device memory profiles: how many, and of the one loaded last its path, its buffers
    #: per device (live-memory) and its top allocating lines (live-by-source).
    snapshot_count: int = 0
    snapshot_path: str | None = None
    snapshot_devices: list[dict] = field(default_factory=list)
    snapshot_sources: list[dict] = field(default_factory=list)


def _rows(con: duckdb.DuckDBPyConnection, name: str, **params: object) -> list[dict]:
    return queries.run(con, name, params).to_pylist()


def _in_scope(rows: list[dict], scope: set[int]) -> list[dict]:
    return [r for r in rows if r["module_id"] in scope]


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
    of their own, and tables show at most `rows` rows. A compile seen in several
    forms counts once (the compile_modules view), in the sums too.
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
    scope = _compiles(con, modules)
    # jax's helper programs (bh_is_helper) are left out of the rankings, and counted
    top_modules = _rows(con, "top-modules", top=top, label=label, helpers=False)
    refs = module_refs(con, [r["module_id"] for r in top_modules])
    for r in top_modules:
        r["hash_prefix"] = refs[r["module_id"]].hash_prefix
    padding = [r for r in _in_scope(_rows(con, "padding-by-module"), scope) if r["padding_bytes"]]
    padding = padding[:rows]
    fragmentation = _rows(con, "fragmentation", top=None)  # then scoped: all of them
    fragmentation = [r for r in _in_scope(fragmentation, scope) if r["waste_bytes"]][:rows]
    named = module_refs(con, [r["module_id"] for r in padding + fragmentation])
    for r in top_modules + padding + fragmentation:
        ref = refs.get(r["module_id"]) or named[r["module_id"]]
        r["module"] = f"{ref.module_name} \u00b7 {ref.hash_prefix}"
        r["labels"] = ref.labels
    _directories(con, top_modules)
    data = ReportData(
        db=db,
        label=label,
        baseline=baseline,
        generated_at=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        module_count=len(modules),
        compile_count=len(scope),
        backends=dict(
            Counter(m["backend"] for m in modules if m["module_id"] in scope).most_common()
        ),
        top_modules=top_modules,
        top_layers=_top_layers(con, [r["module_id"] for r in top_modules]),
        categories=_categories(con, scope),
        memory_spaces=_memory_spaces(con, scope),
        padding=padding,
        fragmentation=fragmentation,
        recompiles=_rows(con, "recompiles", label=label, helpers=False)[:rows],
        helper_count=_helpers(con, scope),
        sections=[_section(con, refs[r["module_id"]], rows) for r in top_modules[:sections]],
    )
    _oom(con, data, label, rows)
    _runtime(con, data, label, rows)
    if baseline is not None:
        data.changes, data.changes_note = _changes(con, db, label, baseline)
    return data


def _helpers(con: duckdb.DuckDBPyConnection, scope: set[int]) -> int:
    return con.execute(
        "SELECT count(*) FROM modules WHERE module_id IN (SELECT unnest($ids)) "
        "AND bh_is_helper(module_name)",
        {"ids": sorted(scope)},
    ).fetchall()[0][0]


def _directories(con: duckdb.DuckDBPyConnection, rows: list[dict]) -> None:
    """Each row's dump directory: what tells two configurations of one program apart."""
    ids = [r["module_id"] for r in rows]
    found = dict(
        con.execute(
            "SELECT module_id, regexp_extract(paths[1], '^(.*)/', 1) FROM modules "
            "WHERE module_id IN (SELECT unnest($ids))",
            {"ids": ids},
        ).fetchall()
    )
    for r in rows:
        r["directory"] = found.get(r["module_id"])


def _compiles(con: duckdb.DuckDBPyConnection, modules: list[dict]) -> set[int]:
    """The modules (of those given) that stand for their compile (compile_modules)."""
    primary = {
        r[0] for r in con.execute("SELECT primary_module_id FROM compile_modules").fetchall()
    }
    return {m["module_id"] for m in modules} & primary


def _top_layers(con: duckdb.DuckDBPyConnection, top_ids: list[int]) -> dict[int, dict[str, int]]:
    """Each top module's peak in layers: its indefinite bytes by category, then temp."""
    layers = indefinite_by_category(con, top_ids, 0)
    for module_id, temp_peak in con.execute(
        "SELECT module_id, temp_peak_bytes FROM heap_peaks "
        "WHERE color = 0 AND module_id IN (SELECT unnest($ids))",
        {"ids": top_ids},
    ).fetchall():
        layers[module_id]["temp"] = temp_peak or 0
    return layers


def _categories(con: duckdb.DuckDBPyConnection, scope: set[int]) -> list[dict]:
    """The categories query summed per memory space over the modules in scope."""
    by_color: dict[int, dict] = {}
    for r in _in_scope(_rows(con, "categories"), scope):
        acc = by_color.setdefault(r["color"], {"color": r["color"], "modules": 0})
        acc["modules"] += 1
        for c in CATEGORY_COLUMNS:
            acc[c] = acc.get(c, 0) + (r[c] or 0)
    return [by_color[c] for c in sorted(by_color)]


def _memory_spaces(con: duckdb.DuckDBPyConnection, scope: set[int]) -> list[dict]:
    """The memory-spaces query's module rows summed per backend and space (the largest
    heap peak, not a sum)."""
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
    return [spaces[k] for k in sorted(spaces, key=lambda k: (str(k[0]), k[1]))]


def _section(con: duckdb.DuckDBPyConnection, ref: ModuleRef, rows: int) -> ModuleSection:
    """One top module's section: its timeline (or why it has none), peak buffers, sources."""
    key = str(ref.module_id)
    try:
        tl, why = timeline(con, ref, space=0, top=5), None
    except PlotError as exc:
        tl, why = None, str(exc)
    return ModuleSection(
        module=ref,
        timeline=tl,
        no_timeline=why,
        peak_buffers=_rows(con, "peak-buffers", module=key, top=rows),
        by_source=_rows(con, "by-source", module=key)[:rows],
    )


def _oom(con: duckdb.DuckDBPyConnection, data: ReportData, label: str | None, rows: int) -> None:
    events = _rows(con, "oom-events", label=label)
    if events:  # newest first: the ids grow with ingest order
        events.sort(key=lambda r: (-r["event_id"], r["path"], r["line"]))
        data.oom_event_count = len(events)
        data.oom_events = events[:rows]
        data.oom_culprits = _rows(con, "oom-culprits", top=rows, label=label)


def _runtime(
    con: duckdb.DuckDBPyConnection, data: ReportData, label: str | None, rows: int
) -> None:
    """The runtime part: the snapshot loaded last (ids grow with ingest order)."""
    held = _rows(con, "live-memory", label=label)
    if not held:
        return
    data.snapshot_count = len({r["snapshot_id"] for r in held})
    newest = max(r["snapshot_id"] for r in held)
    data.snapshot_devices = [
        r for r in held if r["snapshot_id"] == newest and r["kind"] == "buffer"
    ]
    data.snapshot_path = next(r["path"] for r in held if r["snapshot_id"] == newest)
    data.snapshot_sources = _rows(con, "live-by-source", snapshot=str(newest), top=rows)


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
    try:  # deferred: without the compare stage (a trimmed build) a plain per-name delta
        from bufferhouse.compare import diff
    except ImportError:
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


__all__ = ["CATEGORY_COLUMNS", "ModuleSection", "ReportData", "gather"]
