"""Export stage: Parquet datasets, DuckDB views over them, queries for other engines.

The last stage before the CLI: it reads the warehouse and the canned queries
and never the other way round (schema -> ingest -> queries -> export -> cli).

- `export_warehouse(out_dir, db=...)`: a warehouse as a Hive-partitioned
  Parquet dataset, one directory per table.
- `ingest_to_parquet(paths, out_dir)`: parse dumps straight into such a
  dataset; many processes or machines may write one dataset at once.
- `attach(source, db=...)`: DuckDB views (and the bh_* macros) over a dataset.
- `hive_partitioning()`: the datasets' typed partitioning (run_id BIGINT), for
  pyarrow and pandas, which infer a large partition value as text.
- `transpile(name, dialect)`: a canned query in Spark, Trino, BigQuery or
  Postgres SQL.
"""

from bufferhouse.export.attach import AttachReport, attach, open_dataset
from bufferhouse.export.dataset import hive_partitioning
from bufferhouse.export.parquet import (
    ExportReport,
    PartWriter,
    export_warehouse,
    ingest_to_parquet,
)
from bufferhouse.export.reading import read_table
from bufferhouse.export.transpile import DIALECTS, Transpiled, transpile

__all__ = [
    "DIALECTS",
    "AttachReport",
    "ExportReport",
    "PartWriter",
    "Transpiled",
    "attach",
    "export_warehouse",
    "hive_partitioning",
    "ingest_to_parquet",
    "open_dataset",
    "read_table",
    "transpile",
]
