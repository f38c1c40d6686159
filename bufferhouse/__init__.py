"""bufferhouse: an SQL warehouse for XLA buffer-assignment dumps.

Public API: `ingest(paths, db=...)`, `connect(db)`, `query(name, db=..., **params)`,
`diff(base, head, db=...)`.
"""

__version__ = "0.1.0"

# Imported last, so that the `ingest` function (not the `ingest` stage package)
# is what `bufferhouse.ingest` names.
from bufferhouse.api import connect, diff, ingest, query, sql

__all__ = ["__version__", "connect", "diff", "ingest", "query", "sql"]
