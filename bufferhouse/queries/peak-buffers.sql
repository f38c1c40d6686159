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
SELECT
  module_id,
  module_name,
  peak_time,
  value_id,
  instruction,
  shape_index,
  allocation_index,
  category,
  size,
  logical_bytes,
  padding_bytes,
  shape,
  opcode,
  op_name,
  source_file || ':' || CAST(source_line AS VARCHAR) AS source,
  live_at_peak
FROM heap_peak_values
WHERE
  color = $space
  AND (
    $module IS NULL
    OR module_id IN (SELECT module_id FROM module_keys WHERE key = $module)
  )
ORDER BY size DESC, module_name, module_id, value_id
LIMIT $top
