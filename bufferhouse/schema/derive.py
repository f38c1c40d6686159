"""Per-module values computed from a module's own rows, stored in the derived tables.

Fleet-wide queries would otherwise join assignments, allocations, live ranges and
hlo_values for every value of every module (tens of millions of rows) on each
run. The statements below are the one definition of those values (the heap-peak
membership rule among them: the heap_peak_values view reads the stored rows).
Every statement reads the base tables of the modules with ids in [$lo, $hi]
only, so the same SQL serves a warehouse write (a batch's ids grow past every
id already stored, so zone maps skip the rest), the in-place upgrade (all
modules) and sinks without a warehouse (`derived_tables`: an in-memory DuckDB
over the batch's Arrow tables).
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

from bufferhouse.schema import DERIVED_TABLES, arrow_schema, create_statements, quote_identifier

#: Tables the statements read, all per module.
BASE_TABLES = (
    "allocations",
    "hlo_values",
    "assignments",
    "instructions",
    "live_ranges",
    "heap_peaks",
)

_PEAK_BUFFERS = """
WITH placed AS MATERIALIZED (
  -- each placed value of a color with a heap_peaks row. The steps are
  -- materialized one join at a time: every table shares module_id, and left
  -- to reorder, the planner has joined whole modules' tables on module_id
  -- alone (hundreds of GB of intermediate rows on the bench warehouse)
  SELECT
    a.module_id, al.color, p.peak_time, a.value_id, a.allocation_index,
    al.category, a.size
  FROM assignments AS a
  JOIN (
    SELECT module_id, allocation_index, color, category
    FROM allocations
    WHERE module_id BETWEEN $lo AND $hi
  ) AS al
    ON al.module_id = a.module_id
    AND al.allocation_index = a.allocation_index
  JOIN (
    SELECT module_id, color, peak_time
    FROM heap_peaks
    WHERE module_id BETWEEN $lo AND $hi
  ) AS p
    ON p.module_id = al.module_id AND p.color = al.color
  WHERE a.module_id BETWEEN $lo AND $hi
),
facts AS MATERIALIZED (
  -- live at the peak: the value's range covers the peak step (a temp value
  -- without a range counts as live)
  SELECT
    f.*,
    f.peak_time IS NOT NULL
    AND (
      (lr.start_time IS NULL AND f.category = 'temp')
      OR f.peak_time BETWEEN lr.start_time AND lr.end_time
    ) AS live_at_peak
  FROM placed AS f
  LEFT JOIN (
    SELECT module_id, value_id, start_time, end_time
    FROM live_ranges
    WHERE module_id BETWEEN $lo AND $hi
  ) AS lr
    ON lr.module_id = f.module_id AND lr.value_id = f.value_id
),
indefinite AS (
  -- an indefinite allocation counts whole: it shows its values live at the
  -- peak, or, when none is, its largest value (lowest value_id on a tie)
  SELECT
    module_id,
    allocation_index,
    bool_or(live_at_peak) AS allocation_live,
    max(size) AS top_size
  FROM facts
  WHERE category <> 'temp'
  GROUP BY module_id, allocation_index
),
shown AS (
  SELECT f.module_id, f.allocation_index, min(f.value_id) AS value_id
  FROM facts AS f
  JOIN indefinite AS d
    ON d.module_id = f.module_id
    AND d.allocation_index = f.allocation_index
  WHERE NOT d.allocation_live AND f.size = d.top_size
  GROUP BY f.module_id, f.allocation_index
),
listed AS MATERIALIZED (
  SELECT * FROM facts WHERE live_at_peak
  UNION ALL
  SELECT f.*
  FROM facts AS f
  JOIN shown AS s
    ON s.module_id = f.module_id
    AND s.allocation_index = f.allocation_index
    AND s.value_id = f.value_id
)
SELECT
  l.module_id, l.color, l.peak_time, l.value_id, l.allocation_index,
  l.category, l.size, v.logical_bytes, l.live_at_peak
FROM listed AS l
JOIN hlo_values AS v
  ON v.module_id = l.module_id AND v.value_id = l.value_id
