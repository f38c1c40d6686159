"""After an ingest: each new module's target and capacity (parse/target.py) into
module_targets.

A step of its own after the modules are written, so the parse of a module stays
what its dump files hold: the target is read from the files beside them (found from
modules.paths), once per module (a module that has its row is not read again).
"""

from __future__ import annotations

import os

from bufferhouse.parse.target import Listings, read_target


def record_targets(con) -> int:
    """Rows added to module_targets for the modules that have none; returns how many."""
    missing = con.execute(
        "SELECT module_id, paths FROM modules"
        " WHERE module_id NOT IN (SELECT module_id FROM module_targets)"
    ).fetchall()
    rows = []
    listings = Listings()  # each directory listed once, however many modules it holds
    for module_id, paths in missing:
        for path in paths or []:
            if not os.path.exists(path):
                continue
            target = read_target(os.path.dirname(path), os.path.basename(path), listings)
            if target is not None:
                rows.append(
                    (
                        module_id,
                        target.platform,
                        target.device_kind,
                        target.chips,
                        target.capacity_bytes,
                        target.capacity_source,
                        list(target.files),
                    )
                )
                break
    if rows:
        con.executemany("INSERT INTO module_targets VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    return len(rows)
