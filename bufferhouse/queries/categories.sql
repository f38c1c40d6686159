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
WITH chosen AS (
  -- the module selector: see docs/query-planning.md
  SELECT module_id, module_name
  FROM modules
  WHERE
    $module IS NULL
    OR bh_is_module($module, module_name, file_stem, module_id, content_hash)
)
-- space_totals: the category sums per module and space (ingest)
SELECT
  s.module_id,
  m.module_name,
  s.color,
  s.parameter_bytes,
  s.output_bytes,
  s.alias_bytes,
  s.constant_bytes,
  s.thread_local_bytes,
  s.temp_bytes,
  s.total_bytes
FROM space_totals AS s
JOIN chosen AS m
  ON m.module_id = s.module_id
ORDER BY m.module_name, s.module_id, s.color
