"""Diff two runs: what changed in memory, module by module.

A side of a diff is one of

- a label (`jax=0.7.2`, or several joined by commas: all must hold) selecting
  modules of the warehouse `db`;
- a warehouse file (every module in it);
- a dump tree or dump file, ingested into a temporary warehouse that is
  removed afterwards.

The parts: `sides` opens the two sides, `match` pairs their modules (by jit
name, then parameter signature, then instruction mix; see its docstring),
`gate` holds the CI threshold, `causes` says why each pair changed (every
byte of the change given a cause; docs/diff.md), `report` writes the text.
The comparison SQL is in `bufferhouse/compare/sql/*.sql` (documented like the
canned queries, read by the one loader `queries.sql_files`); values are
bound, never spliced.

Two device memory snapshots (pprof profiles, directories of them, or snapshots
of `db`) are compared by allocating line per device instead: `snapshots` (the
same `diff` call hands them there; `bufferhouse.diff_snapshots` goes directly).

`bufferhouse.diff` (the public API) calls `diff` here.
"""

from __future__ import annotations

import os
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from bufferhouse.compare import report, statements
from bufferhouse.compare.causes import CAUSES
from bufferhouse.compare.causes import causes as attribute
from bufferhouse.compare.gate import PEAK_TITLES, PEAKS, Gate, Threshold, parse_threshold
from bufferhouse.compare.match import (
    Features,
    ModuleRef,
    ambiguous,
    features,
    groups,
    match_modules,
    modules_of,
    pairs_table,
    select_pairs,
)
from bufferhouse.compare.sides import Side, open_side, peak_buffers
from bufferhouse.compare.snapshot_result import (
    SNAPSHOT_TABLES,
    SnapshotDiffResult,
    SnapshotGate,
    SnapshotSide,
)
from bufferhouse.compare.snapshots import (
    compare_snapshots,
    diff_snapshots,
    sides_kind,
)
from bufferhouse.compare.statements import diff_queries
from bufferhouse.errors import DiffError

#: The figures compared for every module pair, in report order.
METRICS = (
    "heap_peak_bytes",
    "logical_peak_bytes",
    "total_bytes",
    "parameter_bytes",
    "output_bytes",
    "alias_bytes",
    "constant_bytes",
    "thread_local_bytes",
    "temp_bytes",
)
#: Result tables by name (`DiffResult.table(name)`).
TABLES = ("modules", "changes", "buffers", "sources", "causes")


@dataclass(frozen=True)
class DiffResult:
    """Everything a diff found, as Arrow tables plus a summary.

    - `modules`: one row per module pair (or added/removed module) with the
      chosen peak, sorted by absolute delta;
    - `changes`: every figure (three peaks, six categories) of every pair;
    - `buffers`, `sources`: the drill-down (`module=`), else None;
    - `causes`: each matched pair's change in total bytes and the chosen peak
      attributed to causes (`causes=True`), else None; see docs/diff.md.

    Column meanings are in the headers of bufferhouse/compare/sql/*.sql.
    """

    base: Side
    head: Side
    peak: str
    module: str | None
    modules: pa.Table
    changes: pa.Table
    buffers: pa.Table | None
    sources: pa.Table | None
    gate: Gate | None
    causes: pa.Table | None = None

    @property
    def failed(self) -> bool:
        """The gate was set and some matched module grew past it."""
        return self.gate is not None and not self.gate.passed

    def table(self, name: str) -> pa.Table:
        """One result table by name: modules, changes, buffers or sources."""
        if name not in TABLES:
            raise DiffError(f"no diff table {name!r}; tables: {', '.join(TABLES)}")
        table = getattr(self, name)
        if table is None:
            if name == "causes":
                raise DiffError("the causes table comes with causes=True (--show causes)")
            raise DiffError(f"the {name} table comes with a drill-down: pass a module")
        return table

    def summary(self) -> dict[str, object]:
        """Counts by status, and the chosen peak summed over the matched modules."""
        status = self.modules.column("status").to_pylist()
        counts = Counter(status)
        matched = [r for r in self.modules.to_pylist() if r["status"] not in ("added", "removed")]
        base_sum = sum(r["base_bytes"] or 0 for r in matched)
        head_sum = sum(r["head_bytes"] or 0 for r in matched)
        return {
            "base": self.base.spec,
            "head": self.head.spec,
            "base_modules": self.base.modules,
            "head_modules": self.head.modules,
            "peak": self.peak,
            "matched": len(matched),
            **{k: counts.get(k, 0) for k in ("grown", "shrunk", "same", "unknown")},
            "added": counts.get("added", 0),
            "removed": counts.get("removed", 0),
            "base_bytes": base_sum,
            "head_bytes": head_sum,
            "delta_bytes": head_sum - base_sum,
            "gate": None if self.gate is None else ("passed" if self.gate.passed else "failed"),
        }

    def report(self, fmt: str = "markdown", top: int | None = 25) -> str:
        """A human report: `markdown` (fit for a pull-request comment) or `table` (terminal).

        Tables list the changed rows, largest absolute change first, at most
        `top` each (None for all); the result tables hold every row.
        """
        return report.render(self, fmt, top)


