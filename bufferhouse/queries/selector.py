"""The module selector: how a `module` parameter picks modules, and what the tool
says when it picks none (a typo) or several (a name compiled more than once).

See docs/query-planning.md for why it is a macro (bh_is_module) and not
the module_keys view.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass

import duckdb

from bufferhouse.errors import (
    UnknownEventError,
    UnknownLabelError,
    UnknownModuleError,
    UnknownSnapshotError,
)

#: The module selector, a scalar macro installed beside the views (a view cannot take
#: the parameter; see the module docstring): true when `key` is the module's name,
#: file stem, module_id or 12-digit content-hash prefix, the keys module_keys lists.
SELECTOR_NAME = "bh_is_module"
SELECTOR_PARAMS = ("key", "module_name", "file_stem", "module_id", "content_hash")
SELECTOR_BODY = """
  module_name = key
  OR file_stem = key
  OR (module_id = TRY_CAST(key AS BIGINT) AND CAST(module_id AS VARCHAR) = key)
  OR (length(key) = 12 AND substr(content_hash, 1, 12) = key)"""
#: How every query with a `module` parameter calls it (the tests hold them to it).
MODULE_SELECTOR = f"{SELECTOR_NAME}($module, module_name, file_stem, module_id, content_hash)"


def selector_macro_sql(temp: bool = False) -> str:
    kind = "TEMP MACRO" if temp else "MACRO"
    return (
        f"CREATE OR REPLACE {kind} {SELECTOR_NAME}({', '.join(SELECTOR_PARAMS)}) AS{SELECTOR_BODY}"
    )


def require_module(con: duckdb.DuckDBPyConnection, key: str) -> None:
    """Raise UnknownModuleError, with the nearest names, when `key` selects no module.

    A typo in a module name would otherwise be an empty result that looks like
    a module with nothing in it.
    """
    selected = con.execute(
        f"SELECT count(*) FROM modules WHERE {MODULE_SELECTOR}", {"module": key}
    ).fetchall()[0][0]
    if selected:
        return
    like = [
        r[0]
        for r in con.execute(
            "SELECT DISTINCT module_name FROM modules "
            "WHERE module_name ILIKE '%' || $key || '%' ORDER BY 1 LIMIT 5",
            {"key": key},
        ).fetchall()
    ]
    if len(like) < 5:
        names = [
            r[0]
            for r in con.execute(
                "SELECT module_name FROM modules UNION SELECT file_stem FROM modules"
            ).fetchall()
            if r[0] is not None
        ]
        close = difflib.get_close_matches(key, names, n=5 - len(like), cutoff=0.75)
        like += [n for n in close if n not in like]
    hint = f"; did you mean {', '.join(like)}?" if like else ""
    raise UnknownModuleError(
        key,
        f"no module matches {key!r} (a module name, file stem, module_id or "
        f"12-digit hash prefix){hint}",
    )


#: The event selector of the oom-* queries' `event` parameter (oom-vs-peak.sql spells it
#: the same way): an event_id, or a 12-digit event_hash prefix.
_EVENT_SQL = """
SELECT count(*) FILTER (
  WHERE CAST(event_id AS VARCHAR) = $event
  OR (length($event) = 12 AND substr(event_hash, 1, 12) = $event)
), count(*)
FROM oom_events
"""


def require_event(con: duckdb.DuckDBPyConnection, key: str) -> None:
    """Raise UnknownEventError when `key` selects no OOM event: a typo would otherwise be
    an empty result, as for a module."""
    selected, total = con.execute(_EVENT_SQL, {"event": key}).fetchall()[0]
    if selected:
        return
    raise UnknownEventError(
        key,
        f"no OOM event matches {key!r} (an event_id or 12-digit event_hash prefix); "
        f"the warehouse holds {total} events: 'bufferhouse query oom-events' lists them",
    )


#: The parameters that name one device memory snapshot, as the snapshot_keys view lists
#: its keys (live-memory, live-by-source, device-budget: `snapshot`; live-growth: the two).
SNAPSHOT_PARAMS = ("snapshot", "before", "after")


def require_snapshot(con: duckdb.DuckDBPyConnection, key: str) -> str:
    """The key that selects the snapshot `key` names: itself, or the absolute path of a
    file it names relative to here (ingest stores absolute paths). Raise
    UnknownSnapshotError, with the nearest file names, when it selects none: a typo
    would otherwise be an empty result, as for a module."""
    candidates = [key]
    if os.path.isfile(key):
        candidates.append(os.path.abspath(key))
    for candidate in candidates:
        if con.execute(
            "SELECT count(*) FROM snapshot_keys WHERE key = $key", {"key": candidate}
        ).fetchall()[0][0]:
            return candidate
    paths = [p for (p,) in con.execute("SELECT path FROM runtime_snapshots").fetchall()]
    names = sorted({p.rpartition("/")[2] for p in paths})
    close = difflib.get_close_matches(key.rpartition("/")[2], names, n=5, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise UnknownSnapshotError(
        key,
        f"no snapshot matches {key!r} (a snapshot_id, 12-digit hash prefix, path or file "
        f"name; the warehouse holds {len(paths)}: 'bufferhouse query live-memory' lists "
        f"them){hint}",
    )


#: Every label the warehouse holds, as a `label` parameter spells it: the queries filter
#: modules, OOM events or snapshots by it, and one ingest's --label marks all three.
_LABELS_SQL = """
SELECT key || '=' || value FROM labels
UNION SELECT key || '=' || value FROM oom_labels
UNION SELECT key || '=' || value FROM runtime_labels
"""


def require_label(con: duckdb.DuckDBPyConnection, label: str) -> None:
    """Raise UnknownLabelError, with the nearest labels held, when nothing carries
    `label`: a typo (or `jax:0.7` for `jax=0.7`) would otherwise be an empty result."""
    held = sorted(r[0] for r in con.execute(_LABELS_SQL).fetchall())
    if label in held:
        return
    close = difflib.get_close_matches(label, held, n=5, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    form = "" if "=" in label else " (a label is key=value)"
    raise UnknownLabelError(
        label,
        f"nothing in the warehouse is labelled {label!r}{form}; it holds {len(held)} "
        f"label{'' if len(held) == 1 else 's'} (`bufferhouse ingest --label key=value`){hint}",
    )


#: What tells apart modules that one key selects (a name compiled more than once):
#: the facts a person recognises, not the content hash alone.
_MATCH_FACTS = ("labels", "path", "stage", "backend", "format", "bufferhouse", "heap peak")
_MATCHES_SQL = f"""
SELECT
  m.module_id,
  substr(m.content_hash, 1, 12),
  (
    SELECT string_agg(l.key || '=' || l.value, ',' ORDER BY l.key, l.value)
    FROM labels AS l
    WHERE l.module_id = m.module_id
  ),
  m.paths[1],
  m.stage,
  m.backend,
  m.format_era,
  r.tool_version,
  m.heap_peak_bytes
