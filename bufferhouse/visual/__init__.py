"""Pictures of the warehouse: heap timelines, arena maps and an HTML report.

Data gathering (`bufferhouse.visual.data`) is separate from drawing
(`plots`, `report`), so what a chart shows can be tested against the canned
queries. Drawing needs matplotlib: `pip install 'bufferhouse[plot]'`.

>>> from bufferhouse import visual
>>> visual.plot_timeline("jit_train_step", "timeline.png", db="fleet.duckdb")
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from bufferhouse.visual import data, plots
from bufferhouse.visual.data import (
    Arena,
    ModuleChoice,
    ModuleRef,
    Timeline,
    human_bytes,
    open_warehouse,
    resolve_module,
)
from bufferhouse.visual.report import write_report

__all__ = [
    "Arena",
    "ModuleChoice",
    "ModuleRef",
    "Plotted",
    "Timeline",
    "arena",
    "human_bytes",
    "open_warehouse",
    "plot_arena",
    "plot_timeline",
    "resolve_module",
    "timeline",
    "write_report",
]


@dataclass
class Plotted:
    """What a plot call drew: the module choice (with its ambiguity note), the data, the file."""

    choice: ModuleChoice
    data: Timeline | Arena
    path: Path


def timeline(
    module: str | int,
    *,
    db: str | os.PathLike[str] | None = None,
    space: int = 0,
    top: int = 5,
    wait: float = 0.0,
) -> tuple[ModuleChoice, Timeline]:
    """The heap timeline of the module `module` selects (see resolve_module)."""
    with open_warehouse(db, wait=wait) as con:
        choice = resolve_module(con, module)
        return choice, data.timeline(con, choice.chosen, space=space, top=top)


def arena(
    module: str | int,
    *,
    db: str | os.PathLike[str] | None = None,
    allocation: int | None = None,
    wait: float = 0.0,
) -> tuple[ModuleChoice, Arena]:
    """One allocation of the module `module` selects (default: its largest temp allocation)."""
    with open_warehouse(db, wait=wait) as con:
        choice = resolve_module(con, module)
        return choice, data.arena(con, choice.chosen, allocation)


def plot_timeline(
    module: str | int,
    output: str | os.PathLike[str],
    *,
    db: str | os.PathLike[str] | None = None,
    space: int = 0,
    top: int = 5,
    wait: float = 0.0,
) -> Plotted:
    """Draw live bytes over program order, stacked by category, peak marked, as PNG or SVG.

    >>> visual.plot_timeline("jit_train_step", "timeline.svg", db="fleet.duckdb", space=0)
    """
    plots.output_format(output)  # fail on a bad suffix or directory before any work
    plots.require_directory(output)
    choice, tl = timeline(module, db=db, space=space, top=top, wait=wait)
    return Plotted(choice, tl, plots.save(plots.draw_timeline(tl), output))


def plot_arena(
    module: str | int,
    output: str | os.PathLike[str],
    *,
    db: str | os.PathLike[str] | None = None,
    allocation: int | None = None,
    wait: float = 0.0,
) -> Plotted:
    """Draw one allocation's values as offset x live-range blocks, as PNG or SVG.

    >>> visual.plot_arena("jit_train_step", "arena.svg", db="fleet.duckdb", allocation=4)
    """
    plots.output_format(output)
    plots.require_directory(output)
    choice, ar = arena(module, db=db, allocation=allocation, wait=wait)
    return Plotted(choice, ar, plots.save(plots.draw_arena(ar), output))