def diff(
    base: str | os.PathLike[str],
    head: str | os.PathLike[str],
    db: str | os.PathLike[str] | None = None,
    *,
    module: str | None = None,
    peak: str = "heap",
    fail_above: str | int | Threshold | None = None,
    jobs: int | None = None,
    causes: bool = False,
) -> DiffResult | SnapshotDiffResult:
    """Compare two runs module by module: which modules' memory changed, and why.

    `base` and `head` are each a label (`jax=0.6.2`, looked up in `db`), a
    warehouse file, or a dump tree (ingested into a temporary warehouse, with
    `jobs` parser processes). `module` (a name, file stem, module_id or hash
    prefix on either side) restricts the diff to that module's pairs and adds
    the drill-down into the buffers live at its heap peak. `fail_above`
    (`5%`, `10MiB`, bytes as int) sets the gate on the `peak` (heap, logical
    or total) of the matched modules. `causes` attributes each matched
    module's change in total bytes and in the peak to causes (`r.causes`).

    Two device memory snapshots (profile files, directories of profiles, or
    snapshots of `db` by id, hash prefix, path or file name) are compared by
    allocating line per device instead, with the gate on each device's live
    bytes: a SnapshotDiffResult, as `diff_snapshots` returns.

    >>> r = bufferhouse.diff("jax=0.6.2", "jax=0.7.2", db="fleet.duckdb", fail_above="5%")
    >>> r.modules, r.failed
    """
    if peak not in PEAKS:
        raise DiffError(f"peak must be one of {', '.join(PEAKS)}, got {peak!r}")
    if sides_kind(os.fspath(base), os.fspath(head), db) == "snapshots":
        given = [
            text
            for text, on in (
                (f"module={module!r}", module is not None),
                (f"peak={peak!r}", peak != "heap"),
                ("causes=True", causes),
            )
            if on
        ]
        if given:
            raise DiffError(
                f"{', '.join(given)}: for modules; {os.fspath(base)!r} and "
                f"{os.fspath(head)!r} are device memory snapshots"
            )
        return compare_snapshots(os.fspath(base), os.fspath(head), db, fail_above)
    threshold = parse_threshold(fail_above) if fail_above is not None else None
    with ExitStack() as stack:
        b = open_side(base, "base", db, stack, jobs)
        h = open_side(head, "head", db, stack, jobs)
        base_mods, head_mods = modules_of(b.modules), modules_of(h.modules)
        base_ids, head_ids = ambiguous(groups(base_mods, head_mods))
        pairs = match_modules(
            base_mods, head_mods, features(b.con, base_ids), features(h.con, head_ids)
        )
        if module is not None:
            pairs = select_pairs(pairs, module, b, h)
        table = pairs_table(pairs)
        scratch = stack.enter_context(duckdb.connect())
        scratch.register("pairs", table)
        scratch.register("base_modules", b.modules)
        scratch.register("head_modules", h.modules)
        changes = statements.run(scratch, "changes")
        buffers = sources = None
        if module is not None:
            scratch.register("base_buffers", peak_buffers(b.con, table, "base_module_id"))
            scratch.register("head_buffers", peak_buffers(h.con, table, "head_module_id"))
            buffers = statements.run(scratch, "buffers")
            sources = statements.run(scratch, "sources")
        why = attribute(scratch, b, h, table, peak) if causes else None
    modules = changes.filter(pc.equal(changes.column("metric"), PEAKS[peak])).drop_columns(
        ["metric"]
    )
    gate = None
    if threshold is not None:
        rows = modules.to_pylist()
        matched = [r["status"] not in ("added", "removed") for r in rows]
        over = [
            m and threshold.exceeded(r["base_bytes"], r["head_bytes"])
            for m, r in zip(matched, rows)
        ]
        blind = [
            m and (r["base_bytes"] is None or r["head_bytes"] is None)
            for m, r in zip(matched, rows)
        ]
        gate = Gate(
            peak,
            threshold,
            modules.filter(pa.array(over, pa.bool_())),
            modules.filter(pa.array(blind, pa.bool_())),
        )
    return DiffResult(b.side, h.side, peak, module, modules, changes, buffers, sources, gate, why)


__all__ = [
    "CAUSES",
    "METRICS",
    "PEAKS",
    "PEAK_TITLES",
    "SNAPSHOT_TABLES",
    "TABLES",
    "DiffResult",
    "Features",
    "Gate",
    "ModuleRef",
    "Side",
    "SnapshotDiffResult",
    "SnapshotGate",
    "SnapshotSide",
    "Threshold",
    "diff",
    "diff_queries",
    "diff_snapshots",
    "match_modules",
    "parse_threshold",
]
