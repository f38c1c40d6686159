"""The two sides of a diff, opened: a label of a warehouse, a warehouse file, or
dumps ingested into a temporary warehouse that is removed afterwards."""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from bufferhouse import queries
from bufferhouse.compare import statements
from bufferhouse.errors import BufferhouseError, DiffError
from bufferhouse.load import ingest_paths
from bufferhouse.schema.warehouse import connect, default_db

#: `top` for peak-buffers meaning every row.
ALL_ROWS = 2**31 - 1


@dataclass(frozen=True)
class Side:
    """One side of a diff, as given and as read."""

    spec: str  # as given: a label, a warehouse file or a dump path
    kind: str  # label | warehouse | dumps
    modules: int  # modules on this side


def is_duckdb_file(path: Path) -> bool:
    """A DuckDB database file says DUCK at bytes 8-12 of its header."""
    try:
        with open(path, "rb") as f:
            head = f.read(12)
    except OSError:
        return False
    return head[8:12] == b"DUCK"


def classify(spec: str, role: str) -> tuple[str, list[str]]:
    """(kind, labels) of a side given as text: an existing path wins over a label."""
    path = Path(spec)
    if path.is_dir():
        return "dumps", []
    if path.is_file():
        return ("warehouse" if is_duckdb_file(path) else "dumps"), []
    if "=" in spec:
        labels = [part.strip() for part in spec.split(",")]
        bad = [x for x in labels if not x.partition("=")[0].strip() or "=" not in x]
        if bad:
            raise DiffError(f"{role} {spec!r}: {bad[0]!r} is not a key=value label")
        return "label", labels
    raise DiffError(
        f"{role} {spec!r} is neither an existing file or directory nor a key=value label"
    )


@dataclass
class Opened:
    """A side's warehouse, open read-only, and its modules."""

    side: Side
    con: duckdb.DuckDBPyConnection
    modules: pa.Table


def open_side(
    spec: str | os.PathLike[str],
    role: str,
    db: str | os.PathLike[str] | None,
    stack: ExitStack,
    jobs: int | None,
) -> Opened:
    spec = os.fspath(spec)
    kind, labels = classify(spec, role)
    if kind == "label":
        path = os.fspath(db) if db is not None else default_db()
    elif kind == "warehouse":
        path = spec
    else:
        scratch = tempfile.mkdtemp(prefix=f"bufferhouse-diff-{role}-")
        stack.callback(shutil.rmtree, scratch, True)
        path = os.path.join(scratch, "warehouse.duckdb")
        report = ingest_paths([spec], path, jobs=jobs, after_open=queries.install_macros)
        if report.failed:
            first = report.failed[0]
            why = first.error.describe() if first.error else first.files.display
            raise DiffError(
                f"{role} {spec!r}: {len(report.failed)} module(s) failed to ingest, "
                f"so the diff would be incomplete; first: {why}"
            )
        if not report.outcomes:  # nothing to read: the ingest wrote no warehouse
            raise DiffError(f"{role} {spec!r}: no modules (no dump files found there)")
    try:
        con = connect(path, read_only=True)
    except BufferhouseError as exc:
        raise DiffError(f"{role} {spec!r}: {exc}") from None
    stack.callback(con.close)
    queries.use_package_views(con)
    modules = queries.run(con, "modules")
    primary = dict(
        con.execute("SELECT module_id, primary_module_id FROM compile_modules").fetchall()
    )
    kept = set(primary.values())  # one compile seen in several forms is one module here
    if labels:
        labelled = statements.run(con, "labelled", labels=labels).column("module_id")
        kept = {primary[i] for i in labelled.to_pylist()}  # a compile any of whose forms has them
    modules = modules.filter(
        pc.is_in(modules.column("module_id"), value_set=pa.array(sorted(kept), pa.int64()))
    )
    if modules.num_rows == 0:
        if kind == "label":
            present = con.execute(
                "SELECT DISTINCT key || '=' || value FROM labels ORDER BY 1"
            ).fetchall()
            valid = ", ".join(r[0] for r in present[:20]) or "none"
            raise DiffError(
                f"{role} {spec!r}: no module in {path} carries that label; labels: {valid}"
            )
        where = "no dump files found there" if kind == "dumps" else "the warehouse is empty"
        raise DiffError(f"{role} {spec!r}: no modules ({where})")
    return Opened(Side(spec, kind, modules.num_rows), con, modules)


def peak_buffers(con: duckdb.DuckDBPyConnection, pairs: pa.Table, id_column: str) -> pa.Table:
    """The `peak-buffers` rows of each pair's module on one side, with the pair number."""
    parts = []
    for pair, module_id in zip(
        pairs.column("pair").to_pylist(), pairs.column(id_column).to_pylist()
    ):
        if module_id is None:
            continue
        rows = queries.run(con, "peak-buffers", {"module": str(module_id), "top": ALL_ROWS})
        rows = rows.filter(pc.equal(rows.column("module_id"), module_id))
        parts.append(rows.append_column("pair", pa.array([pair] * rows.num_rows, pa.int32())))
    if not parts:
        empty = queries.run(con, "peak-buffers", {"top": 0})
        return empty.append_column("pair", pa.array([], pa.int32()))
    return pa.concat_tables(parts)


__all__ = ["ALL_ROWS", "Opened", "Side", "classify", "open_side", "peak_buffers"]