WHERE v.module_id BETWEEN $lo AND $hi
"""

#: Reads heap_peak_buffers, so it runs after that table is written.
_PEAK_SOURCES = """
SELECT
  b.module_id,
  b.color,
  i.op_name,
  i.source_file,
  i.source_line,
  count(*) AS buffers,
  CAST(sum(b.size) AS BIGINT) AS bytes,
  CAST(sum(b.logical_bytes) AS BIGINT) AS logical_bytes
FROM heap_peak_buffers AS b
JOIN hlo_values AS v
  ON v.module_id = b.module_id AND v.value_id = b.value_id
LEFT JOIN (
  SELECT module_id, instruction, op_name, source_file, source_line
  FROM instructions
  WHERE module_id BETWEEN $lo AND $hi
) AS i
  ON i.module_id = b.module_id AND i.instruction = v.instruction
WHERE b.module_id BETWEEN $lo AND $hi AND v.module_id BETWEEN $lo AND $hi
GROUP BY b.module_id, b.color, i.op_name, i.source_file, i.source_line
"""

_SPACE_TOTALS = """
WITH allocs AS (
  SELECT *
  FROM allocations
  WHERE module_id BETWEEN $lo AND $hi
),
categories AS (
  SELECT
    module_id,
    color,
    sum(size) AS total_bytes,
    coalesce(sum(size) FILTER (WHERE is_parameter), 0) AS parameter_bytes,
    coalesce(sum(size) FILTER (WHERE is_maybe_live_out), 0) AS output_bytes,
    coalesce(
      sum(size) FILTER (WHERE is_parameter AND is_maybe_live_out), 0
    ) AS alias_bytes,
    coalesce(sum(size) FILTER (WHERE is_constant), 0) AS constant_bytes,
    coalesce(sum(size) FILTER (WHERE is_thread_local), 0) AS thread_local_bytes,
    coalesce(sum(size) FILTER (WHERE is_preallocated_temp), 0) AS temp_bytes
  FROM allocs
  GROUP BY module_id, color
),
slices AS (
  -- aliased values share a slice and count once, with their largest shape
  SELECT
    a.module_id,
    al.color,
    a.size,
    max(v.logical_bytes) AS logical_bytes
  FROM assignments AS a
  JOIN hlo_values AS v
    ON v.module_id = a.module_id AND v.value_id = a.value_id
  JOIN allocs AS al
    ON al.module_id = a.module_id
    AND al.allocation_index = a.allocation_index
  WHERE a.module_id BETWEEN $lo AND $hi AND v.module_id BETWEEN $lo AND $hi
  GROUP BY a.module_id, al.color, a.allocation_index, a.byte_offset, a.size
),
slice_sums AS (
  SELECT
    module_id,
    color,
    count(*) AS slices,
    sum(size) AS slice_bytes,
    sum(logical_bytes) AS slice_logical_bytes
  FROM slices
  GROUP BY module_id, color
)
SELECT
  c.module_id,
  c.color,
  CAST(c.total_bytes AS BIGINT),
  CAST(c.parameter_bytes AS BIGINT),
  CAST(c.output_bytes AS BIGINT),
  CAST(c.alias_bytes AS BIGINT),
  CAST(c.constant_bytes AS BIGINT),
  CAST(c.thread_local_bytes AS BIGINT),
  CAST(c.temp_bytes AS BIGINT),
  coalesce(s.slices, 0),
  CAST(s.slice_bytes AS BIGINT),
  CAST(s.slice_logical_bytes AS BIGINT)
FROM categories AS c
LEFT JOIN slice_sums AS s
  ON s.module_id = c.module_id AND s.color = c.color
"""

_PADDED_VALUES = """
SELECT
  a.module_id,
  a.value_id,
  v.instruction,
  v.shape_index,
  a.allocation_index,
  al.category,
  al.color,
  v.shape,
  i.op_name,
  a.size,
  v.logical_bytes,
  a.size - v.logical_bytes AS padding_bytes
FROM assignments AS a
JOIN hlo_values AS v
  ON v.module_id = a.module_id AND v.value_id = a.value_id
JOIN (
  SELECT module_id, allocation_index, category, color
  FROM allocations
  WHERE module_id BETWEEN $lo AND $hi
) AS al
  ON al.module_id = a.module_id
  AND al.allocation_index = a.allocation_index
