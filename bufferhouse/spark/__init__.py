"""bufferhouse on Apache Spark: parse dumps on the executors, run canned queries in Spark SQL.

Needs `pip install 'bufferhouse[spark]'` on the driver and on every executor
(the executors run bufferhouse's parser). Nothing here is a cluster of our
own: Spark schedules, bufferhouse parses and writes the same tables as a
local ingest.

Ingest a fleet on the cluster into a Parquet dataset, then query it::

    from bufferhouse import spark as bhs
    spark = bhs.session()                      # or your own SparkSession
    groups = bhs.module_groups(spark, ["/mnt/dumps"], partitions=200)
    summary = bhs.ingest(groups, "/mnt/fleet-parquet", labels={"run": "nightly"})
    bhs.register(spark, "/mnt/fleet-parquet")  # temp views named like the tables
    bhs.query(spark, "top-modules", top=20).show()

Or keep the parsed tables in Spark without writing them::

    parsed = groups.mapInArrow(bhs.parse_batches, bhs.PARSED_SCHEMA)
    bhs.register_tables(spark, bhs.parsed_tables(parsed))

The dump paths and the output directory must be readable (writable) by every
executor under the same name: a shared file system or a mounted bucket.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from bufferhouse.errors import DumpError, MissingExtraError
from bufferhouse.export.dataset import PARTITION, is_partitioned, table_schema
from bufferhouse.export.transpile import transpile
from bufferhouse.load import parse_labels
from bufferhouse.load.writer import with_module_id
from bufferhouse.parse import parse_files
from bufferhouse.parse.discover import ModuleFiles, discover
from bufferhouse.schema import DERIVED_TABLES, MODULE_TABLES, TABLES, TABLES_BY_NAME, Table
from bufferhouse.schema.ids import ModuleIds
from bufferhouse.version import __version__

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession


def _pyspark():
    try:
        import pyspark  # noqa: F401
        from pyspark.sql import functions, window
    except ImportError:
        raise MissingExtraError("pyspark", "spark", "bufferhouse.spark") from None
    return functions, window


# --- types -----------------------------------------------------------------------

_SPARK_SCALARS = {
    "BIGINT": "bigint",
    "INTEGER": "int",
    "DOUBLE": "double",
    "BOOLEAN": "boolean",
    "VARCHAR": "string",
    "TIMESTAMP": "timestamp_ntz",  # DuckDB TIMESTAMP has no time zone
}


def spark_type(duckdb_type: str) -> str:
    """Spark SQL type of a declared column type."""
    if duckdb_type.endswith("[]"):
        return f"array<{spark_type(duckdb_type[:-2])}>"
    if duckdb_type.startswith("MAP("):
        key, value = (p.strip() for p in duckdb_type[4:-1].split(","))
        return f"map<{spark_type(key)},{spark_type(value)}>"
    return _SPARK_SCALARS[duckdb_type]


def spark_schema(table: Table, *, partition: bool = False) -> str:
    """DDL schema string of a table; with `partition`, plus run_id if it lacks one."""
    cols = [f"`{c.name}` {spark_type(c.type)}" for c in table.columns]
    if partition and is_partitioned(table) and PARTITION not in table.column_names:
        cols.append(f"`{PARTITION}` bigint")
    return ", ".join(cols)


# --- module groups ------------------------------------------------------------------

#: One row per module: the files `discover` grouped for it.
GROUP_SCHEMA = (
    "directory string, stem string, buffer_assignment string, `values` string, "
    "live_range string, usage_report string, hlo string, problems string"
)
_GROUP_FIELDS = (
    "directory",
    "stem",
    "buffer_assignment",
    "values",
    "live_range",
    "usage_report",
    "hlo",
)


def _group_row(files: ModuleFiles) -> dict:
    row = {name: getattr(files, name) for name in _GROUP_FIELDS}
    row["problems"] = json.dumps([[e.path, e.line, e.message, e.text] for e in files.problems])
    return row


def _group_of(row: dict) -> ModuleFiles:
    problems = [DumpError(*p) for p in json.loads(row.get("problems") or "[]")]
    return ModuleFiles(**{name: row.get(name) for name in _GROUP_FIELDS}, problems=problems)


def module_groups(
    spark: SparkSession, paths: Iterable[str | os.PathLike[str]], partitions: int | None = None
) -> DataFrame:
    """A DataFrame of module file groups (discovered on the driver), spread over partitions.

    Discovery only lists directories and reads file names; the executors read
    and parse the files.
    """
    groups = [_group_row(g) for g in discover([os.fspath(p) for p in paths])]
    n = partitions or max(1, spark.sparkContext.defaultParallelism)
    rdd = spark.sparkContext.parallelize(
        [tuple(r[c] for c in (*_GROUP_FIELDS, "problems")) for r in groups], n
    )
    return spark.createDataFrame(rdd, GROUP_SCHEMA)


# --- parsing on the executors ---------------------------------------------------------

#: One row per (module, table): that table's rows of the module as an Arrow IPC stream.
PARSED_SCHEMA = (
    "content_hash string, module_id bigint, status string, `table` string, "
    "message string, data binary"
)
#: Table name of the rows that carry the module row (modules) and failures.
_MODULE_ROW = "modules"
_FAILURE = "_failure"


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _unipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(data).read_all()


#: Module ids of the modules this process parses (created in the executor's process).
_ids: ModuleIds | None = None


def _next_module_id() -> int:
    global _ids
    if _ids is None:
        _ids = ModuleIds()
    return _ids.next()


def _derived(tables: dict[str, pa.Table]) -> dict[str, pa.Table]:
    """A parsed module's derived tables, by the warehouse writer's statements."""
    from bufferhouse.schema.derive import derived_tables

    return derived_tables(tables)


def parse_rows(files: ModuleFiles, known: frozenset[str] = frozenset()) -> Iterator[dict]:
    """Parse one module group; one row per table (see PARSED_SCHEMA). Never raises.

    A parsed module gets its module_id here, from this process's allocator: the
    same content parsed twice gets two ids, and the readers keep one copy.
    """
    result = parse_files(files, known)
    if result.status == "failed":
        e = result.error
        problem = json.dumps([e.path, e.line, e.message, e.text]) if e else None
        yield {
            "content_hash": result.content_hash,
            "module_id": None,
            "status": "failed",
            "table": _FAILURE,
            "message": problem,
            "data": None,
        }
        return
    if result.status == "present":  # its module_id is the holder's, unknown here
        yield {
            "content_hash": result.content_hash,
            "module_id": None,
            "status": "present",
            "table": _MODULE_ROW,
            "message": None,
            "data": None,
        }
        return
    module_id = _next_module_id()
    tables = {name: with_module_id(name, data, module_id) for name, data in result.tables.items()}
    counts = {name: data.num_rows for name, data in tables.items()}
    row = dict(result.module_row, module_id=module_id, row_counts=counts)
    modules = pa.Table.from_pylist([row], schema=table_schema(TABLES_BY_NAME["modules"]))
    warnings = json.dumps([[w.path, w.line, w.message, w.text] for w in result.warnings])
    yield {
        "content_hash": result.content_hash,
        "module_id": module_id,
        "status": "parsed",
        "table": _MODULE_ROW,
        "message": warnings,
        "data": _ipc(modules),
    }
    tables |= _derived(tables)
    for name, data in tables.items():
        if data.num_rows:
            yield {
                "content_hash": result.content_hash,
                "module_id": module_id,
                "status": "parsed",
                "table": name,
                "message": None,
                "data": _ipc(data),
            }


def _parsed_arrow_schema() -> pa.Schema:
    return pa.schema(
        [
            ("content_hash", pa.string()),
            ("module_id", pa.int64()),
            ("status", pa.string()),
            ("table", pa.string()),
            ("message", pa.string()),
            ("data", pa.binary()),
        ]
    )


def parse_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: module groups (GROUP_SCHEMA) in, parsed rows (PARSED_SCHEMA) out.

    Each output row holds one table of one module as Arrow IPC bytes: exactly
    the Arrow table a local ingest produces for it (`parsed_tables` decodes).
    """
    schema = _parsed_arrow_schema()
    for batch in batches:
        for row in batch.to_pylist():
            rows = list(parse_rows(_group_of(row)))
            yield pa.RecordBatch.from_pylist(rows, schema=schema)


