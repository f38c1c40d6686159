"""bufferhouse: an SQL warehouse for XLA memory data.

Public API (bufferhouse.api): `ingest(paths, db=...)`, `connect(db)`,
`query(name, db=..., **params)`, `sql(text, db=...)`, `diff(base, head, db=...)`,
`diff_snapshots(base, head, db=...)` (two device memory profiles).
The stages are packages of their own names (parse, load, schema, queries,
check, export, visual, compare, spark, cli); no module is named like a function.

The API is imported on first use: a parser process imports only `parse`, not
the warehouse, queries and exports (0.35 s of each worker's start).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bufferhouse.version import __version__

if TYPE_CHECKING:
    from bufferhouse.api import connect, diff, diff_snapshots, ingest, query, sql

__all__ = ["__version__", "connect", "diff", "diff_snapshots", "ingest", "query", "sql"]


def __getattr__(name: str) -> object:
    if name in __all__:
        from bufferhouse import api

        return getattr(api, name)
    raise AttributeError(f"module 'bufferhouse' has no attribute {name!r}")