LEFT JOIN (
  SELECT module_id, instruction, op_name
  FROM instructions
  WHERE module_id BETWEEN $lo AND $hi
) AS i
  ON i.module_id = v.module_id AND i.instruction = v.instruction
WHERE
  a.module_id BETWEEN $lo AND $hi
  AND v.module_id BETWEEN $lo AND $hi
  AND a.size - v.logical_bytes > 0
"""

#: Derived table -> the SELECT that computes its rows, in the order they must run.
STATEMENTS: dict[str, str] = {
    "heap_peak_buffers": _PEAK_BUFFERS,
    "heap_peak_sources": _PEAK_SOURCES,
    "space_totals": _SPACE_TOTALS,
    "padded_values": _PADDED_VALUES,
}

assert list(STATEMENTS) == [t.name for t in DERIVED_TABLES]


def derive(con: duckdb.DuckDBPyConnection, lo: int, hi: int) -> None:
    """Insert the derived rows of the modules with ids in [lo, hi].

    The caller owns the transaction: the rows go in with the module's own rows
    (or not at all). Those modules must have no derived rows yet.
    """
    params = {"lo": lo, "hi": hi}
    for name, select in STATEMENTS.items():
        con.execute(f"INSERT INTO {quote_identifier(name)}\n{select}", params)


def module_ranges(
    con: duckdb.DuckDBPyConnection, max_rows: int = 2_000_000
) -> list[tuple[int, int]]:
    """[lo, hi] module-id ranges covering every module, each of about `max_rows`
    assignments, like ingest's batches: one statement over tens of millions of
    values runs for many minutes on one core, the same work in ranges takes a
    few seconds per range."""
    sizes = con.execute(
        "SELECT m.module_id, coalesce(a.n, 0) FROM modules AS m LEFT JOIN "
        "(SELECT module_id, count(*) AS n FROM assignments GROUP BY module_id) AS a "
        "USING (module_id) ORDER BY m.module_id"
    ).fetchall()
    ranges, start, rows = [], None, 0
    for i, (module_id, n) in enumerate(sizes):
        start = module_id if start is None else start
        rows += n
        if rows >= max_rows or i == len(sizes) - 1:
            ranges.append((start, module_id))
            start, rows = None, 0
    return ranges


def derive_all(con: duckdb.DuckDBPyConnection, max_rows: int = 2_000_000) -> None:
    """Recompute the derived rows of every module (the in-place upgrade), range by range."""
    for name in STATEMENTS:
        con.execute(f"DELETE FROM {quote_identifier(name)}")
    for lo, hi in module_ranges(con, max_rows):
        derive(con, lo, hi)


def derived_tables(tables: dict[str, pa.Table]) -> dict[str, pa.Table]:
    """The derived tables of a batch of whole modules given as Arrow tables (module_id set).

    For sinks without a warehouse (Parquet part files, Spark): the same
    statements, run in an in-memory DuckDB over exactly these rows.
    """
    con = duckdb.connect(":memory:")
    try:
        for statement in create_statements():
            con.execute(statement)
        ids: list[int] = []
        for name in BASE_TABLES:
            data = tables.get(name)
            if data is not None and data.num_rows:
                con.register(f"_bh_{name}", data)
                con.execute(
                    f"INSERT INTO {quote_identifier(name)} SELECT * FROM {quote_identifier('_bh_' + name)}"
                )
                con.unregister(f"_bh_{name}")
                ids += con.execute(
                    f"SELECT min(module_id), max(module_id) FROM {quote_identifier(name)}"
                ).fetchall()[0]
        ids = [i for i in ids if i is not None]
        out = {}
        for table in DERIVED_TABLES:
            if ids:
                derive_one = STATEMENTS[table.name]
                con.execute(
                    f"INSERT INTO {quote_identifier(table.name)}\n{derive_one}",
                    {"lo": min(ids), "hi": max(ids)},
                )
            rows = con.sql(f"SELECT * FROM {quote_identifier(table.name)}").to_arrow_table()
            out[table.name] = rows.cast(arrow_schema(table))
        return out
    finally:
        con.close()
