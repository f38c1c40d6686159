"""A DuckDB warehouse made of views over a bufferhouse Parquet dataset.

Every table of the warehouse becomes a view with the same name, columns and
docs, reading the dataset's files where they are (a local directory, a glob of
several datasets, or a URL DuckDB can read). The views de-duplicate records
that several writers added (each copy has its own id) by the one rule of
schema/kinds.py: per hash the copy with the lowest run_id, only its children's
rows, and the labels of every copy on it. On top come the package's views and bh_* macros, so
every canned query runs on an export exactly as on a warehouse.

The attached file holds views and one real table, `schema_info` (with the
schema version and `attached_from`), so `bufferhouse query --db FILE` and the
duckdb shell open it like any warehouse. It stores the dataset's absolute
path: move the dataset and attach again.
"""

from __future__ import annotations

import glob
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from bufferhouse.errors import ExportError
from bufferhouse.export.dataset import (
    PARTITION,
    SCHEMA_FILE,
    check_schema_version,
    is_partitioned,
)
from bufferhouse.queries import install_macros
from bufferhouse.schema import SCHEMA_VERSION, TABLES, Table, quote_identifier, sql_string
from bufferhouse.schema.kinds import kept_rows_sql
from bufferhouse.schema.warehouse import open_connection

RAW_SCHEMA = "bh_parquet"
ATTACHED_KEY = "attached_from"


@dataclass
class AttachReport:
    db: str
    source: str
    modules: int = 0
    files: dict[str, int] = field(default_factory=dict)  # parquet files per table (local only)

    @property
    def empty_tables(self) -> list[str]:
        return [name for name, n in self.files.items() if n == 0]


def _is_url(source: str) -> bool:
    return "://" in source


def resolve_source(source: str | os.PathLike[str]) -> str:
    """The dataset location as stored in the views: absolute for local paths and globs."""
    text = os.fspath(source)
    if _is_url(text):
        return text.rstrip("/")
    return os.path.abspath(os.path.expanduser(text)).rstrip("/") or "/"


def _table_glob(source: str, table: Table) -> str:
    if is_partitioned(table):
        return f"{source}/{table.name}/*/*.parquet"
    return f"{source}/{table.name}/*.parquet"


def _count_files(source: str) -> dict[str, int]:
    if _is_url(source):
        return {t.name: -1 for t in TABLES}  # unknown: assume present
    return {t.name: len(glob.glob(_table_glob(source, t))) for t in TABLES}


def _check_source(source: str, files: dict[str, int]) -> None:
    if _is_url(source):
        return
    roots = [Path(p) for p in glob.glob(source) if os.path.isdir(p)]
    if not roots:
        raise ExportError(f"no dataset at {source}: no such directory")
    if files["modules"] == 0 and not any((r / SCHEMA_FILE).exists() for r in roots):
        raise ExportError(
            f"{source} is not a bufferhouse Parquet dataset (no modules/run_id=*/*.parquet); "
            "write one with 'bufferhouse export' or 'bufferhouse ingest --to-parquet'"
        )
    for root in roots:
        check_schema_version(root)


def _raw_view(source: str, table: Table, present: bool) -> str:
    name = f"{RAW_SCHEMA}.{quote_identifier(table.name)}"
    columns = list(table.column_names)
    if is_partitioned(table) and PARTITION not in columns:
        columns.append(PARTITION)
    if not present:
        types = {c.name: c.type for c in table.columns}
        nulls = ", ".join(
            f"CAST(NULL AS {types.get(c, 'BIGINT')}) AS {quote_identifier(c)}" for c in columns
        )
        return f"CREATE OR REPLACE VIEW {name} AS SELECT {nulls} WHERE false"
    path = sql_string(_table_glob(source, table))
    options = ", union_by_name = true"
    if is_partitioned(table):
        options += f", hive_partitioning = true, hive_types = {{'{PARTITION}': BIGINT}}"
    else:
        options += ", hive_partitioning = false"
    cols = ", ".join(quote_identifier(c) for c in columns)
    return f"CREATE OR REPLACE VIEW {name} AS SELECT {cols} FROM read_parquet({path}{options})"


def _table_view(table: Table) -> str:
    """The warehouse-named view: declared columns, one copy of each record (the dedup
    rule of schema/kinds.py, over the raw views of the files)."""
    name = quote_identifier(table.name)
    raw = f"{RAW_SCHEMA}.{quote_identifier(table.name)}"
    cols = ", ".join(f"r.{quote_identifier(c)}" for c in table.column_names)
    body = kept_rows_sql(table, lambda t: f"{RAW_SCHEMA}.{quote_identifier(t)}", quote_identifier)
    if body is None and is_partitioned(table):  # runs
        body = f"SELECT {cols} FROM {raw} AS r"
    elif body is None:  # reference tables: every dataset of a glob has the same rows
        body = f"SELECT DISTINCT {cols} FROM {raw} AS r"
    return f"CREATE OR REPLACE VIEW {name} AS {body}"


