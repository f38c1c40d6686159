"""Write and read bufferhouse Parquet datasets (layout: bufferhouse.export.dataset).

Two writers produce the same layout:

- `export_warehouse` copies a warehouse (read-only) into a new dataset, one
  streaming pass per table, and moves the finished dataset into place at the
  end, so an interrupted export leaves nothing at OUT_DIR.
- `PartWriter` (used by `ingest_to_parquet` and the Spark executors) buffers
  parsed modules and writes them as part files that no other writer can name
  alike, so any number of processes on any number of machines can fill one
  dataset without a lock. Each file is written under a hidden temporary name
  and renamed; the `modules` file of a part is renamed last, so a module is
  visible only once all its rows are.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from bufferhouse.errors import ExportError
from bufferhouse.export import runtime
from bufferhouse.export.dataset import (
    PARQUET_OPTIONS,
    PARTITION,
    SCHEMA_FILE,
    check_schema_version,
    file_columns,
    file_schema,
    hive_partitioning,
    is_partitioned,
    part_token,
    partition_dir,
    resolve_tables,
    write_metadata_files,
)
from bufferhouse.export.reading import known_event_ids, known_module_ids, known_snapshot_ids
from bufferhouse.load import (
    IngestReport,
    ModuleOutcome,
    ingest_into,
    new_run_id,
    parse_labels,
    run_record,
)
from bufferhouse.load.targets import target_rows
from bufferhouse.load.writer import Batch, ModuleBuffer
from bufferhouse.parse.sources import discover_all
from bufferhouse.schema import (
    SCHEMA_VERSION,
    TABLES_BY_NAME,
    Table,
    quote_identifier,
)
from bufferhouse.schema.derive import derived_tables
from bufferhouse.schema.kinds import KINDS, MODULE, Kind
from bufferhouse.schema.tables import MEMORY_SPACE_NAMES
from bufferhouse.schema.warehouse import connect

#: Rows per Parquet file and per row group when exporting a warehouse.
ROWS_PER_FILE = 8_000_000
ROWS_PER_GROUP = 512 * 1024


@dataclass
class ExportReport:
    out_dir: str
    tables: dict[str, int] = field(default_factory=dict)  # rows written per table
    modules: int = 0
    runs: int = 0
    files: int = 0
    bytes_written: int = 0
    seconds: float = 0.0


def _prepare_target(out_dir: Path, overwrite: bool) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise ExportError(f"{out_dir} exists and is not a directory")
    if out_dir.is_dir() and any(out_dir.iterdir()):
        if not overwrite:
            raise ExportError(
                f"{out_dir} already exists and is not empty; pass --overwrite to replace "
                "an earlier export, or choose a new directory"
            )
        if not (out_dir / SCHEMA_FILE).exists():
            raise ExportError(
                f"{out_dir} is not a bufferhouse export (no {SCHEMA_FILE}); refusing to "
                "replace it even with --overwrite"
            )


def _chosen_modules_sql(labels: list[tuple[str, str]]) -> tuple[str, list]:
    """SQL selecting (module_id, run_id) of the modules to export, and its parameters."""
    sql = "SELECT module_id, run_id FROM modules"
    conditions = ["module_id IN (SELECT module_id FROM labels WHERE key = ? AND value = ?)"]
    if labels:
        sql += " WHERE " + " AND ".join(conditions * len(labels))
    return sql, [x for pair in labels for x in pair]


def _chosen_events_sql(labels: int) -> str:
    """SQL selecting (event_id, run_id) of the OOM events to export: those carrying every
    label, `labels` (key, value) pairs bound like the modules' (_chosen_modules_sql)."""
    sql = "SELECT event_id, run_id FROM oom_events"
    condition = "event_id IN (SELECT event_id FROM oom_labels WHERE key = ? AND value = ?)"
    if labels:
        sql += " WHERE " + " AND ".join([condition] * labels)
    return sql


