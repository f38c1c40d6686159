"""Why a module's memory changed: its change attributed to causes, exactly.

Each measure (total bytes, and the chosen peak) of a side is the sum of the
sizes of its *member* values plus a residual:

- total_bytes: per allocation, its largest value; per temp allocation, the
  values live at the heap peak (diff-values' total_member);
- heap_peak_bytes: the `peak-buffers` rows (the trace's peak where the module
  has one, else the live ranges');
- logical_peak_bytes: the printed peak list (diff-logical).

The values of the two sides are paired (diff-matched) and every member lands
in one row, so the rows plus the residual row sum to the change by
construction. docs/diff.md states the rule; diff-causes.sql applies it.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from bufferhouse import queries
from bufferhouse.compare import statements
from bufferhouse.compare.gate import PEAKS, signed
from bufferhouse.compare.sides import ALL_ROWS, Opened

#: Every cause a row can name, in the order docs/diff.md explains them.
CAUSES = (
    "sharding",
    "shape",
    "dtype",
    "layout",
    "new-buffer",
    "gone-buffer",
    "longer-live",
    "shorter-live",
    "aliasing-lost",
    "aliasing-gained",
    "memory-space",
    "remat",
    "fusion",
    "fragmentation",
    "other",
    "no-peak",
)
#: Above this many modules on a side (and an eighth of its warehouse), read the peak
#: buffers in one fleet-wide run.
_PER_MODULE = 4
_MEMBERS = pa.schema(
    [
        ("module_id", pa.int64()),
        ("measure", pa.string()),
        ("value_id", pa.int64()),
        ("size", pa.int64()),
    ]
)


def measures(peak: str) -> list[str]:
    """The figures explained: total bytes, and the chosen peak unless that is total bytes."""
    chosen = PEAKS[peak]
    return ["total_bytes"] if chosen == "total_bytes" else ["total_bytes", chosen]


@dataclass(frozen=True)
class _Side:
    """One side's values and members, as the scratch connection reads them."""

    ids: list[int]
    values: pa.Table
    members: pa.Table


def _ids(pairs: pa.Table, column: str) -> list[int]:
    both = pc.and_(
        pc.is_valid(pairs.column("base_module_id")), pc.is_valid(pairs.column("head_module_id"))
    )
    return pairs.filter(both).column(column).to_pylist()


def _heap_members(con: duckdb.DuckDBPyConnection, ids: list[int]) -> list[pa.Table]:
    """The `peak-buffers` rows of each module: module by module, or, when they
    are many and a good part of the warehouse, one fleet-wide run filtered (on
    a small warehouse that costs about what one module's run does)."""
    if len(ids) > _PER_MODULE:
        ((everyone,),) = con.execute("SELECT count(*) FROM modules").fetchall()
        if len(ids) * 8 >= everyone:
            rows = queries.run(con, "peak-buffers", {"top": ALL_ROWS})
            wanted = pc.is_in(rows.column("module_id"), value_set=pa.array(ids, pa.int64()))
            return [_member_rows(rows.filter(wanted), "heap_peak_bytes")]
    parts = []
    for module_id in ids:
        rows = queries.run(con, "peak-buffers", {"module": str(module_id), "top": ALL_ROWS})
        rows = rows.filter(pc.equal(rows.column("module_id"), module_id))
        parts.append(_member_rows(rows, "heap_peak_bytes"))
    return parts


def _member_rows(rows: pa.Table, measure: str) -> pa.Table:
    n = rows.num_rows
    return pa.table(
        [
            rows.column("module_id").cast(pa.int64()),
            pa.array([measure] * n, pa.string()),
            rows.column("value_id").cast(pa.int64()),
            rows.column("size").cast(pa.int64()),
        ],
        schema=_MEMBERS,
    )


