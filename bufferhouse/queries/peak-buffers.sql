-- name: peak-buffers
-- description: The buffers that make up the heap peak of a module (or the largest across the fleet), with the op and source line that made each.
-- param module VARCHAR = NULL: Module name, file stem, module_id or hash prefix; NULL for the whole fleet.
-- param space INTEGER = 0: Memory space (color).
-- param top INTEGER = 50: How many buffers, largest first.
-- column module_id: Module identity.
-- column module_name: Module name (jit name).
-- column peak_time: Program-order step of the heap peak.
-- column value_id: Value id.
-- column instruction: Defining instruction.
-- column shape_index: ShapeIndex within the defining instruction.
-- column allocation_index: Allocation holding the value.
-- column category: parameter, output, thread-local, constant or temp.
-- column size: Assigned bytes (padded).
-- column logical_bytes: Unpadded bytes of the shape.
-- column padding_bytes: size - logical_bytes.
-- column shape: Value shape with layout.
-- column opcode: Opcode of the defining instruction.
-- column op_name: Framework op name (name scope path).
-- column source: source_file:source_line of the op, NULL if unknown.
-- column live_at_peak: The value's live range covers the peak step (false: shown for its indefinite allocation).
-- note: See the heap_peak_values view for which values are listed.
-- example: bufferhouse query peak-buffers --param module=jit_train_step
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
top_listed AS (
  SELECT l.*, m.module_name
  FROM listed AS l
  JOIN modules AS m
    ON m.module_id = l.module_id
  ORDER BY l.size DESC, m.module_name, l.module_id, l.value_id
  LIMIT $top
),
top_modules AS (
  SELECT DISTINCT module_id FROM top_listed
)
SELECT
  t.module_id,
  t.module_name,
  t.peak_time,
  t.value_id,
  v.instruction,
  v.shape_index,
  t.allocation_index,
  t.category,
  t.size,
  v.logical_bytes,
  t.size - v.logical_bytes AS padding_bytes,
  v.shape,
  i.opcode,
  i.op_name,
  i.source_file || ':' || CAST(i.source_line AS VARCHAR) AS source,
  t.live_at_peak
FROM top_listed AS t
JOIN hlo_values AS v
  ON v.module_id = t.module_id AND v.value_id = t.value_id
LEFT JOIN (
  SELECT
    module_id, instruction, opcode, op_name, source_file, source_line
  FROM instructions
  WHERE module_id IN (SELECT module_id FROM top_modules)
) AS i
  ON i.module_id = t.module_id AND i.instruction = v.instruction
WHERE v.module_id IN (SELECT module_id FROM top_modules)
ORDER BY t.size DESC, t.module_name, t.module_id, t.value_id
