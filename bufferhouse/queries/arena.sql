-- name: arena
-- description: The values of one allocation as blocks of byte range by program-order live range: how a temp arena is reused over time (XProf's buffer view).
-- param module VARCHAR = NULL: Module name, file stem, module_id or hash prefix (required).
-- param allocation INTEGER >= 0 = NULL: Allocation index; NULL for the module's largest temp allocation.
-- column module_id: Module identity.
-- column module_name: Module name (jit name).
-- column allocation_index: The allocation drawn.
-- column color: Memory space of the allocation.
-- column allocation_size: Size of the allocation in bytes.
-- column value_id: Value placed in it.
-- column instruction: Defining instruction.
-- column shape_index: ShapeIndex within the defining instruction.
-- column byte_offset: First byte of the value's slice.
-- column size: Bytes of the slice (padded).
-- column logical_bytes: Unpadded bytes of the value's shape.
-- column start_time: First program-order step the value is live.
-- column end_time: Last program-order step the value is live (inclusive).
-- column has_live_range: False when the dump has no live range for the value: it is then drawn live throughout, 0 .. schedule_length, as the heap timeline counts it.
-- column shape: Value shape with layout.
-- column opcode: Opcode of the defining instruction.
-- column op_name: Framework op name.
-- note: Aliased values share a slice, so blocks can overlap. The most bytes live at once is allocations.max_live_bytes; size minus that is the fragmentation query's waste.
-- note: Tuple-shaped values (pointer tables XLA never heap-simulates) are drawn but, as in the heap peak, not counted in max_live_bytes.
-- example: bufferhouse query arena --param module=jit_train_step --param allocation=4
WITH chosen AS (
  -- the module selector: see docs/query-planning.md
  SELECT module_id, module_name, schedule_length
  FROM modules
  WHERE
    -- the name compared once more, outside the macro: the error for a missing
    -- module needs a comparison DuckDB cannot fold away
    module_name = coalesce($module, error('arena needs a module'))
    OR bh_is_module($module, module_name, file_stem, module_id, content_hash)
),
-- large tables are read through semi-joins on chosen: docs/query-planning.md
target AS (
  SELECT
    a.module_id,
    c.module_name,
    a.allocation_index,
    a.color,
    a.size,
    c.schedule_length,
    row_number() OVER (
      PARTITION BY a.module_id
      ORDER BY a.size DESC, a.allocation_index
    ) AS pick
  FROM allocations AS a
  JOIN chosen AS c
    ON c.module_id = a.module_id
  WHERE
    ($allocation IS NULL AND a.is_preallocated_temp)
    OR a.allocation_index = $allocation
),
placed AS (
  SELECT t.*, s.value_id, s.byte_offset, s.size AS slice_size
  FROM target AS t
  JOIN assignments AS s
    ON s.module_id = t.module_id
    AND s.allocation_index = t.allocation_index
  WHERE t.pick = 1
),
-- the rows of the placed values and of their instructions only (a module has
-- tens of thousands): semi-joins, whose hash table is always the small side
vals AS (
  SELECT
    v.module_id, v.value_id, v.instruction, v.shape_index, v.logical_bytes,
    v.shape
  FROM hlo_values AS v
  WHERE EXISTS (
    SELECT 1 FROM placed AS p
    WHERE p.module_id = v.module_id AND p.value_id = v.value_id
  )
)
SELECT
  p.module_id,
  p.module_name,
  p.allocation_index,
  p.color,
  p.size AS allocation_size,
  p.value_id,
  v.instruction,
  v.shape_index,
  p.byte_offset,
  p.slice_size AS size,
  v.logical_bytes,
  coalesce(lr.start_time, 0) AS start_time,
  coalesce(lr.end_time, p.schedule_length) AS end_time,
  lr.start_time IS NOT NULL AS has_live_range,
  v.shape,
  i.opcode,
  i.op_name
FROM placed AS p
JOIN vals AS v
  ON v.module_id = p.module_id AND v.value_id = p.value_id
LEFT JOIN (
  SELECT i.module_id, i.instruction, i.opcode, i.op_name
  FROM instructions AS i
  WHERE EXISTS (
    SELECT 1 FROM vals AS w
    WHERE w.module_id = i.module_id AND w.instruction = i.instruction
  )
) AS i
  ON i.module_id = p.module_id AND i.instruction = v.instruction
LEFT JOIN (
  SELECT l.module_id, l.value_id, l.start_time, l.end_time
  FROM live_ranges AS l
  WHERE EXISTS (
    SELECT 1 FROM placed AS p
    WHERE p.module_id = l.module_id AND p.value_id = l.value_id
  )
) AS lr
  ON lr.module_id = p.module_id AND lr.value_id = p.value_id
UNION ALL
-- a key that selects no module is an error (a typo), not an empty result: the
-- tool checks before it runs a query; this says it in the duckdb shell too
SELECT
  error(
    'arena: no module matches ''' || $module
    || ''' (a module name, file stem, module_id or 12-digit hash prefix)'
  ),
  NULL,
  NULL,
  NULL,
  NULL,
  NULL,
  NULL,
  NULL,
  NULL,
  NULL,
  NULL,
  NULL,
  NULL,
  NULL,
  NULL,
  NULL,
  NULL
WHERE NOT EXISTS (
  SELECT 1
  FROM modules
  WHERE
    bh_is_module($module, module_name, file_stem, module_id, content_hash)
)
ORDER BY module_id, byte_offset, start_time, value_id
