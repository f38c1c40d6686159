"""Diff two device memory snapshots (pprof profiles): which line of the program holds
more device memory now, device by device, with the gate of the module diff.

A snapshot side is one of

- a profile file (`jax.profiler.save_device_memory_profile`'s), read directly;
- a directory holding profiles (two directories pair their profiles by path
  inside the directory; a directory holding one profile is that profile);
- a snapshot of the warehouse `db`, named as the snapshot queries name one
  (snapshot_id, 12-digit hash prefix, path or file name: the snapshot_keys view).

`diff` (bufferhouse.diff) hands two snapshot sides here (`sides_kind` tells), and
`bufferhouse.diff_snapshots` calls `diff_snapshots` directly. The SQL is
compare/sql/snapshot-sources.sql (the rows by allocating line) and
snapshot-devices.sql (the device totals, summed from the samples on their own).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from bufferhouse import queries
from bufferhouse.compare import statements
from bufferhouse.compare.gate import Threshold, parse_threshold
from bufferhouse.compare.sides import is_duckdb_file
from bufferhouse.compare.snapshot_result import (
    SNAPSHOT_TABLES,
    SnapshotDiffResult,
    SnapshotGate,
    SnapshotSide,
)
from bufferhouse.errors import BufferhouseError, DiffError
from bufferhouse.parse.discover import discover, discover_profiles
from bufferhouse.parse.pprof import looks_like_profile, read_file, snapshot_tables
from bufferhouse.schema.warehouse import connect, default_db

#: The runtime_samples columns the comparison reads.
_SAMPLE_COLUMNS = (
    "kind",
    "device",
    "count",
    "bytes",
    "stack_id",
    "source_file",
    "source_line",
    "source_function",
)


@dataclass(frozen=True)
class SideKind:
    """What a side given as text is: `snapshot`, `module`, `either` (a directory holding
    profiles and dumps: what the other side is decides) or `unknown` (no path, no label,
    no snapshot of the warehouse). `what` says it in a message."""

    kind: str
    what: str


def side_kind(spec: str, db: str | os.PathLike[str] | None) -> SideKind:
    """What `spec` is as a side of a diff; see SideKind. Reads only file heads (and, for
    a name that is no path, the warehouse's snapshot keys)."""
    path = Path(spec)
    if path.is_file():
        if is_duckdb_file(path):
            return SideKind("module", "a warehouse")
        if looks_like_profile(spec, explicit=True):
            return SideKind("snapshot", "a device memory profile")
        return SideKind("module", "a dump file")
    if path.is_dir():
        if not discover_profiles([spec]):
            return SideKind("module", "a dump tree")
        if any(g.skip is None for g in discover([spec])):
            return SideKind("either", "a directory of dumps and device memory profiles")
        return SideKind("snapshot", "a directory of device memory profiles")
    if "=" in spec:
        return SideKind("module", "a label")
    if _snapshot_ids(spec, db):
        return SideKind("snapshot", "a snapshot of the warehouse")
    return SideKind("unknown", "no file, label or snapshot")


def sides_kind(base: str, head: str, db: str | os.PathLike[str] | None) -> str:
    """`snapshots` when the two sides are device memory snapshots, `modules` when they are
    modules (or a side is neither: the module diff says why). A module on one side and a
    snapshot on the other is a DiffError naming both; a name that selects no snapshot
    against a snapshot is UnknownSnapshotError, with the nearest names."""
    kinds = {"base": side_kind(base, db), "head": side_kind(head, db)}
    found = {k.kind for k in kinds.values()}
    if found == {"module", "snapshot"}:
        b, h = kinds["base"], kinds["head"]
        raise DiffError(
            f"base {base!r} is {b.what} and head {head!r} is {h.what}: a diff compares "
            "modules with modules, or device memory snapshots with snapshots"
        )
    if "snapshot" in found:
        for role, spec in (("base", base), ("head", head)):
            if kinds[role].kind == "unknown":
                _require_one(spec, role, db)  # raises: it selects no snapshot
        return "snapshots"
    if found == {"unknown"} and _has_snapshots(db):
        _require_one(base, "base", db)
    return "modules"


def _open(spec: str, role: str, db: str | os.PathLike[str] | None) -> tuple[SnapshotSide, dict]:
    """The side and its samples (runtime_samples columns) by snapshot name."""
    path = Path(spec)
    if path.is_file():
        return SnapshotSide(spec, "profile", (path.name,)), {path.name: _read(spec)}
    if path.is_dir():
        found = discover_profiles([spec])
        if not found:
            raise DiffError(f"{role} {spec!r}: no device memory profile found there")
        samples = {os.path.relpath(p.path, spec): _read(p.path) for p in found}
        return SnapshotSide(spec, "profiles", tuple(samples)), samples
    snapshot_id = _require_one(spec, role, db)
    with _warehouse(db) as con:
        table = queries.arrow_result(
            con.sql(
                f"SELECT {', '.join(_SAMPLE_COLUMNS)} FROM runtime_samples "
                "WHERE snapshot_id = $id ORDER BY sample_index",
                params={"id": snapshot_id},
            )
        )
    return SnapshotSide(spec, "snapshot", (spec,)), {spec: table}


def _read(path: str) -> pa.Table:
    """A profile's samples, read as ingest reads them (a damaged file: a located error)."""
    tables = snapshot_tables(read_file(path), path, os.path.abspath(path))
    return tables.samples.select(list(_SAMPLE_COLUMNS))


def _warehouse(db: str | os.PathLike[str] | None) -> duckdb.DuckDBPyConnection:
    con = connect(db, read_only=True)
    queries.use_package_views(con)
    return con


def _has_snapshots(db: str | os.PathLike[str] | None) -> bool:
    path = os.fspath(db) if db is not None else default_db()
    if not os.path.isfile(path):
        return False
    try:
        with _warehouse(path) as con:
            return bool(con.execute("SELECT count(*) FROM runtime_snapshots").fetchall()[0][0])
    except (BufferhouseError, duckdb.Error):
        return False


def _snapshot_ids(spec: str, db: str | os.PathLike[str] | None) -> list[int]:
    """The snapshots of the warehouse `spec` selects (none without a warehouse)."""
    if not _has_snapshots(db):
        return []
    with _warehouse(db) as con:
        return _ids_of(con, spec)


def _ids_of(con: duckdb.DuckDBPyConnection, key: str) -> list[int]:
    """The snapshots the snapshot_keys view lists under `key`."""
    rows = con.execute(
        "SELECT DISTINCT snapshot_id FROM snapshot_keys WHERE key = $key ORDER BY 1", {"key": key}
    ).fetchall()
    return [r[0] for r in rows]


def _require_one(spec: str, role: str, db: str | os.PathLike[str] | None) -> int:
    """The one snapshot of the warehouse `spec` selects: UnknownSnapshotError (with the
    nearest names) when none, a DiffError when several (a file name of two runs)."""
    path = os.fspath(db) if db is not None else default_db()
    if not os.path.isfile(path):
        raise DiffError(
            f"{role} {spec!r} is no file or directory, no key=value label, and there is no "
            f"warehouse {path} to hold a snapshot of that name (--db)"
        )
    with _warehouse(path) as con:
        # the key it names: a path relative to here selects the snapshot ingested from it
        ids = _ids_of(con, queries.require_snapshot(con, spec))  # or UnknownSnapshotError
    if len(ids) > 1:
        raise DiffError(
            f"{role} {spec!r} selects {len(ids)} snapshots of {path} (snapshot_ids "
            f"{', '.join(map(str, ids))}); give its path, snapshot_id or hash prefix"
        )
    return ids[0]


def _pairs(base: SnapshotSide, head: SnapshotSide) -> list[tuple[str, str]]:
    """(base name, head name) of each pair: one profile against one, or two directories'
    profiles by their path inside the directory (all of them, on both sides)."""
    b, h = base.snapshots, head.snapshots
    if len(b) == 1 and len(h) == 1:
        return [(b[0], h[0])]
    if base.kind != "profiles" or head.kind != "profiles":
        many, one = (base, head) if len(b) > 1 else (head, base)
        raise DiffError(
            f"{many.spec!r} holds {len(many.snapshots)} profiles and {one.spec!r} one: "
            "name one profile on each side, or give two directories whose profiles pair up"
        )
    only = sorted(set(b) ^ set(h))
    if only:
        sides = ", ".join(f"{n} ({'base' if n in b else 'head'})" for n in only[:10])
        raise DiffError(
            f"the profiles of {base.spec!r} and {head.spec!r} pair by their path inside the "
            f"directory, and {len(only)} are on one side only: {sides}"
        )
    return [(name, name) for name in sorted(b)]


def diff_snapshots(
    base: str | os.PathLike[str],
    head: str | os.PathLike[str],
    db: str | os.PathLike[str] | None = None,
    *,
    fail_above: str | int | Threshold | None = None,
) -> SnapshotDiffResult:
    """Compare two device memory snapshots by allocating line, device by device.

    `base` and `head` are each a profile file, a directory of profiles (two
    directories pair their profiles by path), or a snapshot of the warehouse `db`
    (snapshot_id, hash prefix, path or file name). `fail_above` (`5%`, `10MiB`,
    bytes as int) sets the gate on each device's live buffer bytes.

    >>> r = bufferhouse.diff_snapshots("before.prof", "after.prof", fail_above="10MiB")
    >>> r.sources, r.devices, r.failed
    """
    base, head = os.fspath(base), os.fspath(head)
    if sides_kind(base, head, db) != "snapshots":
        raise DiffError(
            f"base {base!r} and head {head!r} are not device memory snapshots "
            "(profiles, directories of profiles or snapshots of --db); bufferhouse.diff "
            "compares modules"
        )
    return compare_snapshots(base, head, db, fail_above)


def compare_snapshots(
    base: str,
    head: str,
    db: str | os.PathLike[str] | None,
    fail_above: str | int | Threshold | None,
) -> SnapshotDiffResult:
    """diff_snapshots for two sides `sides_kind` has already called snapshots."""
    threshold = parse_threshold(fail_above) if fail_above is not None else None
    b, base_samples = _open(base, "base", db)
    h, head_samples = _open(head, "head", db)
    names = _pairs(b, h)
    with duckdb.connect() as scratch:
        scratch.register("snapshot_pairs", _pairs_table(names))
        scratch.register("base_samples", _numbered([base_samples[n] for n, _ in names]))
        scratch.register("head_samples", _numbered([head_samples[n] for _, n in names]))
        sources = statements.run(scratch, "snapshot-sources")
        devices = statements.run(scratch, "snapshot-devices")
    gate = None
    if threshold is not None:
        over = [threshold.exceeded(r["base_bytes"], r["head_bytes"]) for r in devices.to_pylist()]
        gate = SnapshotGate(threshold, devices.filter(pa.array(over, pa.bool_())), len(names) > 1)
    return SnapshotDiffResult(b, h, sources, devices, gate)


def _pairs_table(names: list[tuple[str, str]]) -> pa.Table:
    return pa.table(
        {
            "pair": pa.array(range(len(names)), pa.int32()),
            "base_snapshot": [b for b, _ in names],
            "head_snapshot": [h for _, h in names],
        }
    )


def _numbered(tables: list[pa.Table]) -> pa.Table:
    """The pairs' samples of one side in one table, each row with its pair number."""
    parts = [
        t.cast(tables[0].schema).append_column("pair", pa.array([i] * t.num_rows, pa.int32()))
        for i, t in enumerate(tables)
    ]
    return pa.concat_tables(parts)


__all__ = [
    "SNAPSHOT_TABLES",
    "SideKind",
    "SnapshotDiffResult",
    "SnapshotGate",
    "SnapshotSide",
    "compare_snapshots",
    "diff_snapshots",
    "side_kind",
    "sides_kind",
]
