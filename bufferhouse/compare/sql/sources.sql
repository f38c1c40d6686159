-- name: diff-sources
-- description: Bytes live at the heap peak rolled up by source line, base against head: which lines of the code now hold more.
-- column source: source_file:source_line, or `(unknown)` when the op has none (parameters, most copies and constants).
-- column base_buffers: Buffers at the base peak made by that line.
-- column head_buffers: Buffers at the head peak made by that line.
-- column base_bytes: Their assigned bytes on the base side.
-- column head_bytes: Their assigned bytes on the head side.
-- column delta_bytes: head_bytes - base_bytes.
-- column change_pct: 100 * delta_bytes / base_bytes; 0 when both are 0; NULL when base_bytes is 0 and the line holds bytes now.
-- note: Runs on a scratch connection over Arrow tables `base_buffers` and `head_buffers` (the `peak-buffers` query of each module), summed over every pair of the drill-down, like the `by-source` query.
WITH sides AS (
  SELECT
    'base' AS side,
    coalesce(source, '(unknown)') AS source,
    size
  FROM base_buffers
  UNION ALL
  SELECT
    'head' AS side,
    coalesce(source, '(unknown)') AS source,
    size
  FROM head_buffers
),
sums AS (
  SELECT
    source,
    count(*) FILTER (WHERE side = 'base') AS base_buffers,
    count(*) FILTER (WHERE side = 'head') AS head_buffers,
    CAST(coalesce(sum(size) FILTER (WHERE side = 'base'), 0) AS BIGINT)
      AS base_bytes,
    CAST(coalesce(sum(size) FILTER (WHERE side = 'head'), 0) AS BIGINT)
      AS head_bytes
  FROM sides
  GROUP BY source
)
SELECT
  source,
  base_buffers,
  head_buffers,
  base_bytes,
  head_bytes,
  head_bytes - base_bytes AS delta_bytes,
  CASE
    WHEN head_bytes = base_bytes THEN 0.0
    WHEN base_bytes > 0 THEN 100.0 * (head_bytes - base_bytes) / base_bytes
  END AS change_pct
FROM sums
ORDER BY abs(delta_bytes) DESC, source
