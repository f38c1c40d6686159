"""Write parsed modules into the warehouse, each module whole or not at all.

Modules are buffered and committed in batches: one transaction and one
INSERT per table for many modules, because per-statement overhead, not data
volume, dominates small modules. A batch holds only whole modules, so a crash
or a failed write never leaves part of a module behind.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import duckdb
import numpy as np
import pyarrow as pa

from bufferhouse.errors import DumpError, WarehouseError
from bufferhouse.load.file_stats import Seen, held_file_stats
from bufferhouse.load.insert import insert_arrow
from bufferhouse.parse import memory
from bufferhouse.parse.discover import text_path
from bufferhouse.parse.oom import LogEvents, log_key, raw_hash
from bufferhouse.parse.pprof import SnapshotTables
from bufferhouse.schema import TABLES_BY_NAME, arrow_schema, quote_identifier
from bufferhouse.schema.derive import derive
from bufferhouse.schema.ids import ModuleIds
from bufferhouse.schema.kinds import KINDS, MODULE, OOM_EVENT, OWNED_BY_ANY, RUNTIME_SNAPSHOT, Kind


def _module_id_field(table_name: str) -> pa.Field:
    return arrow_schema(TABLES_BY_NAME[table_name]).field(0)


def _diagnostic_rows(
    run_id: int,
    module_id: int | None,
    problems: list[DumpError],
    severity: str,
    event_id: int | None = None,
) -> list[dict]:
    return [
        {
            "run_id": run_id,
            "module_id": module_id,
            "path": text_path(e.path),
            "line": e.line,
            "severity": severity,
            "message": e.message,
            "event_id": event_id,
            "text": None if e.text is None else e.text[:2000],
        }
        for e in problems
    ]


def with_module_id(name: str, data: pa.Table, module_id: int) -> pa.Table:
    """A parsed table of `name` with its module_id column in front: one constant array."""
    ids = pa.repeat(pa.scalar(module_id, pa.int64()), data.num_rows)
    return data.add_column(0, _module_id_field(name), ids)


def _schema(table_name: str) -> pa.Schema:
    return arrow_schema(TABLES_BY_NAME[table_name])


def _event_rows(
    log: LogEvents, keep: list[int], ids: list[int], run_id: int
) -> dict[str, pa.Table]:
    """The oom_events and oom_buffers rows of the events at ordinals `keep` of a log,
    under their event ids `ids`, written by `run_id`."""
    id_of = np.full(len(log.hashes), -1, dtype=np.int64)
    id_of[keep] = ids
    events = log.events.take(pa.array(keep))
    events = events.set_column(0, "event_id", pa.array(ids, pa.int64()))
    events = events.set_column(
        events.schema.get_field_index("run_id"),
        "run_id",
        pa.repeat(pa.scalar(run_id, pa.int64()), len(keep)),
    )
    ordinals = log.buffers.column("event_id").to_numpy()
    buffers = log.buffers.filter(pa.array(id_of[ordinals] >= 0))
    buffers = buffers.set_column(
        0, "event_id", pa.array(id_of[buffers.column("event_id").to_numpy()], pa.int64())
    )
    return {"oom_events": events, "oom_buffers": buffers}


@dataclass
class Records:
    """One kind's part of a batch: its new records' rows, and the held ones it labels."""

    #: Rows by table (the kind's own and its children), ids set, one part per record or
    #: log. A module's rows wait apart, as Batch.modules and Batch.tables.
    parts: dict[str, list[pa.Table]] = field(default_factory=dict)
    #: Ids of the records this batch writes (they get this run's labels, but for those
    #: that replace a held record: they keep its labels, and gain this run's as `present`).
    new: list[int] = field(default_factory=list)
    #: Held records this run labels (where they lack the labels).
    present: list[int] = field(default_factory=list)
    #: Held records a longer read in this batch replaces (an OOM message a log was still
    #: writing): their old rows go in the batch's transaction; their ids are the new rows'.
    replaced: list[int] = field(default_factory=list)

    def label_rows(self, kind: Kind, labels: list[tuple[str, str]]) -> list[dict]:
        """The labels rows of the new records (not of those that replace one)."""
        replaced = set(self.replaced)
        return [
            {kind.id_column: i, "key": k, "value": v}
            for i in self.new
            if i not in replaced
            for k, v in labels
        ]


@dataclass
class Batch:
    """Whole records buffered for one write, and the batch's other rows."""

    modules: list[dict] = field(default_factory=list)
    #: Each table's parts, one per module: (module_id, rows as parsed, without module_id).
    tables: dict[str, list[tuple[int, pa.Table]]] = field(default_factory=dict)
    #: Each kind's records, by Kind.name.
    records: dict[str, Records] = field(default_factory=lambda: {k.name: Records() for k in KINDS})
    diagnostics: list[dict] = field(default_factory=list)
    #: file_stats rows of modules read this run (each replaces its path's row).
    file_stats: list[dict] = field(default_factory=list)
    rows: int = 0

    @property
    def empty(self) -> bool:
        return not (self.file_stats or self.holds_rows)

    @property
    def holds_rows(self) -> bool:
        """Records, labels or diagnostics: what makes a run's `runs` row (file_stats rows
        alone do not)."""
        return bool(self.diagnostics) or any(r.new or r.present for r in self.records.values())

    def kind_rows(self, kind: Kind) -> Iterator[tuple[str, pa.Table]]:
        """The batch's rows of `kind` by table, its own first, then its children (for
        modules, those stored sorted last: their sorted copy is made once the rest is let
        go); the batch lets go of each table as it is taken."""
        if kind is MODULE:
            if self.modules:
                yield "modules", pa.Table.from_pylist(self.modules, schema=_schema("modules"))
            for name in sorted(self.tables, key=lambda n: bool(TABLES_BY_NAME[n].stored_order)):
                yield name, self.pop_table(name)
            return
        parts = self.records[kind.name].parts
        for table in kind.tables:
            if table.name in parts:
                yield table.name, pa.concat_tables(parts.pop(table.name))

    def pop_table(self, name: str) -> pa.Table:
        """A table's rows of every module in the batch, module_id in front, as one table;
        the batch lets go of them. The ids are added once per table and batch: added
        module by module, they cost a millisecond per module in the parent process."""
        ids, parts = zip(*self.tables.pop(name))
        counts = [part.num_rows for part in parts]
        data = pa.concat_tables(parts)
        del parts
        column = pa.array(np.repeat(np.array(ids, dtype=np.int64), counts), pa.int64())
        return data.add_column(0, _module_id_field(name), column)


