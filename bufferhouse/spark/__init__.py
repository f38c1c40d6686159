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

The parts: `types` (Spark types of the tables, the row schemas and their
encodings), `executor` (parsing and dataset writing on the executors),
`driver` (module groups, tables, ingest, register, session) and `sql` (the
canned queries in Spark SQL).
"""

from __future__ import annotations

from bufferhouse.spark.driver import (
    ingest,
    module_groups,
    parsed_tables,
    read_dataset,
    register,
    register_tables,
    session,
)
from bufferhouse.spark.executor import decode_parsed, parse_batches, parse_rows, write_batches
from bufferhouse.spark.sql import query, query_sql
from bufferhouse.spark.types import (
    GROUP_SCHEMA,
    INGEST_SCHEMA,
    PARSED_SCHEMA,
    spark_schema,
    spark_type,
)

__all__ = [
    "GROUP_SCHEMA",
    "INGEST_SCHEMA",
    "PARSED_SCHEMA",
    "decode_parsed",
    "ingest",
    "module_groups",
    "parse_batches",
    "parse_rows",
    "parsed_tables",
    "query",
    "query_sql",
    "read_dataset",
    "register",
    "register_tables",
    "session",
    "spark_schema",
    "spark_type",
    "write_batches",
]
