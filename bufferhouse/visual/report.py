"""One self-contained HTML file about the warehouse: a fleet overview, then a
section per top module; with a baseline, the biggest changes first.

Self-contained means it opens from disk with no server and fetches nothing:
charts are matplotlib SVGs inlined in the page, the sorting script is inline,
and a Content-Security-Policy forbids every request (`default-src 'none'`), so
a browser refuses a fetch even if one crept in.

Three parts: `visual.gather` collects the data from the canned queries,
`visual.page` builds the HTML (its CSS and JS are the package data files
`visual/assets/report.css` and `report.js`), and this module writes the file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from bufferhouse.schema.warehouse import database_path
from bufferhouse.visual import plots
from bufferhouse.visual.data import open_warehouse
from bufferhouse.visual.gather import ModuleSection, ReportData, gather
from bufferhouse.visual.page import render


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
    wait: float = 0.0,
) -> Written:
    """Write one self-contained HTML report of the warehouse to `output`.

    `label` (`key=value`) limits the report to one run; `baseline` (a label,
    another warehouse file or a dump tree) adds the biggest heap-peak changes
    from it to this run, first. `wait`: seconds to wait for a writer to let go of `db`.

    >>> visual.write_report("report.html", db="fleet.duckdb", label="run=nightly",
    ...                     baseline="run=previous")
    """
    plots.require_matplotlib()  # fail before any work when the extra is missing
    plots.require_directory(output)
    path = database_path(db)
    with open_warehouse(db, wait=wait) as con:
        data = gather(
            con, path, label=label, baseline=baseline, top=top, sections=sections, rows=rows
        )
    text = render(data)
    target = plots.write_output(output, lambda t: t.write_text(text, encoding="utf-8"))
    return Written(data, target, len(text.encode()))


__all__ = ["ModuleSection", "ReportData", "Written", "gather", "render", "write_report"]
