"""The data behind the pictures: plain records gathered from the canned queries.

Nothing here draws, so the series a chart shows can be tested against the
queries without looking at pixels, and used without matplotlib.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import duckdb
import numpy as np

from bufferhouse import queries
from bufferhouse.errors import PlotError, UnknownModuleError
from bufferhouse.render import human_bytes
from bufferhouse.schema.warehouse import connect_sealed

#: Exclusive allocation kinds that hold memory for the whole program (bottom of the stack).
INDEFINITE_CATEGORIES = ("parameter", "output", "constant", "thread-local")
#: Every layer of a heap timeline, bottom to top.
LAYERS = (*INDEFINITE_CATEGORIES, "temp")


def open_warehouse(db: str | os.PathLike[str] | None = None) -> duckdb.DuckDBPyConnection:
    """A read-only connection with this release's views (what the gatherers expect),
    sealed like `sql`'s: the report and the plots read the warehouse and nothing else."""
    con = connect_sealed(db)
    queries.use_package_views(con)
    return con


def _rows(con: duckdb.DuckDBPyConnection, name: str, **params: object) -> list[dict]:
    return queries.run(con, name, params).to_pylist()


@dataclass(frozen=True)
class ModuleRef:
    """One module, with the selectors a user can type to get it back."""

    module_id: int
    module_name: str
    file_stem: str | None
    hash_prefix: str
    backend: str | None
    labels: str | None
    heap_peak_bytes: int | None
    logical_peak_bytes: int | None
    total_bytes: int | None

    def describe(self) -> str:
        peak = human_bytes(self.heap_peak_bytes) if self.heap_peak_bytes is not None else "n/a"
        extra = f", labels {self.labels}" if self.labels else ""
        return f"{self.hash_prefix} ({self.file_stem}, heap peak {peak}{extra})"


@dataclass(frozen=True)
class ModuleChoice:
    """The module a key selects, and the others it also matched (an ambiguous name)."""

    key: str
    chosen: ModuleRef
    others: tuple[ModuleRef, ...] = ()

    def note(self) -> str | None:
        """A sentence for stderr when the key was ambiguous, else None."""
        if not self.others:
            return None
        shown = "; ".join(o.describe() for o in self.others[:9])
        more = f"; and {len(self.others) - 9} more" if len(self.others) > 9 else ""
        return (
            f"{self.key!r} matches {len(self.others) + 1} modules; using the most recently "
            f"ingested (then highest module number, then largest heap peak): "
            f"{self.chosen.describe()}. Pass a hash prefix to pick another: {shown}{more}"
        )


_MODULE_SQL = """
SELECT
  m.module_id,
  m.module_name,
  m.file_stem,
  substr(m.content_hash, 1, 12) AS hash_prefix,
  m.backend,
  (
    SELECT string_agg(l.key || '=' || l.value, ',' ORDER BY l.key, l.value)
    FROM labels AS l
    WHERE l.module_id = m.module_id
  ) AS labels,
  m.heap_peak_bytes,
  m.logical_peak_bytes,
  m.total_bytes
FROM modules AS m
WHERE {where}
ORDER BY m.run_id DESC NULLS LAST, m.module_number DESC NULLS LAST,
  m.heap_peak_bytes DESC NULLS LAST, m.module_id
"""


def module_refs(con: duckdb.DuckDBPyConnection, module_ids: list[int]) -> dict[int, ModuleRef]:
    """ModuleRef of each module id (missing ids are left out)."""
    if not module_ids:
        return {}
    sql = _MODULE_SQL.format(where="m.module_id IN (SELECT unnest($ids))")
    rows = con.execute(sql, {"ids": list(module_ids)}).fetchall()
    return {r[0]: ModuleRef(*r) for r in rows}


