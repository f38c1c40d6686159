"""What runs on the driver: list module groups, assemble the warehouse tables from
parsed rows, start a dataset ingest, read a dataset back, register temp views,
and a local session for notebooks and tests."""

from __future__ import annotations

import glob
import itertools
import json
import os
import socket
import sys
import uuid
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import sqlglot

from bufferhouse.export.dataset import is_partitioned, table_schema, write_metadata_files
from bufferhouse.export.parquet import known_module_ids
from bufferhouse.load import parse_labels
from bufferhouse.parse.discover import ModuleFiles, discover, text_path
from bufferhouse.schema import (
    SCHEMA_VERSION,
    TABLES,
    TABLES_BY_NAME,
    Table,
)
from bufferhouse.schema.kinds import KINDS, MODULE, kept_rows_sql
from bufferhouse.schema.tables import MEMORY_SPACE_NAMES
from bufferhouse.spark.executor import decoder, write_batches
from bufferhouse.spark.types import (
    FAILURE,
    GROUP_FIELDS,
    GROUP_SCHEMA,
    INGEST_SCHEMA,
    MODULE_ROW,
    group_row,
    pyspark_modules,
    spark_schema,
)
from bufferhouse.version import __version__

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession


def module_groups(
    spark: SparkSession, paths: Iterable[str | os.PathLike[str]], partitions: int | None = None
) -> DataFrame:
    """A DataFrame of module file groups (discovered on the driver), spread over partitions.

    Discovery lists directories and reads file names (and, of an XProf profile,
    the plane metadata that names its programs); the executors read and parse
    the files. A profile's programs stay in one partition where that keeps the
    partitions about even (see spread): a task reads all its programs of a
    profile in one pass over it.
    """
    groups = discover([os.fspath(p) for p in paths])
    n = partitions or max(1, spark.sparkContext.defaultParallelism)
    slices = [
        [tuple(r[c] for c in (*GROUP_FIELDS, "problems")) for r in map(group_row, part)]
        for part in spread(groups, n)
    ]
    # n slices into n partitions: one slice each, in order
    rdd = spark.sparkContext.parallelize(slices, n).flatMap(iter)
    return spark.createDataFrame(rdd, GROUP_SCHEMA)


