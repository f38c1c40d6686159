"""The public Python API, composed from the stages (what notebooks call)."""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bufferhouse import queries
from bufferhouse.errors import DumpError
from bufferhouse.load import IngestReport, ModuleOutcome, ingest_paths
from bufferhouse.schema.warehouse import connect as _connect
from bufferhouse.schema.warehouse import connect_sealed

if TYPE_CHECKING:
    import pyarrow as pa

    from bufferhouse.compare import DiffResult, SnapshotDiffResult, diff, diff_snapshots

__all__ = [
    "DiffResult",
    "IngestReport",
    "ModuleOutcome",
    "SnapshotDiffResult",
    "connect",
    "diff",
    "diff_snapshots",
    "ingest",
    "query",
    "sql",
]


def __getattr__(name: str) -> object:
    """`diff`, `diff_snapshots` and their results, imported on first use: an ingest
    need not import compare (0.045 s)."""
    if name in ("diff", "DiffResult", "diff_snapshots", "SnapshotDiffResult"):
        from bufferhouse import compare

        return getattr(compare, name)
    raise AttributeError(f"module 'bufferhouse.api' has no attribute {name!r}")


def ingest(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    db: str | os.PathLike[str] | None = None,
    **options: Any,
) -> IngestReport:
    """Load dump files or trees into the warehouse `db` (default: $BUFFERHOUSE_DB or
    ./bufferhouse.duckdb). Modules already present are skipped; labels are added.

    The options are load.ingest_paths' (labels, strict, jobs, wait, max_bytes,
    progress, rehash), passed on as they are; this function adds the bh_* macros.

    >>> report = bufferhouse.ingest("dumps/", db="fleet.duckdb", labels={"jax": "0.7.2"})
    """
    unknown = sorted(set(options) - set(_INGEST_OPTIONS))
    if unknown:
        raise TypeError(f"ingest() got unexpected keyword arguments: {', '.join(unknown)}")
    paths = require_paths(paths)
    return ingest_paths(paths, db, after_open=queries.install_macros, **options)


def require_paths(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
) -> list[str | os.PathLike[str]]:
    """The paths as a list; a DumpError when none of them exists (a typo), before any
    warehouse is created. Some missing among others: those fail, the rest loads."""
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not any(os.path.exists(p) for p in paths):
        shown = ", ".join(os.fspath(p) for p in paths) or "(no path given)"
        raise DumpError(shown, 0, "no such file or directory; nothing was written")
    return paths


#: ingest's keyword options: ingest_paths' own, less the hook this module fills in.
_INGEST_OPTIONS = {
    name: p
    for name, p in inspect.signature(ingest_paths).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY and name != "after_open"
}
ingest.__signature__ = inspect.signature(
    ingest
).replace(  # type: ignore[attr-defined]
    parameters=[
        *list(inspect.signature(ingest).parameters.values())[:2],
        *_INGEST_OPTIONS.values(),
    ]
)


def connect(
    db: str | os.PathLike[str] | None = None,
    *,
    read_only: bool = True,
    wait: float = 0.0,
    allow_files: bool = False,
):
    """A DuckDB connection to the warehouse (read-only unless asked).

    A read-only connection is sealed as `sql` is (an instance of its own, external
    access off, configuration locked): the warehouse's views and macros cannot read
    or write files, whatever the file says. `allow_files=True`, or a writable
    connection, opens it as the duckdb shell does."""
    if read_only and not allow_files:
        return connect_sealed(db, wait=wait)
    return _connect(db, read_only=read_only, wait=wait)


def query(
    name: str, db: str | os.PathLike[str] | None = None, *, wait: float = 0.0, **params: object
):
    """Run a canned query on the warehouse; returns a pyarrow Table. `wait`: seconds to
    wait for a writer (an ingest) to let go of the file.

    >>> bufferhouse.query("peak-buffers", db="fleet.duckdb", module="jit_train_step")
    """
    return run_query(queries.get(name), params, db, wait=wait).table


@dataclass(frozen=True)
class QueryRun:
    """A canned query's rows, and the modules its `module` parameter selected (more than
    one when a name was compiled more than once; empty without a module)."""

    table: pa.Table
    matches: list[queries.ModuleMatch]


def run_query(
    q: queries.Query,
    params: dict[str, object],
    db: str | os.PathLike[str] | None = None,
    *,
    wait: float = 0.0,
) -> QueryRun:
    """Run a canned query already looked up: its parameters bound once (an unknown one
    fails before anything is opened), on one connection that also says which modules
    the `module` parameter selected."""
    values = q.bind(params)
    with connect_sealed(db, wait=wait) as con:
        queries.use_package_views(con)
        # A selector that matches nothing (a typo) is an error, not an empty table.
        if values.get("module") is not None:
            queries.require_module(con, str(values["module"]))
        if values.get("event") is not None:
            queries.require_event(con, str(values["event"]))
        if values.get("label") is not None:
            queries.require_label(con, str(values["label"]))
        for param in queries.SNAPSHOT_PARAMS:
            if values.get(param) is not None:
                values[param] = queries.require_snapshot(con, str(values[param]))
        table = queries.execute(con, q, values)
        matches = []
        if values.get("module") is not None and "module_id" in table.column_names:
            matches = queries.module_matches(con, str(values["module"]))
        return QueryRun(table, matches)


def sql(
    text: str,
    db: str | os.PathLike[str] | None = None,
    params: list | dict | None = None,
    *,
    allow_files: bool = False,
    wait: float = 0.0,
):
    """Run one ad-hoc SQL statement (read-only) on the warehouse; returns a pyarrow Table.

    The SQL sees only the warehouse: no other files, network or extensions, unless
    `allow_files` (then it may read and write files, as the duckdb shell does).
    `wait`: seconds to wait for a writer (an ingest) to let go of the file.
    """
    with connect_sealed(db, allow_files=allow_files, wait=wait) as con:
        queries.use_package_views(con)
        return queries.run_sql(con, text, params)


def module_matches(key: str | int, db: str | os.PathLike[str] | None = None):
    """The modules a `module` parameter value selects (queries.ModuleMatch), most
    recently ingested first: more than one when a name was compiled more than once."""
    with connect_sealed(db) as con:
        queries.use_package_views(con)
        return queries.module_matches(con, str(key))