def resolve_module(con: duckdb.DuckDBPyConnection, key: str | int) -> ModuleChoice:
    """The module that `key` selects, as the queries' `module` parameter reads it
    (name, file stem, module_id or 12-digit hash prefix).

    A name compiled more than once matches several modules; a picture shows one,
    so the most recently ingested wins (then the highest module number, then the
    largest heap peak) and the choice says which others matched.
    """
    queries.use_package_views(con)
    text = str(key)
    sql = _MODULE_SQL.format(
        where="bh_is_module($key, m.module_name, m.file_stem, m.module_id, m.content_hash)"
    )
    refs = [ModuleRef(*r) for r in con.execute(sql, {"key": text}).fetchall()]
    if not refs:
        hint = ""
        like = con.execute(
            "SELECT DISTINCT module_name FROM modules "
            "WHERE module_name ILIKE '%' || $key || '%' ORDER BY 1 LIMIT 5",
            {"key": text},
        ).fetchall()
        if like:
            hint = "; did you mean " + ", ".join(r[0] for r in like) + "?"
        raise UnknownModuleError(
            text,
            f"no module matches {text!r} (a module name, file stem, module_id or "
            f"12-digit hash prefix){hint}",
        )
    return ModuleChoice(text, refs[0], tuple(refs[1:]))


def space_name(con: duckdb.DuckDBPyConnection, module_id: int, space: int) -> str:
    """The memory space's name for the module's backend (color_N when unknown)."""
    for row in _rows(con, "memory-spaces", module=str(module_id)):
        if row["scope"] == "module" and row["color"] == space:
            return row["space_name"]
    return f"color_{space}"


def indefinite_by_category(
    con: duckdb.DuckDBPyConnection, module_ids: list[int], space: int = 0
) -> dict[int, dict[str, int]]:
    """Per module: bytes of the space's allocations in each exclusive indefinite
    category (XProf's order: parameter, output, thread-local, constant). They add
    up to heap_peaks.indefinite_bytes."""
    out: dict[int, dict[str, int]] = {
        m: dict.fromkeys(INDEFINITE_CATEGORIES, 0) for m in module_ids
    }
    if not module_ids:
        return out
    rows = con.execute(
        """
        SELECT module_id, category, CAST(sum(size) AS BIGINT)
        FROM allocations
        WHERE module_id IN (SELECT unnest($ids)) AND color = $space AND category <> 'temp'
        GROUP BY module_id, category
        """,
        {"ids": list(module_ids), "space": space},
    ).fetchall()
    for module_id, category, size in rows:
        out[module_id][category] = size
    return out


def static_by_category(con: duckdb.DuckDBPyConnection, module_id: int) -> dict[str, int]:
    """The bytes XLA holds besides a heap-simulator trace, by exclusive category: the
    largest value of each parameter, constant and output allocation, thread-local ones
    left out, every space (ComputePeakMemorySizes). They add up to heap-timeline's
    indefinite_bytes for a module drawn from its trace (one trace per module)."""
    out = dict.fromkeys(INDEFINITE_CATEGORIES, 0)
    rows = con.execute(
        """
        SELECT category, CAST(sum(largest) AS BIGINT)
        FROM (
          SELECT al.category, max(a.size) AS largest
          FROM assignments AS a
          JOIN allocations AS al
            ON al.module_id = a.module_id AND al.allocation_index = a.allocation_index
          WHERE a.module_id = $id AND al.module_id = $id AND NOT al.is_thread_local
            AND (al.is_parameter OR al.is_constant OR al.is_maybe_live_out)
          GROUP BY al.category, al.allocation_index
        )
        GROUP BY category
        """,
        {"id": module_id},
    ).fetchall()
    for category, size in rows:
        out[category] = size
    return out


@dataclass(frozen=True)
class Envelope:
    """A long series reduced to what a screen can show: its steps cut into
    consecutive buckets (about one per pixel column), each with the least and
    the most the series holds in it.

    Every value lies within its bucket's [low, high], and both are attained
    there, so a chart of the envelope covers exactly the pixels the full series
    would. The kept step (a timeline's peak) is a bucket of its own: its time
    and value stay exact.
    """

    edges: list[int]  # bucket i covers steps [edges[i], edges[i + 1])
    low: list[int]
    high: list[int]

    def bucket_of(self, step: int) -> int:
        """The index of the bucket holding `step`."""
        return int(np.searchsorted(self.edges, step, side="right")) - 1