def spread(groups: Sequence[ModuleFiles], n: int) -> list[list[ModuleFiles]]:
    """`groups` in order in `n` slices about as even as Spark's own (`parallelize`), but
    cut between profiles, not between the programs of one: each task that meets a
    profile reads it once (executor.with_programs), so a profile cut in k is read k
    times, whatever its programs. A profile with more programs than a slice holds is
    cut in as few nearly even pieces as fit, so that one profile still spreads over
    the executors. Without profiles the slices are Spark's; with them, a slice holds the
    even share give or take a piece."""
    n = max(1, n)
    share = max(1, -(-len(groups) // n))
    pieces: list[list[ModuleFiles]] = []
    for _, run in itertools.groupby(groups, key=lambda g: g.xplane or id(g)):
        members = list(run)
        k = -(-len(members) // share)  # pieces of at most a share each
        step, extra = divmod(len(members), k)
        start = 0
        for i in range(k):
            end = start + step + (i < extra)
            pieces.append(members[start:end])
            start = end
    slices: list[list[ModuleFiles]] = [[] for _ in range(n)]
    done = 0
    for piece in pieces:  # into the slice Spark would put the piece's middle group in:
        middle = done + (len(piece) - 1) // 2  # slice i holds [i*len//n, (i+1)*len//n)
        slices[-(-(middle + 1) * n // len(groups)) - 1].extend(piece)
        done += len(piece)
    return slices


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
    functions, _ = pyspark_modules()
    spark = parsed.sparkSession
    label_pairs = list(labels.items()) if isinstance(labels, dict) else parse_labels(labels)
    run_id = run_id if run_id is not None else int(datetime.now(timezone.utc).timestamp() * 1e6)
    ok = _kept_copies(parsed.filter(functions.col("status") == "parsed"))
    out: dict[str, DataFrame] = {}
    for table in (TABLES_BY_NAME["modules"], *MODULE.children):
        rows = ok.filter(functions.col("table") == table.name).select("data")
        df = rows.mapInArrow(decoder(table), spark_schema(table))
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
    # Executors parse module groups, not logs: the OOM tables come out empty, with their columns.
    for table in TABLES:
        if table.name not in out:
            out[table.name] = spark.createDataFrame([], spark_schema(table))
    return {t.name: out[t.name] for t in TABLES}


def _kept_copies(parsed: DataFrame) -> DataFrame:
    """The rows of one copy per content hash (lowest module_id), each table once."""
    functions, _ = pyspark_modules()
    kept = (
        parsed.filter(functions.col("table") == MODULE_ROW)
        .groupBy("content_hash")
        .agg(functions.min("module_id").alias("module_id"))
    )
    return parsed.join(kept, ["content_hash", "module_id"], "left_semi").dropDuplicates(
        ["content_hash", "table"]
    )


def _diagnostics(parsed: DataFrame, kept: DataFrame, run_id: int) -> DataFrame:
    """Errors of failed modules and warnings of the kept copies (`kept`)."""
    functions, _ = pyspark_modules()
    schema = table_schema(TABLES_BY_NAME["diagnostics"])

    def rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            out = []
            for r in batch.to_pylist():
                if r["table"] == FAILURE and r["message"]:
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

    failures = parsed.filter(functions.col("table") == FAILURE).dropDuplicates(
        ["content_hash", "table"]
    )
    notes = failures.unionByName(kept.filter(functions.col("table") == MODULE_ROW))
    return notes.mapInArrow(rows, spark_schema(TABLES_BY_NAME["diagnostics"]))


def _reference_tables(spark: SparkSession) -> dict[str, DataFrame]:
    return {
        "memory_spaces": spark.createDataFrame(
            list(MEMORY_SPACE_NAMES), spark_schema(TABLES_BY_NAME["memory_spaces"])
        ),
        "schema_info": spark.createDataFrame(
            [("schema_version", str(SCHEMA_VERSION))], spark_schema(TABLES_BY_NAME["schema_info"])
        ),
    }


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
    root = Path(os.fspath(out_dir)).absolute()
    root.mkdir(parents=True, exist_ok=True)
    write_metadata_files(root)
    func = write_batches(str(root), labels, known_module_ids(root))
    summary = groups.mapInArrow(func, INGEST_SCHEMA)
    return summary.localCheckpoint(eager=True)


def read_dataset(spark: SparkSession, root: str | os.PathLike[str]) -> dict[str, DataFrame]:
    """The tables of a Parquet dataset as DataFrames, each record once: the dedup rule
    of schema/kinds.py (per hash the copy with the lowest run_id, then id; the labels
    of every copy on it), transpiled to Spark SQL over temp views of the files."""
    root = os.fspath(root).rstrip("/")
    tag = uuid.uuid4().hex[:8]
    raw: dict[str, DataFrame] = {}
    for table in TABLES:
        schema = spark_schema(table, partition=True)
        path = f"{root}/{table.name}"
        if _has_files(path):
            raw[table.name] = spark.read.schema(schema).parquet(path)
        else:
            raw[table.name] = spark.createDataFrame([], schema)
    views = {f"_bh_raw_{tag}_{name}": df for name, df in raw.items()}
    for view, df in views.items():
        df.createOrReplaceTempView(view)

    def kept_rows(table: Table) -> DataFrame | None:
        sql = kept_rows_sql(table, f"_bh_raw_{tag}_{{}}".format, f"_bh_kept_{tag}_{{}}".format)
        if sql is None:
            return None
        return spark.sql(sqlglot.transpile(sql, read="duckdb", write="spark")[0])

    out: dict[str, DataFrame] = {}
    for kind in KINDS:  # the kept copies first: the other tables' rules read them
        out[kind.table.name] = kept_rows(kind.table)
        views[f"_bh_kept_{tag}_{kind.table.name}"] = out[kind.table.name]
        out[kind.table.name].createOrReplaceTempView(f"_bh_kept_{tag}_{kind.table.name}")
    for table in TABLES:
        if table.name in out:
            continue
        df = kept_rows(table)
        if df is None:
            df = raw[table.name] if is_partitioned(table) else raw[table.name].distinct()
        out[table.name] = df.select(*table.column_names)
    for view in views:  # the DataFrames hold their analysed plans, not the names
        spark.catalog.dropTempView(view)
    return {table.name: out[table.name] for table in TABLES}


def _has_files(path: str) -> bool:
    if "://" in path:
        return True
    return bool(glob.glob(f"{path}/*.parquet") or glob.glob(f"{path}/*/*.parquet"))


def register_tables(spark: SparkSession, tables: dict[str, DataFrame]) -> list[str]:
    """Register DataFrames as temp views named like the warehouse tables."""
    for name, df in tables.items():
        df.createOrReplaceTempView(name)
    return list(tables)


def register(spark: SparkSession, root: str | os.PathLike[str]) -> list[str]:
    """Register a Parquet dataset's tables as Spark temp views (see read_dataset)."""
    return register_tables(spark, read_dataset(spark, root))


def session(master: str = "local[2]", app_name: str = "bufferhouse", **conf: str) -> SparkSession:
    """A SparkSession whose Python workers run this interpreter (so they have bufferhouse).

    For a real cluster, build your own session; executors need bufferhouse installed.
    """
    pyspark_modules()  # a clear MissingExtraError first
    from pyspark.sql import SparkSession  # deferred: pyspark is the optional `spark` extra

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