class ModuleBuffer:
    """Whole parsed modules waiting to be written, and the sink-independent bookkeeping.

    The ingest loop (`run_batches`) drives any subclass: the warehouse's
    ModuleWriter and the Parquet export's PartWriter implement `write`.
    The sink, not the parser, gives each module its id (see schema.ids), so
    ids grow in the order modules are written. `held` maps the content hash
    of every module the sink already has to its id; new ids go above them.
    `take` hands the buffered batch over and starts a new one, so the loop
    can fill the next batch while the last is written.
    """

    def __init__(
        self,
        run_id: int,
        labels: list[tuple[str, str]],
        max_modules: int = 256,
        max_rows: int = 2_000_000,
        held: Mapping[str, int] | None = None,
        held_events: Mapping[str, int] | None = None,
        held_snapshots: Mapping[str, int] | None = None,
        held_spans: Mapping[tuple[str, int], list[HeldSpan]] | None = None,
    ) -> None:
        self.run_id = run_id
        self.labels = labels
        self.max_modules = max_modules
        self.max_rows = max_rows
        #: Per kind (Kind.name): hash -> id of every record the sink holds, this run's
        #: included, and where its new ids come from (above every held one).
        self.held: dict[str, dict[str, int]] = {
            MODULE.name: dict(held or {}),
            OOM_EVENT.name: dict(held_events or {}),
            RUNTIME_SNAPSHOT.name: dict(held_snapshots or {}),
        }
        self.id_sources = {
            name: ModuleIds(after=max(ids.values(), default=None))
            for name, ids in self.held.items()
        }
        #: content_hash of every module the sink held before this run.
        self.held_before: frozenset[str] = frozenset(held or {})
        #: (log key, byte offset) -> the events held there before this run, for a sink
        #: that can replace an event (the warehouse); None: it never does.
        self.event_spans = held_spans
        #: The first file's absolute path -> how the module's files looked when last read
        #: (file_stats); empty for a sink that keeps no such record.
        self.held_files: dict[str, Seen] = {}
        self.batch = Batch()

    def record_files(self, row: dict) -> None:
        """Keep a file_stats row (file_stats.record_row) for the next batch, in a sink that
        keeps them (the warehouse)."""
        if self.keeps_file_stats:
            self.batch.file_stats.append(row)

    #: Whether the sink records file_stats (only the warehouse does).
    keeps_file_stats = False

    @property
    def module_ids(self) -> dict[str, int]:
        """content_hash -> module_id of every module the sink holds, this run's included."""
        return self.held[MODULE.name]

    def _held(self, kind: Kind, content_hash: str) -> int | None:
        """The id of the record of `kind` the sink holds under this hash, labelled by this
        run (if it lacks the labels); None if the sink does not hold it."""
        held = self.held[kind.name].get(content_hash)
        if held is not None and self.labels:
            self.batch.records[kind.name].present.append(held)
        return held

    def _new(self, kind: Kind, content_hash: str, record_id: int | None = None) -> int:
        """A new record of `kind` in the batch: its id, new unless given (a replaced one's)."""
        if record_id is None:
            record_id = self.id_sources[kind.name].next()
        self.held[kind.name][content_hash] = record_id
        self.batch.records[kind.name].new.append(record_id)
        return record_id

    def _add_rows(self, kind: Kind, tables: dict[str, pa.Table]) -> None:
        """A new record's rows (ids set), by table, into the batch."""
        parts = self.batch.records[kind.name].parts
        for name, data in tables.items():
            parts.setdefault(name, []).append(data.cast(_schema(name)))
            self.batch.rows += data.num_rows

    def add_snapshot(self, snapshot: SnapshotTables) -> int | None:
        """Buffer a snapshot the sink does not hold yet, whole, under a new snapshot_id
        (returned); one it holds (by snapshot_hash) is only labelled (None)."""
        if self._held(RUNTIME_SNAPSHOT, snapshot.content_hash) is not None:
            return None
        snapshot_id = self._new(RUNTIME_SNAPSHOT, snapshot.content_hash)
        run = {"run_id": pa.repeat(pa.scalar(self.run_id, pa.int64()), 1)}
        tables = {}
        for name, data in snapshot.tables().items():
            ids = pa.repeat(pa.scalar(snapshot_id, pa.int64()), data.num_rows)
            data = data.set_column(0, "snapshot_id", ids)
            if name == RUNTIME_SNAPSHOT.table.name:
                data = data.set_column(2, "run_id", run["run_id"])
            tables[name] = data
        self._add_rows(RUNTIME_SNAPSHOT, tables)
        return snapshot_id

    def add_events(self, log: LogEvents) -> tuple[list[int], int]:
        """Buffer a log's OOM events that the sink does not hold yet, each with all its
        rows and diagnostics; label those it holds. Returns (ordinals of the events
        added, how many it already held).

        Events are identified by event_hash, so a log read again adds nothing and a
        log that grew adds only its new events.
        """
        batch = self.batch
        records = batch.records[OOM_EVENT.name]
        hashes = log.hashes
        offsets = log.events.column("byte_offset").to_pylist()
        keep, ids, present = [], [], 0
        for ordinal, event_hash in enumerate(hashes):
            if self._held(OOM_EVENT, event_hash) is not None:
                present += 1
                continue
            event_id = self._replaced(log, offsets[ordinal], log.raws[ordinal])
            if event_id is not None:
                records.replaced.append(event_id)
                if self.labels:
                    records.present.append(event_id)
            event_id = self._new(OOM_EVENT, event_hash, event_id)
            keep.append(ordinal)
            ids.append(event_id)
            batch.diagnostics += _diagnostic_rows(
                self.run_id, None, log.problems[ordinal], "warning", event_id
            )
        if keep:
            batch.diagnostics += _diagnostic_rows(self.run_id, None, log.file_problems, "warning")
            self._add_rows(OOM_EVENT, _event_rows(log, keep, ids, self.run_id))
        return keep, present

    def _replaced(self, log: LogEvents, byte_offset: int, raw: bytes) -> int | None:
        """The held event that this one is a longer read of, if any: one held before this
        run at the same log name and byte offset whose bytes are the start of this one's
        (a message the log was still writing when it was read). Its id is this one's."""
        if self.event_spans is None:
            return None
        key = log_key(log.path)
        for held in self.event_spans.get((key, byte_offset), ()):
            if held.byte_length < len(raw) and held.event_hash == raw_hash(
                key, byte_offset, raw[: held.byte_length]
            ):
                self.event_spans[(key, byte_offset)].remove(held)
                return held.event_id
        return None

    def add(self, module_row: dict, tables: dict[str, pa.Table], warnings: list[DumpError]) -> int:
        """Buffer a parsed module under a newly assigned module_id, which it returns.

        The buffer takes the tables: `tables` is left empty, so that the batch holds the
        module's only reference and the write frees each table once DuckDB has it.
        """
        module_id = self._new(MODULE, module_row["content_hash"])
        counts = {name: data.num_rows for name, data in tables.items()}
        batch = self.batch
        batch.modules.append(
            dict(module_row, module_id=module_id, run_id=self.run_id, row_counts=counts)
        )
        for name, data in tables.items():
            if data.num_rows:
                batch.tables.setdefault(name, []).append((module_id, data))
                batch.rows += data.num_rows
        tables.clear()
        batch.diagnostics += _diagnostic_rows(self.run_id, module_id, warnings, "warning")
        return module_id

    def add_failure(self, error: DumpError) -> None:
        self.batch.diagnostics += _diagnostic_rows(self.run_id, None, [error], "error")

    def add_labels(self, content_hash: str) -> int | None:
        """Give this run's labels to a module the sink already holds (if it lacks them);
        returns its module_id (None if the sink does not hold it)."""
        return self._held(MODULE, content_hash)

    @property
    def full(self) -> bool:
        return len(self.batch.modules) >= self.max_modules or self.batch.rows >= self.max_rows

    @property
    def worth_writing(self) -> bool:
        """Enough rows to repay a transaction of their own (an eighth of a full batch):
        while parsers run elsewhere, an idle writer takes such a batch at once rather
        than wait for a full one, so parsing and writing overlap."""
        return self.batch.rows >= self.max_rows // 8

    @property
    def empty(self) -> bool:
        return self.batch.empty

    def take(self) -> Batch:
        """The buffered batch; the buffer starts a new one."""
        batch, self.batch = self.batch, Batch()
        return batch

    def flush(self) -> int:
        """Write everything buffered, whole; returns how many modules were written."""
        return self.write(self.take())

    def write(self, batch: Batch) -> int:
        """Write `batch` whole; returns how many modules were written. Calls come one at
        a time, in the order the batches were taken (maybe from another thread)."""
        raise NotImplementedError


