"""The three kinds of record a warehouse holds, declared once beside their tables.

A record is a compiled module, an OOM event found in a log, or a runtime snapshot (a
device memory profile). Each has its own table with a warehouse key (local to one
warehouse or dataset) and a content hash (its identity everywhere: a record read again
adds nothing), a labels table, and child tables keyed by the same id and written whole
with it. A stage that treats every kind alike loops over KINDS instead of keeping a copy
per kind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bufferhouse.schema import quote_identifier
from bufferhouse.schema.tables import (
    DERIVED_TABLES,
    LABELS,
    MODULE_TABLES,
    MODULE_TARGETS,
    MODULES,
    OOM_BUFFERS,
    OOM_EVENTS,
    OOM_LABELS,
    RUNTIME_FRAMES,
    RUNTIME_LABELS,
    RUNTIME_SAMPLES,
    RUNTIME_SNAPSHOTS,
    Table,
)


@dataclass(frozen=True)
class Kind:
    """One kind of record: its table, key, identity, labels and children."""

    name: str
    table: Table
    #: The warehouse key, a column of `table`, `labels` and every child.
    id_column: str
    #: The content hash that identifies a record across warehouses.
    hash_column: str
    labels: Table
    children: tuple[Table, ...]

    @property
    def tables(self) -> tuple[Table, ...]:
        """Every table of the kind: its own, its labels, its children."""
        return (self.table, self.labels, *self.children)


#: module_targets is filled after its modules land (load/targets.py), from the files
#: beside them; it is keyed and deduplicated by the module like the rest.
MODULE = Kind(
    "module",
    MODULES,
    "module_id",
    "content_hash",
    LABELS,
    (*MODULE_TABLES, *DERIVED_TABLES, MODULE_TARGETS),
)
OOM_EVENT = Kind("OOM event", OOM_EVENTS, "event_id", "event_hash", OOM_LABELS, (OOM_BUFFERS,))
RUNTIME_SNAPSHOT = Kind(
    "runtime snapshot",
    RUNTIME_SNAPSHOTS,
    "snapshot_id",
    "snapshot_hash",
    RUNTIME_LABELS,
    (RUNTIME_SAMPLES, RUNTIME_FRAMES),
)

KINDS: tuple[Kind, ...] = (MODULE, OOM_EVENT, RUNTIME_SNAPSHOT)


# The dedup rule. A dataset several writers added to may hold one record more than
# once, each copy with its own id and the run_id of the run that wrote it; a reader
# keeps per hash the copy of the lowest run_id (then id), moves the labels of every
# copy onto it, and keeps only its children's rows. Rendered once here as DuckDB SQL
# over two kinds of names a caller supplies -- `raw(table)`: the table's rows, every
# copy, with run_id; `kept(table)`: a kind's own table as this SQL keeps it -- and
# run as is by the attach views (DuckDB over the files) and the dataset reader
# (DuckDB over Arrow), and transpiled by sqlglot for Spark.

#: The column of every partitioned table that says which run wrote the row.
RUN_ID = "run_id"
#: A table whose rows belong to a record of any kind (or to the run): the first id
#: column that is not NULL says whose they are.
OWNED_BY_ANY = "diagnostics"


def kind_of(table_name: str) -> Kind | None:
    """The kind whose table, labels or child `table_name` is (None: a run or reference table)."""
    for kind in KINDS:
        if table_name in {t.name for t in kind.tables}:
            return kind
    return None


def kept_rows_sql(
    table: Table, raw: Callable[[str], str], kept: Callable[[str], str]
) -> str | None:
    """The SELECT of the rows of `table` a reader keeps, by the dedup rule above, with the
    table's declared columns; None for a table that is not a kind's (runs, reference
    tables: the caller's own rule)."""
    cols = [f"r.{quote_identifier(c)}" for c in table.column_names]
    if table.name == OWNED_BY_ANY:
        return f"SELECT {', '.join(cols)} FROM {raw(table.name)} AS r WHERE {_owned(kept)}"
    kind = kind_of(table.name)
    if kind is None:
        return None
    id_, hash_ = quote_identifier(kind.id_column), quote_identifier(kind.hash_column)
    if table is kind.table:
        return (
            f"SELECT {', '.join(cols)} FROM {raw(table.name)} AS r QUALIFY row_number() OVER "
            f"(PARTITION BY r.{hash_} ORDER BY r.{RUN_ID}, r.{id_}) = 1"
        )
    if table is kind.labels:  # every copy's labels, on the kept copy, once each
        cols = [f"k.{id_}" if c == f"r.{id_}" else c for c in cols]
        return (
            f"SELECT DISTINCT {', '.join(cols)} FROM {raw(table.name)} AS r "
            f"JOIN {raw(kind.table.name)} AS c ON c.{id_} = r.{id_} "
            f"JOIN {kept(kind.table.name)} AS k ON k.{hash_} = c.{hash_}"
        )
    return (
        f"SELECT {', '.join(cols)} FROM {raw(table.name)} AS r SEMI JOIN "
        f"{kept(kind.table.name)} AS k ON k.{id_} = r.{id_} AND k.{RUN_ID} = r.{RUN_ID}"
    )


def _owned(kept: Callable[[str], str], kinds: tuple[Kind, ...] = (MODULE, OOM_EVENT)) -> str:
    """A row of OWNED_BY_ANY is kept when its owner is: the first kind whose id it
    carries, or none (a run's own rows)."""
    if not kinds:
        return "true"
    kind, rest = kinds[0], kinds[1:]
    id_ = quote_identifier(kind.id_column)
    exists = (
        f"EXISTS (SELECT 1 FROM {kept(kind.table.name)} AS k "
        f"WHERE k.{id_} = r.{id_} AND k.{RUN_ID} = r.{RUN_ID})"
    )
    return f"((r.{id_} IS NULL AND {_owned(kept, rest)}) OR {exists})"