def _decoder(table: Table):
    schema = table_schema(table)

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for data in batch.column("data").to_pylist():
                if data is not None:
                    yield from _unipc(data).cast(schema).to_batches()

    return decode


def decode_parsed(parsed: pa.Table) -> dict[str, pa.Table]:
    """Collected `parse_batches` output as the per-table Arrow tables of a local ingest.

    For small results on the driver (tests, notebooks); `parsed_tables` keeps
    them distributed. Modules parsed twice are kept once (the copy with the
    lowest module_id); run_id stays NULL.
    """
    rows = [r for r in parsed.to_pylist() if r["status"] == "parsed" and r["data"] is not None]
    kept: dict[str, int] = {}
    for row in rows:
        if row["table"] == _MODULE_ROW:
            kept[row["content_hash"]] = min(
                row["module_id"], kept.get(row["content_hash"], row["module_id"])
            )
    seen: set[tuple[str, str]] = set()
    parts: dict[str, list[pa.Table]] = {}
    for row in rows:
        key = (row["content_hash"], row["table"])
        if kept.get(row["content_hash"]) != row["module_id"] or key in seen:
            continue
        seen.add(key)
        parts.setdefault(row["table"], []).append(_unipc(row["data"]))
    out = {}
    for table in (TABLES_BY_NAME["modules"], *MODULE_TABLES, *DERIVED_TABLES):
        schema = table_schema(table)
        got = parts.get(table.name)
        out[table.name] = (
            pa.concat_tables([t.cast(schema) for t in got]) if got else schema.empty_table()
        )
    return out


