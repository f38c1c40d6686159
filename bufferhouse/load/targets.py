"""After an ingest: each new module's target and capacity (parse/target.py) into
module_targets.

A step of its own after the modules are parsed, so the parse of a module stays
what its dump files hold: the target is read from the files beside them (found from
modules.paths), once per module (a module that has its row is not read again). The
warehouse (record_targets), a Parquet dataset and Spark (target_rows, on the rows of
the modules they write) share the rule.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

from bufferhouse.load.file_stats import RACY_NS
from bufferhouse.parse.target import Listings, read_target

#: module_targets' columns, in table order.
COLUMNS = (
    "module_id",
    "platform",
    "device_kind",
    "chips",
    "capacity_bytes",
    "capacity_source",
    "files",
)


def target_rows(modules: Iterable[tuple[int, list[str] | None]]) -> list[dict]:
    """module_targets rows of the modules given as (module_id, paths): one for each whose
    dump directory holds a file naming its target, none for the others."""
    rows = []
    listings = Listings()  # each directory listed once, however many modules it holds
    for module_id, paths in modules:
        for path in paths or []:
            if not os.path.exists(path):
                continue
            target = read_target(os.path.dirname(path), os.path.basename(path), listings)
            if target is not None:
                values = (
                    module_id,
                    target.platform,
                    target.device_kind,
                    target.chips,
                    target.capacity_bytes,
                    target.capacity_source,
                    list(target.files),
                )
                rows.append(dict(zip(COLUMNS, values)))
                break
    return rows


def record_targets(con) -> int:
    """Rows added to module_targets for the modules that have none; returns how many.

    A module found without a target is recorded so (file_stats.targets_looked_ns: the
    newest mtime of its directories), and not looked for again while its directories
    show that mtime: a no-op re-ingest lists no directory. A file added beside the dump
    later (a target config, topology, compile options) changes its directory's mtime,
    and the next ingest looks again."""
    missing = con.execute(
        "SELECT m.module_id, m.content_hash, m.paths,"
        " (SELECT max(f.targets_looked_ns) FROM file_stats AS f"
        "  WHERE f.content_hash = m.content_hash) AS looked"
        " FROM modules AS m"
        " WHERE m.module_id NOT IN (SELECT module_id FROM module_targets)"
    ).fetchall()
    to_look, marks = [], {}
    for module_id, content_hash, paths, looked in missing:
        mark = _directories_mtime(paths)
        if mark is not None and mark == looked:
            continue  # looked at these directories as they are: no target beside it
        to_look.append((module_id, paths))
        marks[module_id] = (content_hash, mark)
    rows = target_rows(to_look)
    if rows:
        con.executemany(
            "INSERT INTO module_targets VALUES (?, ?, ?, ?, ?, ?, ?)",
            [tuple(r[c] for c in COLUMNS) for r in rows],
        )
    found = {r["module_id"] for r in rows}
    none = [(mark, h) for m, (h, mark) in marks.items() if m not in found and mark is not None]
    if none:
        con.executemany("UPDATE file_stats SET targets_looked_ns = ? WHERE content_hash = ?", none)
    return len(rows)


def _directories_mtime(paths: list[str] | None) -> int | None:
    """The newest mtime (ns) of the directories of a module's files; None if one of them
    cannot be read."""
    try:
        newest = max(os.stat(os.path.dirname(p)).st_mtime_ns for p in paths or [])
    except (OSError, ValueError):
        return None
    # A directory changed within RACY_NS may change again within the same mtime: not
    # recorded (looked at again next time), as file_stats does not record such a file.
    return newest if newest <= time.time_ns() - RACY_NS else None