def _select_sql(table: Table, chosen: str, everything: bool) -> str:
    """Rows of `table` to export (partitioned ones with their run_id last).

    Per-module rows go to the partition of their module's run. `runs` and the
    module-less `diagnostics` (modules that failed) go along only when no label
    filter narrows the export (`everything`).
    """
    name = quote_identifier(table.name)
    cols = ", ".join(f"t.{quote_identifier(c)}" for c in file_columns(table))
    if not is_partitioned(table):
        return f"SELECT {cols} FROM {name} AS t"
    every = "TRUE" if everything else "FALSE"
    events = _chosen_events_sql(chosen.count("?") // 2)
    snapshots = runtime.chosen_snapshots_sql(chosen.count("?") // 2)
    if table.name == "runs":
        return (
            f"SELECT {cols}, t.run_id AS {PARTITION} FROM {name} AS t "
            f"WHERE {every} OR t.run_id IN (SELECT run_id FROM ({chosen})) "
            f"OR t.run_id IN (SELECT run_id FROM ({events})) "
            f"OR t.run_id IN (SELECT run_id FROM ({snapshots}))"
        )
    if table.name in runtime.TABLES:
        return runtime.export_sql(table.name, cols, chosen.count("?") // 2)
    if table.name == "diagnostics":
        return (
            f"SELECT {cols}, t.run_id AS {PARTITION} FROM {name} AS t "
            f"WHERE (t.module_id IS NULL AND t.event_id IS NULL AND {every}) "
            f"OR t.module_id IN (SELECT module_id FROM ({chosen})) "
            f"OR t.event_id IN (SELECT event_id FROM ({events}))"
        )
    if table.name == "oom_events":
        return (
            f"SELECT {cols}, t.run_id AS {PARTITION} FROM {name} AS t "
            f"WHERE t.event_id IN (SELECT event_id FROM ({events}))"
        )
    if table.name in ("oom_buffers", "oom_labels"):
        return (
            f"SELECT {cols}, c.run_id AS {PARTITION} FROM {name} AS t "
            f"JOIN ({events}) AS c ON c.event_id = t.event_id"
        )
    return (
        f"SELECT {cols}, c.run_id AS {PARTITION} FROM {name} AS t "
        f"JOIN ({chosen}) AS c ON c.module_id = t.module_id"
    )


def export_warehouse(
    out_dir: str | os.PathLike[str],
    db: str | os.PathLike[str] | None = None,
    *,
    labels: Iterable[str] | dict[str, str] = (),
    tables: list[str] | None = None,
    overwrite: bool = False,
    rows_per_file: int = ROWS_PER_FILE,
) -> ExportReport:
    """Write the warehouse `db` (opened read-only) as a Parquet dataset at `out_dir`.

    `labels` keeps only modules that carry every given label; `tables` limits
    the tables (modules is always written: the others join to it for their run).
    An existing non-empty `out_dir` is refused unless `overwrite`, and even then
    only if it is a bufferhouse export.
    """
    started = time.monotonic()
    target = Path(os.fspath(out_dir)).absolute()
    label_pairs = parse_labels(labels)
    chosen_tables = resolve_tables(tables)
    _prepare_target(target, overwrite)
    target.parent.mkdir(parents=True, exist_ok=True)
    con = connect(db, read_only=True)
    staging = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
    report = ExportReport(str(target))
    token = part_token()
    try:
        staging.mkdir()
        chosen, chosen_params = _chosen_modules_sql(label_pairs)
        report.modules, report.runs = con.execute(
            f"SELECT count(*), count(DISTINCT run_id) FROM ({chosen})", chosen_params
        ).fetchall()[0]
        (first_run,) = con.execute(
            f"SELECT coalesce((SELECT min(run_id) FROM ({chosen})), "
            "(SELECT min(run_id) FROM runs), 0)",
            chosen_params,
        ).fetchall()[0]
        for table in chosen_tables:
            sql = _select_sql(table, chosen, everything=not label_pairs)
            # the label pairs, once per selection (of modules, of events) the SQL holds
            uses = sql.count("?") // len(chosen_params) if chosen_params else 0
            params = list(chosen_params) * uses if is_partitioned(table) else []
            reader = _arrow_reader(con.sql(sql, params=params))
            rows = _write_table(staging, table, reader, token, rows_per_file)
            if rows == 0 and is_partitioned(table):
                write_empty(staging, table, first_run, token)
            report.tables[table.name] = rows
        write_metadata_files(staging)
        report.files, report.bytes_written = _tally(staging)
        _move_into_place(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        con.close()
    report.seconds = time.monotonic() - started
    return report


def _arrow_reader(relation) -> pa.RecordBatchReader:
    """The relation as a batch stream (the method name differs across DuckDB releases)."""
    fetch = getattr(relation, "to_arrow_reader", None) or relation.fetch_arrow_reader
    return fetch(64 * 1024)


def _write_table(
    root: Path, table: Table, reader: pa.RecordBatchReader, token: str, rows_per_file: int
) -> int:
    schema = file_schema(table)
    base = root / table.name
    base.mkdir(parents=True, exist_ok=True)
    if not is_partitioned(table):
        data = reader.read_all().cast(schema)
        pq.write_table(data, base / f"{table.name}.parquet", **PARQUET_OPTIONS)
        return data.num_rows
    with_partition = schema.append(pa.field(PARTITION, pa.int64(), nullable=False))
    rows = 0

    def batches():
        nonlocal rows
        for batch in reader:
            rows += batch.num_rows
            yield pa.RecordBatch.from_arrays(
                [
                    col.cast(f.type) if col.type != f.type else col
                    for col, f in zip(batch.columns, with_partition)
                ],
                schema=with_partition,
            )

    pads.write_dataset(
        pa.RecordBatchReader.from_batches(with_partition, batches()),
        base,
        format="parquet",
        partitioning=hive_partitioning(),
        basename_template=f"{token}-{{i}}.parquet",
        file_options=pads.ParquetFileFormat().make_write_options(
            compression=PARQUET_OPTIONS["compression"],
            compression_level=PARQUET_OPTIONS["compression_level"],
        ),
        max_rows_per_file=rows_per_file,
        max_rows_per_group=min(ROWS_PER_GROUP, rows_per_file),
        min_rows_per_group=min(ROWS_PER_GROUP, rows_per_file) // 4,
        existing_data_behavior="overwrite_or_ignore",
        create_dir=True,
    )
    return rows


def write_empty(root: Path, table: Table, run_id: int, token: str) -> None:
    """A Parquet file with the table's columns and no rows, in the partition of `run_id`.

    A table without rows is still a table: an empty folder left every reader
    without its columns (polars refused it, pyarrow and pandas gave zero columns).
    """
    directory = partition_dir(root, table, run_id)
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"{token}-empty.parquet"
    tmp = directory / f".{token}-empty.parquet.tmp"
    pq.write_table(file_schema(table).empty_table(), tmp, **PARQUET_OPTIONS)
    os.replace(tmp, final)


def _tally(root: Path) -> tuple[int, int]:
    files = [p for p in root.rglob("*.parquet") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def _move_into_place(staging: Path, target: Path) -> None:
    old = None
    if target.exists():
        old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
        os.rename(target, old)
    os.rename(staging, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


# --- writing parts -------------------------------------------------------------


def _rows(table_name: str, rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=file_schema(TABLES_BY_NAME[table_name]))


def reserve_run(root: Path, run_id: int | None = None) -> int:
    """Claim a run_id no other writer of this dataset holds (mkdir is atomic).

    Run ids are microseconds since the epoch; two writers starting in the same
    microsecond both try to create runs/run_id=N, and the loser takes N+1.
    """
    run_id = new_run_id() if run_id is None else run_id
    runs = root / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    while True:
        try:
            (runs / f"{PARTITION}={run_id}").mkdir()
            return run_id
        except FileExistsError:
            run_id += 1


class PartWriter(ModuleBuffer):
    """Writes buffered modules to a dataset as part files (the warehouse-free sink).

    Driven by the same ingest loop as the warehouse's ModuleWriter
    (`bufferhouse.load.run_batches`). A flush writes one file per table
    (named by a token unique to this writer and a counter), the `modules` file
    last. `held`: the dataset's modules (`known_module_ids`), skipped and only
    labelled if met again.
    """

    def __init__(
        self,
        root: Path,
        run_id: int,
        labels: list[tuple[str, str]],
        max_modules: int = 4096,
        max_rows: int = 4_000_000,
        token: str | None = None,
        held: Mapping[str, int] | None = None,
        held_events: Mapping[str, int] | None = None,
        held_snapshots: Mapping[str, int] | None = None,
    ) -> None:
        super().__init__(run_id, labels, max_modules, max_rows, held, held_events, held_snapshots)
        self.root = root
        self.token = token or part_token()
        self._parts = 0
        self.files_written = 0

    def start(self, roots: list[str]) -> None:
        """The run's own row, and the reference tables (identical from every writer)."""
        run = run_record(self.run_id, roots, self.labels)
        self._write("runs", [_rows("runs", [run])], f"{self.token}-run")
        spaces = [
            dict(zip(("backend", "color", "name", "description"), row))
            for row in MEMORY_SPACE_NAMES
        ]
        self._write("memory_spaces", [_rows("memory_spaces", spaces)], "memory_spaces")
        info = [{"key": "schema_version", "value": str(SCHEMA_VERSION)}]
        self._write("schema_info", [_rows("schema_info", info)], "schema_info")
        write_metadata_files(self.root)

    def finish(self) -> None:
        """After the last batch: a table of the dataset that has no file yet gets one
        without rows (readers learn its columns from it), in this run's partition."""
        for table in TABLES_BY_NAME.values():
            base = self.root / table.name
            if is_partitioned(table) and next(base.rglob("*.parquet"), None) is None:
                write_empty(self.root, table, self.run_id, self.token)

    def write(self, batch: Batch) -> int:
        if batch.empty:
            return 0
        name = f"{self.token}-{self._parts:05d}"
        self._parts += 1
        if batch.diagnostics:
            self._write("diagnostics", [_rows("diagnostics", batch.diagnostics)], name)
        for kind in KINDS:
            self._write_kind(batch, kind, name)
        return len(batch.modules)

    def _write_kind(self, batch: Batch, kind: Kind, name: str) -> None:
        """The batch's records of one kind: children, labels, and the kind's own rows last,
        so that a record becomes visible with all its rows in place."""
        records = batch.records[kind.name]
        tables = dict(batch.kind_rows(kind))
        own = tables.pop(kind.table.name, None)
        for table_name, data in tables.items():
            self._write(table_name, [data], name)
        if kind is MODULE and batch.modules:
            for table_name, rows in derived_tables(tables).items():
                if rows.num_rows:
                    self._write(table_name, [rows], name)
            targets = target_rows((m["module_id"], m["paths"]) for m in batch.modules)
            if targets:  # the files beside the dumps, read as ingest reads them
                self._write("module_targets", [_rows("module_targets", targets)], name)
        label_rows = records.label_rows(kind, self.labels) + [
            {kind.id_column: i, "key": k, "value": v}
            for i in records.present
            for k, v in self.labels
        ]
        if label_rows:
            self._write(kind.labels.name, [_rows(kind.labels.name, label_rows)], name)
        if own is not None:
            self._write(kind.table.name, [own], name)

    def _write(self, table_name: str, parts: list[pa.Table], name: str) -> None:
        table = TABLES_BY_NAME[table_name]
        schema = file_schema(table)
        data = pa.concat_tables(
            [p.select(schema.names).cast(schema) if p.schema != schema else p for p in parts]
        )
        directory = partition_dir(self.root, table, self.run_id)
        directory.mkdir(parents=True, exist_ok=True)
        final = directory / f"{name}.parquet"
        tmp = directory / f".{name}.parquet.{self.token}.tmp"  # hidden from readers' globs
        pq.write_table(data, tmp, row_group_size=ROWS_PER_GROUP, **PARQUET_OPTIONS)
        os.replace(tmp, final)
        self.files_written += 1


def ingest_to_parquet(
    paths: Iterable[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str],
    *,
    labels: Iterable[str] | dict[str, str] = (),
    strict: bool = False,
    jobs: int | None = None,
    max_bytes: int | None = None,
    progress: Callable[[ModuleOutcome, int, int], None] | None = None,
    max_modules: int = 4096,
    max_rows: int = 4_000_000,
) -> IngestReport:
    """Parse dump trees straight into a Parquet dataset at `out_dir` (no warehouse).

    Any number of these may write into one dataset at once, from any number of
    machines sharing the directory: each claims its own run_id and writes
    uniquely named part files. Modules whose content hash the dataset already
    holds are skipped; one that two writers add at once is kept twice (under
    two module ids) and de-duplicated by content_hash by the readers (attach,
    spark.register).
    """
    started = time.monotonic()
    paths = [os.fspath(p) for p in paths]
    label_pairs = parse_labels(labels)
    root = Path(os.fspath(out_dir)).absolute()
    if root.exists() and not root.is_dir():
        raise ExportError(f"{root} exists and is not a directory")
    root.mkdir(parents=True, exist_ok=True)
    check_schema_version(root)
    groups = discover_all(paths)
    writer = PartWriter(
        root,
        reserve_run(root),
        label_pairs,
        max_modules=max_modules,
        max_rows=max_rows,
        held=known_module_ids(root),
        held_events=known_event_ids(root),
        held_snapshots=known_snapshot_ids(root),
    )
    writer.start(paths)
    report = ingest_into(
        writer,
        groups,
        str(root),
        started,
        jobs=jobs,
        max_bytes=max_bytes,
        strict=strict,
        progress=progress,
    )
    writer.finish()
    return report
