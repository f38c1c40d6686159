-- name: categories
-- description: Bytes per module and memory space in XLA's allocation categories, as memory_analysis() counts them.
-- param module VARCHAR = NULL: Module name, file stem, module_id or hash prefix; NULL for all.
-- column module_id: Module identity.
-- column module_name: Module name (jit name).
-- column color: Memory space (allocation color).
-- column parameter_bytes: Parameter allocations (argument_size_in_bytes).
-- column output_bytes: maybe-live-out allocations (output_size_in_bytes).
-- column alias_bytes: Both parameter and maybe-live-out (alias_size_in_bytes).
-- column constant_bytes: Constant allocations (in no memory_analysis figure).
-- column thread_local_bytes: Thread-local allocations (in no memory_analysis figure).
-- column temp_bytes: preallocated-temp allocations (temp_size_in_bytes).
-- column total_bytes: All allocations of the space.
-- note: Categories overlap as in XLA's ComputeSummaryStats: a donated parameter counts as parameter, output and alias, so the columns do not add up to total_bytes.
-- note: memory_analysis() reports host memory space 5 in separate host_* fields; the per-color rows keep them apart.
WITH sums AS (
  SELECT
    a.module_id,
    a.color,
    sum(a.size) FILTER (WHERE a.is_parameter) AS parameter_bytes,
    sum(a.size) FILTER (WHERE a.is_maybe_live_out) AS output_bytes,
    sum(a.size) FILTER (
      WHERE a.is_parameter AND a.is_maybe_live_out
    ) AS alias_bytes,
    sum(a.size) FILTER (WHERE a.is_constant) AS constant_bytes,
    sum(a.size) FILTER (WHERE a.is_thread_local) AS thread_local_bytes,
    sum(a.size) FILTER (WHERE a.is_preallocated_temp) AS temp_bytes,
    sum(a.size) AS total_bytes
  FROM allocations AS a
  WHERE
    $module IS NULL
    OR a.module_id IN (SELECT module_id FROM module_keys WHERE key = $module)
  GROUP BY a.module_id, a.color
)
SELECT
  s.module_id,
  m.module_name,
  s.color,
  CAST(coalesce(s.parameter_bytes, 0) AS BIGINT) AS parameter_bytes,
  CAST(coalesce(s.output_bytes, 0) AS BIGINT) AS output_bytes,
  CAST(coalesce(s.alias_bytes, 0) AS BIGINT) AS alias_bytes,
  CAST(coalesce(s.constant_bytes, 0) AS BIGINT) AS constant_bytes,
  CAST(coalesce(s.thread_local_bytes, 0) AS BIGINT) AS thread_local_bytes,
  CAST(coalesce(s.temp_bytes, 0) AS BIGINT) AS temp_bytes,
  CAST(s.total_bytes AS BIGINT) AS total_bytes
FROM sums AS s
JOIN modules AS m
  ON m.module_id = s.module_id
ORDER BY m.module_name, s.module_id, s.color