class ModuleWriter(ModuleBuffer):
    """Commits buffered modules to the warehouse, one transaction per batch.

    On any write error it rolls back and raises WarehouseError, leaving the
    warehouse as it was before the batch.
    """

    keeps_file_stats = True

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        run_id: int,
        labels: list[tuple[str, str]],
        max_modules: int = 256,
        max_rows: int = 2_000_000,
        run_row: dict | None = None,
    ) -> None:
        held = dict(con.execute("SELECT content_hash, module_id FROM modules").fetchall())
        events = dict(con.execute("SELECT event_hash, event_id FROM oom_events").fetchall())
        snapshots = dict(
            con.execute("SELECT snapshot_hash, snapshot_id FROM runtime_snapshots").fetchall()
        )
        super().__init__(
            run_id, labels, max_modules, max_rows, held, events, snapshots, held_spans(con)
        )
        self.held_files = held_file_stats(con)
        self.con = con
        # DuckDB buffers 5 row groups of a bulk insert per table before it compresses and
        # writes them: for a module's instruction texts, ~150 MB more memory than 1 needs.
        # The setting is DuckDB 2's; 1.4 (which pyproject allows) has no such buffer.
        with contextlib.suppress(duckdb.CatalogException):
            con.execute("SET write_buffer_row_group_count = 1")
        #: The run's row in `runs`, written with the first batch: a run that
        #: writes nothing (killed, disk full, nothing new) leaves no trace.
        self.run_row = run_row

    @property
    def worth_writing(self) -> bool:
        """Only a full batch. DuckDB writes a transaction's rows of a table to the file,
        compressed, as they are appended only once they fill a row group (122,880 rows);
        a smaller transaction's rows go through the write-ahead log, stay in memory and
        are compressed at the next checkpoint (at the latest when the ingest closes the
        warehouse). Writing ten 21 MB modules a transaction each: 258 MB of log, a
        2.0 CPU-s checkpoint at close, 5.3 CPU-s in all; in one, 3.9. Their ingest at
        the default --jobs, an idle writer taking an eighth against a full batch:
        14.9 -> 14.5 and 18.4 -> 16.2 CPU-s (busy host), peak RSS ~1,000 -> ~730 MiB."""
        return self.full

    def write(self, batch: Batch) -> int:
        if batch.empty:
            return 0
        con = self.con
        try:
            con.execute("BEGIN TRANSACTION")
            with_run = self.run_row is not None and batch.holds_rows
            if with_run:
                _insert_rows(con, "runs", [self.run_row])
            for kind in KINDS:
                self._write_kind(batch, kind)
            _insert_rows(con, "diagnostics", batch.diagnostics)
            _replace_file_stats(con, batch.file_stats)
            con.execute("COMMIT")
        except duckdb.Error as exc:
            with contextlib.suppress(duckdb.Error):
                con.execute("ROLLBACK")
            raise WarehouseError(
                f"could not write {len(batch.modules)} modules and their batch's OOM events and"
                f" snapshots to the warehouse: {exc}. Nothing of them was written; what was"
                " committed before is intact."
            ) from None
        if with_run:
            self.run_row = None
        return len(batch.modules)

    def _write_kind(self, batch: Batch, kind: Kind) -> None:
        """The batch's records of one kind, in its transaction: the rows of those a longer
        read replaces out, then its rows table by table, its derived rows, its labels."""
        con, records = self.con, batch.records[kind.name]
        if records.replaced:
            _delete_records(con, kind, records.replaced)
        for name, data in batch.kind_rows(kind):
            # Dropped once DuckDB has them: a large module's Arrow tables and DuckDB's
            # copy are not held at once longer than one table at a time.
            insert_arrow(con, name, data)
            del data
            if kind is MODULE and name != kind.table.name:
                memory.release()
        if kind is MODULE and batch.modules:
            _derive_batch(con, [m["module_id"] for m in batch.modules])
        _insert_rows(con, kind.labels.name, records.label_rows(kind, self.labels))
        if records.present:
            _insert_missing_labels(con, kind, records.present, self.labels)


