-- name: arena
-- description: The values of one allocation as blocks of byte range by program-order live range: how a temp arena is reused over time (XProf's buffer view).
-- param module VARCHAR = NULL: Module name, file stem, module_id or hash prefix (required).
-- param allocation INTEGER = NULL: Allocation index; NULL for the module's largest temp allocation.
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
-- example: bufferhouse query arena --param module=jit_train_step --param allocation=4
WITH chosen AS (
  SELECT module_id, schedule_length
  FROM modules
  WHERE module_id IN (
    SELECT module_id FROM module_keys
    WHERE key = coalesce($module, error('arena needs a module'))
  )
),
target AS (
  SELECT
    a.module_id,
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
)
SELECT
  t.module_id,
  f.module_name,
  t.allocation_index,
  t.color,
  t.size AS allocation_size,
  f.value_id,
  f.instruction,
  f.shape_index,
  f.byte_offset,
  f.size,
  f.logical_bytes,
  coalesce(f.start_time, 0) AS start_time,
  coalesce(f.end_time, t.schedule_length) AS end_time,
  f.start_time IS NOT NULL AS has_live_range,
  f.shape,
  f.opcode,
  f.op_name
FROM target AS t
JOIN value_facts AS f
  ON f.module_id = t.module_id AND f.allocation_index = t.allocation_index
WHERE t.pick = 1
ORDER BY t.module_id, f.byte_offset, start_time, f.value_id
