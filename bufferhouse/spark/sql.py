"""The canned queries in Spark SQL: transpiled from DuckDB, parameters bound."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bufferhouse import queries
from bufferhouse.export.transpile import transpile

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession


def query_sql(name: str, **params: Any) -> tuple[str, dict[str, Any]]:
    """A canned query as Spark SQL and its bound arguments (defaults filled in)."""
    q = queries.get(name)
    values = q.bind(params)
    sql = transpile(q.name, "spark", pretty=False).sql
    return sql, {k: values[k] for k in q.used_params()}


def query(spark: SparkSession, name: str, **params: Any) -> DataFrame:
    """Run a canned query on the registered tables; parameters are bound, not spliced."""
    sql, args = query_sql(name, **params)
    return spark.sql(sql, args=args)