@dataclass(frozen=True)
class HeldSpan:
    """A stored OOM event as a grown log's read of it is matched against."""

    event_id: int
    event_hash: str
    byte_length: int


def held_spans(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, int], list[HeldSpan]]:
    """(log key, byte offset) -> the warehouse's events there (those with a byte_length)."""
    spans: dict[tuple[str, int], list[HeldSpan]] = {}
    for event_id, event_hash, path, offset, length in con.execute(
        "SELECT event_id, event_hash, path, byte_offset, byte_length FROM oom_events"
        " WHERE byte_length IS NOT NULL"
    ).fetchall():
        spans.setdefault((log_key(path), offset), []).append(HeldSpan(event_id, event_hash, length))
    return spans


def _delete_records(con: duckdb.DuckDBPyConnection, kind: Kind, ids: list[int]) -> None:
    """The rows of records a longer read replaces (their labels stay: the id is kept)."""
    column = quote_identifier(kind.id_column)
    for table in (*kind.children, kind.table, TABLES_BY_NAME[OWNED_BY_ANY]):
        con.execute(
            f"DELETE FROM {quote_identifier(table.name)} WHERE {column} IN (SELECT unnest(?))",
            [ids],
        )


def _insert_rows(con: duckdb.DuckDBPyConnection, table: str, rows: list[dict]) -> None:
    """Append `rows` (Python dicts: runs, labels, diagnostics) to `table`, if any."""
    if rows:
        insert_arrow(
            con, table, pa.Table.from_pylist(rows, schema=arrow_schema(TABLES_BY_NAME[table]))
        )