def parsed_tables(
    parsed: DataFrame,
    *,
    run_id: int | None = None,
    labels: Iterable[str] | dict[str, str] = (),
) -> dict[str, DataFrame]:
    """The warehouse tables, as DataFrames, from `parse_batches` output.

    Modules parsed twice (the same content under two paths) are kept once:
    the copy with the lowest module_id. `run_id` (default: now) and `labels`
    play the part of one ingest run.
    """
    from datetime import datetime, timezone

    functions, _ = _pyspark()
    spark = parsed.sparkSession
    label_pairs = list(labels.items()) if isinstance(labels, dict) else parse_labels(labels)
    run_id = run_id if run_id is not None else int(datetime.now(timezone.utc).timestamp() * 1e6)
    ok = _kept_copies(parsed.filter(functions.col("status") == "parsed"))
    out: dict[str, DataFrame] = {}
    for table in (TABLES_BY_NAME["modules"], *MODULE_TABLES, *DERIVED_TABLES):
        rows = ok.filter(functions.col("table") == table.name).select("data")
        df = rows.mapInArrow(_decoder(table), spark_schema(table))
        if table.name == "modules":
            df = df.withColumn("run_id", functions.lit(run_id).cast("bigint"))
        out[table.name] = df
    module_ids = out["modules"].select("module_id")
    label_rows = [(k, v) for k, v in label_pairs]
    label_df = spark.createDataFrame(label_rows, "key string, value string")
    out["labels"] = module_ids.crossJoin(label_df).select("module_id", "key", "value")
    out["runs"] = spark.createDataFrame(
        [
            (
                run_id,
                datetime.now(timezone.utc).replace(tzinfo=None),
                [],
                [f"{k}={v}" for k, v in label_pairs],
                socket.gethostname(),
                __version__,
            )
        ],
        spark_schema(TABLES_BY_NAME["runs"]),
    )
    out["diagnostics"] = _diagnostics(parsed, ok, run_id)
    out.update(_reference_tables(spark))
    return {t.name: out[t.name] for t in TABLES}


def _kept_copies(parsed: DataFrame) -> DataFrame:
    """The rows of one copy per content hash (lowest module_id), each table once."""
    functions, _ = _pyspark()
    kept = (
        parsed.filter(functions.col("table") == _MODULE_ROW)
        .groupBy("content_hash")
        .agg(functions.min("module_id").alias("module_id"))
    )
    return parsed.join(kept, ["content_hash", "module_id"], "left_semi").dropDuplicates(
        ["content_hash", "table"]
    )