FROM modules AS m
LEFT JOIN runs AS r
  ON r.run_id = m.run_id
WHERE {MODULE_SELECTOR}
ORDER BY m.run_id DESC NULLS LAST, m.module_number DESC NULLS LAST, m.module_id
"""


@dataclass(frozen=True)
class ModuleMatch:
    """One of the modules a key selects, with the facts that tell it from the others."""

    module_id: int
    hash_prefix: str
    facts: dict[str, str]


def module_matches(con: duckdb.DuckDBPyConnection, key: str) -> list[ModuleMatch]:
    """Every module `key` selects, most recently ingested first."""
    out = []
    for module_id, prefix, *values in con.execute(_MATCHES_SQL, {"module": key}).fetchall():
        values[-1] = None if values[-1] is None else f"{values[-1]:,} B"
        facts = {k: "" if v is None else str(v) for k, v in zip(_MATCH_FACTS, values)}
        out.append(ModuleMatch(module_id, prefix, facts))
    return out


def describe_matches(matches: list[ModuleMatch]) -> list[str]:
    """One line per module, naming only the facts that differ between them (labels,
    path, stage, version ...): identical stems tell a reader nothing."""
    differ = [f for f in _MATCH_FACTS if len({m.facts[f] for m in matches}) > 1]
    lines = []
    for m in matches:
        shown = "; ".join(f"{f} {m.facts[f] or '(none)'}" for f in differ)
        lines.append(f"{m.hash_prefix}: {shown or 'same labels, path and version; other content'}")
    return lines