def _side(con: duckdb.DuckDBPyConnection, ids: list[int], wanted: list[str]) -> _Side:
    values = statements.run(con, "values", ids=ids)
    total = values.filter(pc.fill_null(values.column("total_member"), False))
    parts = [_member_rows(total, "total_bytes")]
    if "heap_peak_bytes" in wanted:
        parts += _heap_members(con, ids)
    if "logical_peak_bytes" in wanted:
        parts.append(_member_rows(statements.run(con, "logical", ids=ids), "logical_peak_bytes"))
    return _Side(ids, values, pa.concat_tables(parts))


def causes(
    scratch: duckdb.DuckDBPyConnection, b: Opened, h: Opened, pairs: pa.Table, peak: str
) -> pa.Table:
    """The diff-causes rows of every matched pair, with a sentence each.

    `scratch` already has `pairs`, `base_modules` and `head_modules` registered.
    """
    wanted = measures(peak)
    base = _side(b.con, _ids(pairs, "base_module_id"), wanted)
    head = _side(h.con, _ids(pairs, "head_module_id"), wanted)
    scratch.register("base_shardings", statements.run(b.con, "shardings", ids=base.ids))
    scratch.register("head_shardings", statements.run(h.con, "shardings", ids=head.ids))
    scratch.register("base_values", base.values)
    scratch.register("head_values", head.values)
    scratch.register("base_members", base.members)
    scratch.register("head_members", head.members)
    scratch.register("matched", statements.run(scratch, "matched"))
    rows = statements.run(scratch, "causes", measures=wanted)
    sentences = [sentence(r) for r in rows.to_pylist()]
    return rows.append_column("sentence", pa.array(sentences, pa.string()))


def _what(r: dict) -> str:
    name = r["op_name"] or r["head_instruction"] or r["base_instruction"] or "?"
    where = f" ({r['source']})" if r["source"] else ""
    many = f"{r['buffers']} values of " if r["buffers"] > 1 else ""
    return f"{many}{name}{where}"


def sentence(r: dict) -> str:
    """One short human sentence for a diff-causes row."""
    cause, what, by = r["cause"], _what(r), signed(r["bytes"])
    shapes = f"{r['base_shape']} -> {r['head_shape']}"
    text = {
        "sharding": f"{what} is split another way across devices, its per-device shape {shapes} ({r['sharding_change']})",
        "shape": f"{what} changed shape, {shapes}",
        "dtype": f"{what} changed element type, {shapes}",
        "layout": f"{what} has the same shape and type but another padded size",
        "new-buffer": f"{what} ({r['head_shape']}) exists on the head only",
        "gone-buffer": f"{what} ({r['base_shape']}) exists on the base only",
        "longer-live": f"{what} is now counted at the peak (live there, or one more copy)",
        "shorter-live": f"{what} is no longer counted at the peak (not live there, or one copy fewer)",
        "aliasing-lost": f"{what} no longer shares its allocation (a donation or in-place update lost), so it takes one of its own",
        "aliasing-gained": f"{what} now shares an allocation (donated or updated in place), so its own is gone",
        "memory-space": f"{what} is held in another memory space on one side (not counted in this one)",
        "remat": f"{what} is saved for the backward pass on one side and recomputed on the other (the ops under rematted_computation/ differ)",
        "fusion": f"{what} is split into or merged from buffers of other shapes",
        "fragmentation": "the allocations changed by more than the values counted in them (packing, alignment)",
        "other": "peak-list entries not resolved to a value",
    }.get(cause)
    if cause == "aliasing-lost" and r["head_shape"] is None:
        return f"{what}, the copy kept of a parameter while it was donated, is gone with the donation: {by}."
    if cause == "aliasing-gained" and r["base_shape"] is None:
        return f"{what} is the copy kept of a parameter now donated (read after its update overwrites it): {by}."
    if cause == "no-peak":
        missing = [
            s for s, v in (("base", r["base_bytes"]), ("head", r["head_bytes"])) if v is None
        ]
        return f"no {r['measure']} on the {' and '.join(missing)} side: the change cannot be attributed"
    return f"{text}: {by}."


__all__ = ["CAUSES", "causes", "measures", "sentence"]