def envelope(
    steps: Sequence[int], values: Sequence[int], columns: int, keep: int | None = None
) -> Envelope:
    """The min/max envelope of `values` (one per step of `steps`, consecutive
    integers as heap-timeline returns them) in at most `columns` buckets;
    `keep` is the index of a step to keep as a bucket of its own (the peak).

    A series no longer than `columns` comes back step by step.
    """
    n = len(values)
    if n == 0:
        return Envelope([], [], [])
    if columns < 3:
        raise ValueError(f"an envelope needs at least 3 columns, got {columns}")
    if n <= columns:
        cuts = np.arange(n + 1)
    elif keep is None:
        cuts = np.unique(np.linspace(0, n, columns + 1).round().astype(np.int64))
    else:
        if not 0 <= keep < n:
            raise ValueError(f"keep {keep} is outside the series (0 .. {n - 1})")
        rest = columns - 1  # buckets for the steps before and after the kept one
        if 0 < keep < n - 1:
            before = min(max(round(rest * keep / (n - 1)), 1), rest - 1)
        else:
            before = rest if keep else 0
        parts = [np.linspace(0, keep, before + 1), [keep, keep + 1]]
        parts.append(np.linspace(keep + 1, n, rest - before + 1))
        cuts = np.unique(np.concatenate(parts).round().astype(np.int64))
    series = np.asarray(values, dtype=np.int64)
    starts = cuts[:-1]
    first = np.asarray(steps, dtype=np.int64)[starts]
    return Envelope(
        edges=[*first.tolist(), int(steps[-1]) + 1],
        low=np.minimum.reduceat(series, starts).tolist(),
        high=np.maximum.reduceat(series, starts).tolist(),
    )


@dataclass
class Timeline:
    """Live bytes of one module and memory space over time: program-order steps
    swept from live ranges, or the events of the heap-simulator trace (`source`,
    heap-timeline's: 'live_ranges' or 'trace').

    Step t is drawn over [t, t+1). The layers are the series a chart stacks:
    each indefinite category is constant, temp varies; they add up to
    heap-timeline's live_bytes at every step.
    """

    module: ModuleRef
    space: int
    space_name: str
    steps: list[int]
    instructions: list[str | None]
    temp_bytes: list[int]
    live_bytes: list[int]
    indefinite: dict[str, int]
    peak_time: int | None
    peak_bytes: int | None
    peak_buffers: list[dict] = field(default_factory=list)
    source: str = "live_ranges"

    @property
    def from_trace(self) -> bool:
        return self.source == "trace"

    def layers(self) -> dict[str, list[int]]:
        """Category -> bytes at every step, bottom to top (zero categories left out)."""
        n = len(self.steps)
        out = {c: [b] * n for c, b in self.indefinite.items() if b}
        out["temp"] = list(self.temp_bytes)
        return out

    def envelope(self, columns: int) -> Envelope:
        """temp_bytes reduced to at most `columns` buckets, the peak step kept exact
        (the only layer that varies: the indefinite ones are constant)."""
        keep = None if self.peak_time is None else self.steps.index(self.peak_time)
        return envelope(self.steps, self.temp_bytes, columns, keep)

    @property
    def peak_instruction(self) -> str | None:
        if self.peak_time is None:
            return None
        return self.instructions[self.steps.index(self.peak_time)]