def _diagnostics(parsed: DataFrame, kept: DataFrame, run_id: int) -> DataFrame:
    """Errors of failed modules and warnings of the kept copies (`kept`)."""
    functions, _ = _pyspark()
    schema = table_schema(TABLES_BY_NAME["diagnostics"])
    from bufferhouse.parse.discover import text_path

    def rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            out = []
            for r in batch.to_pylist():
                if r["table"] == _FAILURE and r["message"]:
                    problems, module_id, severity = [json.loads(r["message"])], None, "error"
                elif r["message"]:
                    problems, module_id, severity = (
                        json.loads(r["message"]),
                        r["module_id"],
                        "warning",
                    )
                else:
                    continue
                for path, line, message, _text in problems:
                    out.append(
                        {
                            "run_id": run_id,
                            "module_id": module_id,
                            "path": text_path(path),
                            "line": line,
                            "severity": severity,
                            "message": message,
                        }
                    )
            yield pa.RecordBatch.from_pylist(out, schema=schema)

    failures = parsed.filter(functions.col("table") == _FAILURE).dropDuplicates(
        ["content_hash", "table"]
    )
    notes = failures.unionByName(kept.filter(functions.col("table") == _MODULE_ROW))
    return notes.mapInArrow(rows, spark_schema(TABLES_BY_NAME["diagnostics"]))


def _reference_tables(spark: SparkSession) -> dict[str, DataFrame]:
    from bufferhouse.schema import SCHEMA_VERSION
    from bufferhouse.schema.tables import MEMORY_SPACE_NAMES

    return {
        "memory_spaces": spark.createDataFrame(
            list(MEMORY_SPACE_NAMES), spark_schema(TABLES_BY_NAME["memory_spaces"])
        ),
        "schema_info": spark.createDataFrame(
            [("schema_version", str(SCHEMA_VERSION))], spark_schema(TABLES_BY_NAME["schema_info"])
        ),
    }


# --- writing a dataset from the executors ----------------------------------------------

#: One row per module group an `ingest` task handled.
INGEST_SCHEMA = "run_id bigint, stem string, status string, module_id bigint, message string"


def write_batches(
    out_dir: str,
    labels: Iterable[str] | dict[str, str] = (),
    known: Mapping[str, int] | None = None,
):
    """A mapInArrow function: module groups in, part files written to `out_dir`.

    Each task is one ingest run (it claims its own run_id) and writes its
    modules as part files, exactly as `bufferhouse ingest --to-parquet` does;
    it yields one INGEST_SCHEMA row per group. `known`: content_hash ->
    module_id of the modules the dataset holds (`known_module_ids`), only
    labelled if met again.
    """
    from pathlib import Path

    from bufferhouse.export.parquet import PartWriter, reserve_run

    label_pairs = list(labels.items()) if isinstance(labels, dict) else parse_labels(labels)
    held = dict(known or {})
    root = str(Path(out_dir).absolute())

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        path = Path(root)
        writer: PartWriter | None = None
        out = []
        directories: set[str] = set()
        for batch in batches:
            for row in batch.to_pylist():
                files = _group_of(row)
                directories.add(files.directory)
                if writer is None:
                    writer = PartWriter(path, reserve_run(path), label_pairs, held=held)
                result = parse_files(files, writer.module_ids)
                module_id = None
                message = None
                if result.status == "failed":
                    writer.add_failure(result.error)
                    message = result.error.describe() if result.error else None
                elif result.status == "present":
                    module_id = writer.add_labels(result.content_hash)
                else:
                    module_id = writer.add(result.module_row, result.tables, result.warnings)
                    result.status = "loaded"
                out.append((writer.run_id, files.stem, result.status, module_id, message))
                if writer.full:
                    writer.flush()
        if writer is not None:
            writer.flush()
            writer.start(sorted(directories))  # the run's row names the directories it read
        names = ("run_id", "stem", "status", "module_id", "message")
        yield pa.RecordBatch.from_pylist(
            [dict(zip(names, r)) for r in out],
            schema=pa.schema(
                [
                    ("run_id", pa.int64()),
                    ("stem", pa.string()),
                    ("status", pa.string()),
                    ("module_id", pa.int64()),
                    ("message", pa.string()),
                ]
            ),
        )

    return write


