"""bufferhouse: an SQL warehouse for XLA memory data.

Public API (bufferhouse.api): `ingest(paths, db=...)`, `connect(db)`,
`query(name, db=..., **params)`, `sql(text, db=...)`, `diff(base, head, db=...)`.
The stages are packages of their own names (parse, load, schema, queries,
check, export, visual, compare, spark, cli); no module is named like a function.
"""

from bufferhouse.api import connect, diff, ingest, query, sql
from bufferhouse.version import __version__

__all__ = ["__version__", "connect", "diff", "ingest", "query", "sql"]