def _replace_file_stats(con: duckdb.DuckDBPyConnection, rows: list[dict]) -> None:
    """The batch's file_stats rows, each replacing the row held for its path."""
    if not rows:
        return
    last = {r["path"]: r for r in rows}  # a path read twice in a batch: its last read
    con.execute("DELETE FROM file_stats WHERE path IN (SELECT unnest(?))", [list(last)])
    _insert_rows(con, "file_stats", list(last.values()))


def _insert_missing_labels(
    con: duckdb.DuckDBPyConnection, kind: Kind, ids: list[int], labels: list[tuple[str, str]]
) -> None:
    """Labels of records of `kind` already held, where they lack them."""
    key = kind.id_column
    rows = pa.Table.from_pylist(
        [{key: m, "key": k, "value": v} for m in set(ids) for k, v in labels],
        schema=arrow_schema(kind.labels),
    )
    name, column = quote_identifier(kind.labels.name), quote_identifier(key)
    con.register("_bh_new_labels", rows)
    try:
        con.execute(
            f"INSERT INTO {name} SELECT DISTINCT n.* FROM _bh_new_labels AS n "
            f"WHERE NOT EXISTS (SELECT 1 FROM {name} AS l WHERE l.{column} = n.{column} "
            "AND l.key = n.key AND l.value = n.value)"
        )
    finally:
        con.unregister("_bh_new_labels")


def _derive_batch(con: duckdb.DuckDBPyConnection, module_ids: list[int]) -> None:
    """The batch's derived rows, in its transaction: ids grow past every stored id,
    so [min, max] holds exactly this batch and the scans skip older row groups."""
    derive(con, min(module_ids), max(module_ids))
