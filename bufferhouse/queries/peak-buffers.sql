-- name: peak-buffers
-- description: The buffers that make up the heap peak of a module (or the largest across the fleet), with the op and source line that made each.
-- param module VARCHAR = NULL: Module name, file stem, module_id or hash prefix; NULL for the whole fleet.
-- param space INTEGER >= 0 = 0: Memory space (color).
-- param top INTEGER >= 0 = 50: How many buffers, largest first.
-- column module_id: Module identity.
-- column module_name: Module name (jit name).
-- column peak_time: Program-order step of the peak (heap_peaks.peak_time).
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
-- column live_at_peak: A temp value held at the peak; false for the one row of an indefinite allocation (its largest value: the allocation counts whole).
-- column peak_source: What gave the peak (heap_peaks.peak_source): trace, live_ranges or allocations.
-- note: One rule for every form (heap_peak_buffers, computed at ingest): the temp values held at the peak per the heap-simulator trace where the peak came from one, else per the live ranges, and each indefinite allocation once, by its largest value; a text dump, its proto and a profile of one compile list the same rows, summing to heap_peak_bytes. `source` is the op's source line, `peak_source` the peak's.
-- example: bufferhouse query peak-buffers --param module=jit_train_step
WITH wanted AS (
  -- the module selector: see docs/query-planning.md
  SELECT module_id
  FROM modules
  WHERE
    bh_is_module($module, module_name, file_stem, module_id, content_hash)
),
-- each large table is read scoped to the module: see docs/query-planning.md;
-- heap_peak_buffers holds the heap_peak_values rows, computed at ingest
candidates AS (
  SELECT
    module_id, color, peak_time, value_id, allocation_index, category, size,
    logical_bytes, live_at_peak
  FROM heap_peak_buffers
  WHERE color = $space AND $module IS NULL
  UNION ALL
  SELECT
    module_id, color, peak_time, value_id, allocation_index, category, size,
    logical_bytes, live_at_peak
  FROM heap_peak_buffers
  WHERE color = $space AND module_id IN (SELECT module_id FROM wanted)
),
top_listed AS (
  SELECT b.*, m.module_name, p.peak_source
  FROM candidates AS b
  JOIN modules AS m
    ON m.module_id = b.module_id
  JOIN heap_peaks AS p
    ON p.module_id = b.module_id AND p.color = b.color
  ORDER BY b.size DESC, m.module_name, b.module_id, b.value_id
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
  t.logical_bytes,
  t.size - t.logical_bytes AS padding_bytes,
  v.shape,
  i.opcode,
  i.op_name,
  i.source_file || ':' || CAST(i.source_line AS VARCHAR) AS source,
  t.live_at_peak,
  t.peak_source
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
