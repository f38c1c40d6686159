-- name: padding
-- description: Values whose assigned size exceeds the logical size of their shape, worst first.
-- param module VARCHAR = NULL: Module name, file stem, module_id or hash prefix; NULL for all.
-- param top INTEGER = 100: How many values.
-- column module_id: Module identity.
-- column module_name: Module name (jit name).
-- column value_id: Value id.
-- column instruction: Defining instruction.
-- column shape_index: ShapeIndex within the defining instruction.
-- column category: Allocation kind.
-- column color: Memory space.
-- column shape: Value shape with layout (the tiling explains the padding).
-- column size: Assigned bytes.
-- column logical_bytes: ByteSizeOf(shape): unpadded bytes.
-- column padding_bytes: size - logical_bytes.
-- column expansion: size / logical_bytes (NULL for empty shapes).
-- column op_name: Framework op name.
-- note: Padding is tile padding on TPU (minor dimension to 128, second-minor to 8) and dynamic-shape metadata (4 bytes per dimension) on CPU/GPU.
SELECT
  module_id,
  module_name,
  value_id,
  instruction,
  shape_index,
  category,
  color,
  shape,
  size,
  logical_bytes,
  padding_bytes,
  round(size / nullif(logical_bytes, 0), 2) AS expansion,
  op_name
FROM value_facts
WHERE
  padding_bytes > 0
  AND (
    $module IS NULL
    OR module_id IN (SELECT module_id FROM module_keys WHERE key = $module)
  )
ORDER BY padding_bytes DESC, module_name, module_id, value_id
LIMIT $top
