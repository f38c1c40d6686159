-- name: diff-changes
-- description: Every figure of every module pair of a diff: the three peaks and the six allocation categories, base and head side by side.
-- column pair: Pair number (pairs.pair).
-- column module_name: Module name (jit name) shared by the pair.
-- column status: grown, shrunk or same (matched modules); added or removed (on one side only); unknown when a side lacks the figure.
-- column match: How the pair was matched: name, signature or structure; NULL for added and removed modules.
-- column metric: heap_peak_bytes, logical_peak_bytes, total_bytes, parameter_bytes, output_bytes, alias_bytes, constant_bytes, thread_local_bytes or temp_bytes.
-- column base_module_id: The module on the base side; NULL if added.
-- column head_module_id: The module on the head side; NULL if removed.
-- column base_number: module_number of the base module.
-- column head_number: module_number of the head module.
-- column base_bytes: The figure on the base side.
-- column head_bytes: The figure on the head side.
-- column delta_bytes: head_bytes - base_bytes (a missing side counts as 0).
-- column change_pct: 100 * delta_bytes / base_bytes; 0 when both are 0; NULL when base_bytes is 0 or missing and the figure changed.
-- note: Runs on a scratch connection over Arrow tables: `pairs` (pair, module_name, match, base_module_id, head_module_id) and `base_modules` / `head_modules` (the `modules` query on each side).
WITH figures AS (
  SELECT *
  FROM (
    VALUES
      (1, 'heap_peak_bytes'),
      (2, 'logical_peak_bytes'),
      (3, 'total_bytes'),
      (4, 'parameter_bytes'),
      (5, 'output_bytes'),
      (6, 'alias_bytes'),
      (7, 'constant_bytes'),
      (8, 'thread_local_bytes'),
      (9, 'temp_bytes')
  ) AS f(ordinal, metric)
),
sides AS (
  SELECT
    p.pair,
    p.module_name,
    p.match,
    p.base_module_id,
    p.head_module_id,
    f.ordinal,
    f.metric,
    b.module_number AS base_number,
    h.module_number AS head_number,
    CASE f.metric
      WHEN 'heap_peak_bytes' THEN b.heap_peak_bytes
      WHEN 'logical_peak_bytes' THEN b.logical_peak_bytes
      WHEN 'total_bytes' THEN b.total_bytes
      WHEN 'parameter_bytes' THEN b.parameter_bytes
      WHEN 'output_bytes' THEN b.output_bytes
      WHEN 'alias_bytes' THEN b.alias_bytes
      WHEN 'constant_bytes' THEN b.constant_bytes
      WHEN 'thread_local_bytes' THEN b.thread_local_bytes
      WHEN 'temp_bytes' THEN b.temp_bytes
    END AS base_bytes,
    CASE f.metric
      WHEN 'heap_peak_bytes' THEN h.heap_peak_bytes
      WHEN 'logical_peak_bytes' THEN h.logical_peak_bytes
      WHEN 'total_bytes' THEN h.total_bytes
      WHEN 'parameter_bytes' THEN h.parameter_bytes
      WHEN 'output_bytes' THEN h.output_bytes
      WHEN 'alias_bytes' THEN h.alias_bytes
      WHEN 'constant_bytes' THEN h.constant_bytes
      WHEN 'thread_local_bytes' THEN h.thread_local_bytes
      WHEN 'temp_bytes' THEN h.temp_bytes
    END AS head_bytes
  FROM pairs AS p
  CROSS JOIN figures AS f
  LEFT JOIN base_modules AS b
    ON b.module_id = p.base_module_id
  LEFT JOIN head_modules AS h
    ON h.module_id = p.head_module_id
),
deltas AS (
  SELECT
    *,
    CASE
      WHEN base_module_id IS NULL THEN head_bytes
      WHEN head_module_id IS NULL THEN -base_bytes
      ELSE head_bytes - base_bytes
    END AS delta_bytes
  FROM sides
)
SELECT
  pair,
  module_name,
  CASE
    WHEN base_module_id IS NULL THEN 'added'
    WHEN head_module_id IS NULL THEN 'removed'
    WHEN delta_bytes IS NULL THEN 'unknown'
    WHEN delta_bytes > 0 THEN 'grown'
    WHEN delta_bytes < 0 THEN 'shrunk'
    ELSE 'same'
  END AS status,
  match,
  metric,
  base_module_id,
  head_module_id,
  base_number,
  head_number,
  CAST(base_bytes AS BIGINT) AS base_bytes,
  CAST(head_bytes AS BIGINT) AS head_bytes,
  CAST(delta_bytes AS BIGINT) AS delta_bytes,
  CASE
    WHEN base_module_id IS NULL OR head_module_id IS NULL THEN NULL
    WHEN delta_bytes = 0 THEN 0.0
    WHEN base_bytes > 0 THEN 100.0 * delta_bytes / base_bytes
  END AS change_pct
FROM deltas
ORDER BY
  abs(delta_bytes) DESC NULLS LAST,
  module_name,
  pair,
  ordinal