def ingest(
    groups: DataFrame,
    out_dir: str | os.PathLike[str],
    *,
    labels: Iterable[str] | dict[str, str] = (),
) -> DataFrame:
    """Parse `groups` (see module_groups) on the executors into the dataset `out_dir`.

    Returns the per-module summary (INGEST_SCHEMA), already computed. Modules
    the dataset holds are skipped; the dataset may be written by other jobs
    or `bufferhouse ingest --to-parquet` at the same time.
    """
    from pathlib import Path

    from bufferhouse.export.dataset import write_metadata_files
    from bufferhouse.export.parquet import known_module_ids

    root = Path(os.fspath(out_dir)).absolute()
    root.mkdir(parents=True, exist_ok=True)
    write_metadata_files(root)
    func = write_batches(str(root), labels, known_module_ids(root))
    summary = groups.mapInArrow(func, INGEST_SCHEMA)
    return summary.localCheckpoint(eager=True)


# --- querying ---------------------------------------------------------------------------


def read_dataset(spark: SparkSession, root: str | os.PathLike[str]) -> dict[str, DataFrame]:
    """The tables of a Parquet dataset as DataFrames, each module (content_hash) once:
    the copy with the lowest run_id, then module_id; labels of every copy on it."""
    functions, window = _pyspark()
    root = os.fspath(root).rstrip("/")
    raw: dict[str, DataFrame] = {}
    for table in TABLES:
        schema = spark_schema(table, partition=True)
        path = f"{root}/{table.name}"
        if _has_files(path):
            raw[table.name] = spark.read.schema(schema).parquet(path)
        else:
            raw[table.name] = spark.createDataFrame([], schema)
    order = window.Window.partitionBy("content_hash").orderBy("run_id", "module_id")
    modules = (
        raw["modules"]
        .withColumn("_bh_n", functions.row_number().over(order))
        .filter("_bh_n = 1")
        .drop("_bh_n")
    )
    keep = modules.select("module_id", "run_id")
    out: dict[str, DataFrame] = {}
    for table in TABLES:
        cols = table.column_names
        df = raw[table.name]
        if table.name == "modules":
            df = modules
        elif table.name == "labels":
            copies = raw["modules"].select("module_id", "content_hash")
            kept = modules.select(functions.col("module_id").alias("_bh_kept"), "content_hash")
            df = (
                df.join(copies, "module_id")
                .join(kept, "content_hash")
                .select(functions.col("_bh_kept").alias("module_id"), *cols[1:])
                .distinct()
            )
        elif table.name == "diagnostics":
            df = df.filter("module_id IS NULL").unionByName(
                df.join(keep, ["module_id", "run_id"], "left_semi")
            )
        elif table.per_module:
            df = df.join(keep, ["module_id", "run_id"], "left_semi")
        elif not is_partitioned(table):
            df = df.distinct()
        out[table.name] = df.select(*cols)
    return out


def _has_files(path: str) -> bool:
    if "://" in path:
        return True
    import glob

    return bool(glob.glob(f"{path}/*.parquet") or glob.glob(f"{path}/*/*.parquet"))


def register_tables(spark: SparkSession, tables: dict[str, DataFrame]) -> list[str]:
    """Register DataFrames as temp views named like the warehouse tables."""
    for name, df in tables.items():
        df.createOrReplaceTempView(name)
    return list(tables)


def register(spark: SparkSession, root: str | os.PathLike[str]) -> list[str]:
    """Register a Parquet dataset's tables as Spark temp views (see read_dataset)."""
    return register_tables(spark, read_dataset(spark, root))


def query_sql(name: str, **params: Any) -> tuple[str, dict[str, Any]]:
    """A canned query as Spark SQL and its bound arguments (defaults filled in)."""
    from bufferhouse import queries

    q = queries.get(name)
    values = q.bind(params)
    sql = transpile(q.name, "spark", pretty=False).sql
    return sql, {k: values[k] for k in q.used_params()}


def query(spark: SparkSession, name: str, **params: Any) -> DataFrame:
    """Run a canned query on the registered tables; parameters are bound, not spliced."""
    sql, args = query_sql(name, **params)
    return spark.sql(sql, args=args)


# --- a session for notebooks and tests ----------------------------------------------------


def session(master: str = "local[2]", app_name: str = "bufferhouse", **conf: str) -> SparkSession:
    """A SparkSession whose Python workers run this interpreter (so they have bufferhouse).

    For a real cluster, build your own session; executors need bufferhouse installed.
    """
    _pyspark()
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        **conf,
    }
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