def timeline(
    con: duckdb.DuckDBPyConnection, module: ModuleRef, space: int = 0, top: int = 5
) -> Timeline:
    """Gather the heap timeline of `module` in memory space `space`, with its
    `top` largest peak buffers (queries heap-timeline and peak-buffers): from the
    heap-simulator trace when the module has one in the space, else its live ranges."""
    key = str(module.module_id)
    rows = _rows(con, "heap-timeline", module=key, space=space)
    if not rows:
        raise PlotError(_no_timeline_reason(con, module, space))
    source = rows[0]["source"]
    if source == "trace":
        indefinite = static_by_category(con, module.module_id)
    else:
        indefinite = indefinite_by_category(con, [module.module_id], space)[module.module_id]
    peaks = [r for r in rows if r["is_peak"]]
    return Timeline(
        module=module,
        space=space,
        space_name=space_name(con, module.module_id, space),
        steps=[r["time"] for r in rows],
        instructions=[r["instruction"] for r in rows],
        temp_bytes=[r["temp_bytes"] for r in rows],
        live_bytes=[r["live_bytes"] for r in rows],
        indefinite=indefinite,
        peak_time=peaks[0]["time"] if peaks else None,
        peak_bytes=peaks[0]["live_bytes"] if peaks else None,
        peak_buffers=_rows(con, "peak-buffers", module=key, space=space, top=top) if top else [],
        source=source,
    )


def _no_timeline_reason(con: duckdb.DuckDBPyConnection, module: ModuleRef, space: int) -> str:
    schedule, sections, spaces = con.execute(
        """
        SELECT m.schedule_length, m.sections, list(DISTINCT a.color ORDER BY a.color)
        FROM modules AS m
        LEFT JOIN allocations AS a
          ON a.module_id = m.module_id
        WHERE m.module_id = $id
        GROUP BY m.schedule_length, m.sections
        """,
        {"id": module.module_id},
    ).fetchall()[0]  # fetchone() leaves the result open: DuckDB 2 then refuses the next query
    name = f"{module.module_name} ({module.hash_prefix})"
    if schedule is None:
        return (
            f"{name} has neither a heap-simulator trace in memory space {space} nor live"
            " ranges (no HloLiveRange section), so no timeline"
        )
    if "proto" in sections and "live_range" not in sections:
        return (
            f"{name} was read from a proto without a heap-simulator trace in memory space"
            f" {space}, and a proto carries no live ranges, so no timeline"
        )
    shown = ", ".join(str(s) for s in spaces if s is not None) or "none"
    return f"{name} has no allocations in memory space {space}; its spaces: {shown}"


@dataclass
class Arena:
    """One allocation's values as blocks: bytes [offset, offset+size) live over
    steps [start_time, end_time] (the arena query's rows)."""

    module: ModuleRef
    allocation_index: int
    color: int
    size: int
    category: str
    max_live_bytes: int | None
    schedule_length: int | None
    blocks: list[dict]

    @property
    def waste_bytes(self) -> int | None:
        return None if self.max_live_bytes is None else self.size - self.max_live_bytes


def arena(
    con: duckdb.DuckDBPyConnection, module: ModuleRef, allocation: int | None = None
) -> Arena:
    """Gather one allocation of `module` (default: its largest temp allocation)."""
    blocks = _rows(con, "arena", module=str(module.module_id), allocation=allocation)
    name = f"{module.module_name} ({module.hash_prefix})"
    if not blocks:
        listing = con.execute(
            """
            SELECT allocation_index, category, size
            FROM allocations
            WHERE module_id = $id
            ORDER BY is_preallocated_temp DESC, size DESC, allocation_index
            LIMIT 10
            """,
            {"id": module.module_id},
        ).fetchall()
        shown = ", ".join(f"{i} ({c}, {human_bytes(s)})" for i, c, s in listing) or "none"
        if allocation is None:
            raise PlotError(f"{name} has no temp allocation holding values; allocations: {shown}")
        raise PlotError(
            f"{name} has no allocation {allocation} holding values; allocations: {shown}"
        )
    index = blocks[0]["allocation_index"]
    category, max_live, schedule = con.execute(
        """
        SELECT a.category, a.max_live_bytes, m.schedule_length
        FROM allocations AS a
        JOIN modules AS m
          ON m.module_id = a.module_id
        WHERE a.module_id = $id AND a.allocation_index = $index
        """,
        {"id": module.module_id, "index": index},
    ).fetchall()[0]
    return Arena(
        module=module,
        allocation_index=index,
        color=blocks[0]["color"],
        size=blocks[0]["allocation_size"],
        category=category,
        max_live_bytes=max_live,
        schedule_length=schedule,
        blocks=blocks,
    )
