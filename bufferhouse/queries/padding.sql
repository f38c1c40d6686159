-- name: padding
-- description: Values whose assigned size exceeds the logical size of their shape, worst first.
-- param module VARCHAR = NULL: Module name, file stem, module_id or hash prefix; NULL for all.
-- param top INTEGER >= 0 = 100: How many values.
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
WITH chosen AS (
  -- the module selector: see docs/query-planning.md
  SELECT module_id, module_name
  FROM modules
  WHERE
    $module IS NULL
    OR bh_is_module($module, module_name, file_stem, module_id, content_hash)
)
-- padded_values: the values with size > logical_bytes and their names, found
-- at ingest
SELECT
  p.module_id,
  m.module_name,
  p.value_id,
  p.instruction,
  p.shape_index,
  p.category,
  p.color,
  p.shape,
  p.size,
  p.logical_bytes,
  p.padding_bytes,
  round(p.size / nullif(p.logical_bytes, 0), 2) AS expansion,
  p.op_name
FROM padded_values AS p
JOIN chosen AS m
  ON m.module_id = p.module_id
ORDER BY p.padding_bytes DESC, m.module_name, p.module_id, p.value_id
LIMIT $top
