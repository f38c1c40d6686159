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
from collections.abc import Iterable

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
    """Rows added to module_targets for the modules that have none; returns how many."""
    missing = con.execute(
        "SELECT module_id, paths FROM modules"
        " WHERE module_id NOT IN (SELECT module_id FROM module_targets)"
    ).fetchall()
    rows = target_rows(missing)
    if rows:
        con.executemany(
            "INSERT INTO module_targets VALUES (?, ?, ?, ?, ?, ?, ?)",
            [tuple(r[c] for c in COLUMNS) for r in rows],
        )
    return len(rows)
