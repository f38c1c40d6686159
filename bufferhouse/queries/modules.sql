-- name: modules
-- description: One row per module: identity, labels, counts, the three peaks and XLA's category sums.
-- param module VARCHAR = NULL: Module name, file stem, module_id or content-hash prefix; NULL for all.
-- param label VARCHAR = NULL: Only modules with this `key=value` label; NULL for all.
-- column module_id: Module (modules.module_id; grows with ingest order).
-- column module_name: Module name (jit name).
-- column module_number: XLA's module counter from the file name.
-- column backend: cpu, gpu, tpu or unknown.
-- column format_era: Earliest XLA date whose printer matches the file.
-- column labels: The module's labels as `k=v` joined by commas.
-- column allocation_count: Number of allocations.
-- column value_count: Number of placed values.
-- column total_bytes: `Total bytes used`: sum of all allocation sizes (not a peak).
-- column logical_peak_bytes: HloLiveRange peak: unpadded, no buffer sharing.
-- column heap_peak_bytes: Heap peak of memory space 0: indefinite + max live temp.
-- column parameter_bytes: Sum of parameter allocations (memory_analysis argument).
-- column output_bytes: Sum of maybe-live-out allocations (memory_analysis output).
-- column alias_bytes: Parameter and maybe-live-out (donated; memory_analysis alias).
-- column constant_bytes: Sum of constant allocations.
-- column thread_local_bytes: Sum of thread-local allocations.
-- column temp_bytes: Sum of preallocated-temp allocations (memory_analysis temp).
-- note: The category sums overlap (a donated parameter is parameter and output) and cover every memory space; see `categories` for the split per space.
-- example: bufferhouse query modules --param label=jax=0.7.2
WITH chosen AS (
  -- the module selector; each large table is read scoped to the chosen
  -- modules: see docs/query-planning.md
  SELECT
    module_id, module_name, module_number, backend, format_era,
    allocation_count, value_count, total_bytes, logical_peak_bytes,
    heap_peak_bytes
  FROM modules
  WHERE
    (
      $module IS NULL
      OR bh_is_module($module, module_name, file_stem, module_id, content_hash)
    )
    AND (
      $label IS NULL
      OR module_id IN (
        SELECT module_id FROM labels WHERE key || '=' || value = $label
      )
    )
),
-- space_totals: the category sums per module and space (ingest)
cats AS (
  SELECT
    module_id,
    sum(parameter_bytes) AS parameter_bytes,
    sum(output_bytes) AS output_bytes,
    sum(alias_bytes) AS alias_bytes,
    sum(constant_bytes) AS constant_bytes,
    sum(thread_local_bytes) AS thread_local_bytes,
    sum(temp_bytes) AS temp_bytes
  FROM space_totals
  WHERE module_id IN (SELECT module_id FROM chosen)
  GROUP BY module_id
),
labelled AS (
  SELECT
    module_id,
    string_agg(key || '=' || value, ',' ORDER BY key, value) AS labels
  FROM labels
  WHERE module_id IN (SELECT module_id FROM chosen)
  GROUP BY module_id
)
SELECT
  m.module_id,
  m.module_name,
  m.module_number,
  m.backend,
  m.format_era,
  l.labels,
  m.allocation_count,
  m.value_count,
  m.total_bytes,
  m.logical_peak_bytes,
  m.heap_peak_bytes,
  CAST(coalesce(c.parameter_bytes, 0) AS BIGINT) AS parameter_bytes,
  CAST(coalesce(c.output_bytes, 0) AS BIGINT) AS output_bytes,
  CAST(coalesce(c.alias_bytes, 0) AS BIGINT) AS alias_bytes,
  CAST(coalesce(c.constant_bytes, 0) AS BIGINT) AS constant_bytes,
  CAST(coalesce(c.thread_local_bytes, 0) AS BIGINT) AS thread_local_bytes,
  CAST(coalesce(c.temp_bytes, 0) AS BIGINT) AS temp_bytes
FROM chosen AS m
LEFT JOIN cats AS c
  ON c.module_id = m.module_id
LEFT JOIN labelled AS l
  ON l.module_id = m.module_id
ORDER BY m.module_name, m.module_number, m.module_id
