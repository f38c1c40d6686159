-- name: by-source
-- description: Bytes at the heap peak rolled up by source line or by op_name prefix, across modules: which line of my code holds the memory.
-- param key_by VARCHAR in (source, op_name) = 'source': Group by `source` (file:line) or `op_name`.
-- param name_depth INTEGER >= 1 = NULL: With key_by=op_name, keep only the first N '/'-separated parts (name scope); NULL for the whole op_name.
-- param module VARCHAR = NULL: Module name, file stem, module_id or hash prefix; NULL for all.
-- param space INTEGER >= 0 = 0: Memory space (color).
-- column key: The source line or op_name prefix; `(unknown)` when the op has none.
-- column modules: Modules in which it holds memory at the peak.
-- column buffers: Values at the peak it accounts for.
-- column bytes: Their assigned bytes.
-- column logical_bytes: Their unpadded bytes.
-- note: Rows come from the heap_peak_values view, so indefinite allocations (parameters, outputs) count too; ingest stores them rolled up per module and op (heap_peak_sources).
-- example: bufferhouse query by-source --param key_by=op_name --param name_depth=3
WITH wanted AS (
  -- the module selector: see docs/query-planning.md
  SELECT module_id
  FROM modules
  WHERE
    bh_is_module($module, module_name, file_stem, module_id, content_hash)
),
-- heap_peak_sources: heap_peak_values per module, space and op (ingest)
sources AS (
  SELECT
    module_id, op_name, source_file, source_line, buffers, bytes,
    logical_bytes
  FROM heap_peak_sources
  WHERE color = $space AND $module IS NULL
  UNION ALL
  SELECT
    module_id, op_name, source_file, source_line, buffers, bytes,
    logical_bytes
  FROM heap_peak_sources
  WHERE color = $space AND module_id IN (SELECT module_id FROM wanted)
),
keyed AS (
  SELECT
    module_id,
    buffers,
    bytes,
    logical_bytes,
    CASE $key_by
      WHEN 'source' THEN source_file || ':' || CAST(source_line AS VARCHAR)
      WHEN 'op_name' THEN
        CASE
          WHEN $name_depth IS NULL THEN op_name
          ELSE array_to_string(
            list_slice(string_split(op_name, '/'), 1, $name_depth), '/'
          )
        END
      ELSE error('key_by must be source or op_name')
    END AS key
  FROM sources
)
SELECT
  coalesce(key, '(unknown)') AS key,
  count(DISTINCT module_id) AS modules,
  CAST(sum(buffers) AS BIGINT) AS buffers,
  CAST(sum(bytes) AS BIGINT) AS bytes,
  CAST(sum(logical_bytes) AS BIGINT) AS logical_bytes
FROM keyed
GROUP BY coalesce(key, '(unknown)')
ORDER BY bytes DESC, key
