"""The three kinds of record a warehouse holds, declared once beside their tables.

A record is a compiled module, an OOM event found in a log, or a runtime snapshot (a
device memory profile). Each has its own table with a warehouse key (local to one
warehouse or dataset) and a content hash (its identity everywhere: a record read again
adds nothing), a labels table, and child tables keyed by the same id and written whole
with it. A stage that treats every kind alike loops over KINDS instead of keeping a copy
per kind.
"""

from __future__ import annotations

from dataclasses import dataclass

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
