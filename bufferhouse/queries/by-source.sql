-- name: by-source
-- description: Bytes at the heap peak rolled up by source line or by op_name prefix, across modules: which line of my code holds the memory.
-- param key_by VARCHAR = 'source': Group by `source` (file:line) or `op_name`.
-- param name_depth INTEGER = NULL: With key_by=op_name, keep only the first N '/'-separated parts (name scope); NULL for the whole op_name.
-- param module VARCHAR = NULL: Module name, file stem, module_id or hash prefix; NULL for all.
-- param space INTEGER = 0: Memory space (color).
-- column key: The source line or op_name prefix; `(unknown)` when the op has none.
-- column modules: Modules in which it holds memory at the peak.
-- column buffers: Values at the peak it accounts for.
-- column bytes: Their assigned bytes.
-- column logical_bytes: Their unpadded bytes.
-- note: Rows come from the heap_peak_values view, so indefinite allocations (parameters, outputs) count too.
-- example: bufferhouse query by-source --param key_by=op_name --param name_depth=3
WITH wanted AS (
  SELECT module_id FROM module_keys WHERE key = $module
),
-- each large table is read scoped to the module: see queries/__init__.py
peaks AS (
  SELECT module_id, color, peak_time
  FROM heap_peaks
  WHERE color = $space AND $module IS NULL
  UNION ALL
  SELECT module_id, color, peak_time
  FROM heap_peaks
  WHERE color = $space AND module_id IN (SELECT module_id FROM wanted)
),
allocs AS (
  SELECT module_id, allocation_index, color, category
  FROM allocations
  WHERE color = $space AND $module IS NULL
  UNION ALL
  SELECT module_id, allocation_index, color, category
  FROM allocations
  WHERE color = $space AND module_id IN (SELECT module_id FROM wanted)
),
lives AS (
  SELECT module_id, value_id, start_time, end_time
  FROM live_ranges
  WHERE $module IS NULL
  UNION ALL
  SELECT module_id, value_id, start_time, end_time
  FROM live_ranges
  WHERE module_id IN (SELECT module_id FROM wanted)
),
facts AS (
  SELECT
    a.module_id,
    a.value_id,
    a.allocation_index,
    al.category,
    a.size,
    p.peak_time,
    p.peak_time IS NOT NULL
    AND (
      (lr.start_time IS NULL AND al.category = 'temp')
      OR p.peak_time BETWEEN lr.start_time AND lr.end_time
    ) AS live_at_peak
  FROM peaks AS p
  JOIN allocs AS al
    ON al.module_id = p.module_id AND al.color = p.color
  JOIN assignments AS a
    ON a.module_id = al.module_id
    AND a.allocation_index = al.allocation_index
  LEFT JOIN lives AS lr
    ON lr.module_id = a.module_id AND lr.value_id = a.value_id
),
indefinite AS (
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
listed AS (
  SELECT
    module_id, value_id, allocation_index, category, size, peak_time,
    live_at_peak
  FROM facts
  WHERE live_at_peak
  UNION ALL
  SELECT
    f.module_id, f.value_id, f.allocation_index, f.category, f.size,
    f.peak_time, f.live_at_peak
  FROM facts AS f
  JOIN shown AS s
    ON s.module_id = f.module_id
    AND s.allocation_index = f.allocation_index
    AND s.value_id = f.value_id
),
vals AS (
  SELECT module_id, value_id, instruction, logical_bytes
  FROM hlo_values
  WHERE $module IS NULL
  UNION ALL
  SELECT module_id, value_id, instruction, logical_bytes
  FROM hlo_values
  WHERE module_id IN (SELECT module_id FROM wanted)
),
ops AS (
  SELECT module_id, instruction, op_name, source_file, source_line
  FROM instructions
  WHERE $module IS NULL
  UNION ALL
  SELECT module_id, instruction, op_name, source_file, source_line
  FROM instructions
  WHERE module_id IN (SELECT module_id FROM wanted)
),
keyed AS (
  SELECT
    l.module_id,
    l.size,
    v.logical_bytes,
    CASE $key_by
      WHEN 'source' THEN i.source_file || ':' || CAST(i.source_line AS VARCHAR)
      WHEN 'op_name' THEN
        CASE
          WHEN $name_depth IS NULL THEN i.op_name
          ELSE array_to_string(
            list_slice(string_split(i.op_name, '/'), 1, $name_depth), '/'
          )
        END
      ELSE error('key_by must be source or op_name')
    END AS key
  FROM listed AS l
  JOIN vals AS v
    ON v.module_id = l.module_id AND v.value_id = l.value_id
  LEFT JOIN ops AS i
    ON i.module_id = l.module_id AND i.instruction = v.instruction
)
SELECT
  coalesce(key, '(unknown)') AS key,
  count(DISTINCT module_id) AS modules,
  count(*) AS buffers,
  CAST(sum(size) AS BIGINT) AS bytes,
  CAST(sum(logical_bytes) AS BIGINT) AS logical_bytes
FROM keyed
GROUP BY coalesce(key, '(unknown)')
ORDER BY bytes DESC, key
