-- name: space_totals
-- description: Per module and color: the allocation bytes by kind (parameter, output, alias, constant, thread-local, temp) and the distinct slices, aliased values counted once with their largest shape.
-- param lo BIGINT = NULL: lowest module_id whose rows are derived
-- param hi BIGINT = NULL: highest module_id whose rows are derived
-- note: Reads only the base rows of the modules with ids in [$lo, $hi]; the caller inserts the result into the table of this name.
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