def install_views(con: duckdb.DuckDBPyConnection, source: str) -> AttachReport:
    """Create the dataset views, schema_info and the bh_* macros on `con`."""
    source = resolve_source(source)
    files = _count_files(source)
    _check_source(source, files)
    con.execute(f"CREATE SCHEMA IF NOT EXISTS {RAW_SCHEMA}")
    for table in TABLES:
        if table.name == "schema_info":
            continue
        con.execute(_raw_view(source, table, files[table.name] != 0))
    con.execute(
        "CREATE OR REPLACE TABLE schema_info (key VARCHAR NOT NULL, value VARCHAR NOT NULL)"
    )
    con.execute(
        "INSERT INTO schema_info VALUES ('schema_version', ?), (?, ?)",
        [str(SCHEMA_VERSION), ATTACHED_KEY, source],
    )
    for table in TABLES:
        if table.name == "schema_info":
            continue
        con.execute(_table_view(table))
        kind = "VIEW"
        con.execute(
            f"COMMENT ON {kind} {quote_identifier(table.name)} IS "
            f"{sql_string(table.doc + ' (view over ' + source + ')')}"
        )
        for c in table.columns:
            con.execute(
                f"COMMENT ON COLUMN {quote_identifier(table.name)}.{quote_identifier(c.name)} "
                f"IS {sql_string(c.doc)}"
            )
    install_macros(con)
    _check_module_ids(con, source)
    modules = con.execute("SELECT count(*) FROM modules").fetchall()[0][0]
    return AttachReport(":memory:", source, modules, files)


def _check_module_ids(con: duckdb.DuckDBPyConnection, source: str) -> None:
    """Refuse a dataset (or a glob of several) in which one module_id names two modules.

    Writers draw ids from the clock and 19 random bits and never repeat their
    own, so this should never happen; if it did, the views would mix two
    modules' rows, so say so instead.
    """
    clash = con.execute(
        f"SELECT module_id, min(content_hash), max(content_hash) FROM {RAW_SCHEMA}.modules "
        "GROUP BY module_id HAVING count(DISTINCT content_hash) > 1 ORDER BY module_id LIMIT 1"
    ).fetchall()
    if clash:
        module_id, first, second = clash[0]
        raise ExportError(
            f"{source}: module_id {module_id} names two different modules (content hashes "
            f"{first[:12]}... and {second[:12]}...). Module ids never repeat within a writer and "
            "should never collide across writers or datasets: please report this. Meanwhile "
            "attach the datasets separately, or ingest one of them again into a new dataset."
        )


def open_dataset(source: str | os.PathLike[str]) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection whose tables are views over the dataset."""
    con = duckdb.connect()
    try:
        install_views(con, os.fspath(source))
    except BaseException:
        con.close()
        raise
    return con


def _is_attached_file(path: str) -> bool:
    try:
        con = duckdb.connect(path, read_only=True)
    except duckdb.Error:
        return False
    try:
        row = con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'schema_info' "
            "AND schema_name = 'main'"
        ).fetchall()[0]
        if not row[0]:
            return False
        tables = con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE NOT internal AND table_name <> 'schema_info'"
        ).fetchall()[0][0]
        attached = con.execute(
            "SELECT count(*) FROM schema_info WHERE key = ?", [ATTACHED_KEY]
        ).fetchall()[0][0]
        return tables == 0 and attached > 0
    finally:
        con.close()


def attach(source: str | os.PathLike[str], db: str | os.PathLike[str]) -> AttachReport:
    """Write `db`: a small DuckDB file of views over the dataset at `source`.

    An existing `db` is replaced only if an earlier attach made it; a real
    warehouse (or any other DuckDB file) is refused, never overwritten.
    """
    path = os.fspath(db)
    if os.path.exists(path) and not _is_attached_file(path):
        raise ExportError(
            f"{path} exists and is not a file made by 'bufferhouse attach' (a warehouse with "
            "tables, or another file); choose another --db"
        )
    tmp = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        con = open_connection(tmp, read_only=False)
        try:
            report = install_views(con, os.fspath(source))
            con.execute("CHECKPOINT")
        finally:
            con.close()
        os.replace(tmp, path)
    finally:
        for leftover in (tmp, tmp + ".wal"):
            if os.path.exists(leftover):
                os.remove(leftover)
    report.db = path
    return report
