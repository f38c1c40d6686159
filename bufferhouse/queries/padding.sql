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
WITH wanted AS (
  SELECT module_id FROM module_keys WHERE key = $module
),
-- each large table is read scoped to the module: see queries/__init__.py;
-- padded_values holds the values with size > logical_bytes, found at ingest
scoped AS (
  SELECT
    module_id, value_id, allocation_index, color, size, logical_bytes,
    padding_bytes
  FROM padded_values
  WHERE $module IS NULL
  UNION ALL
  SELECT
    module_id, value_id, allocation_index, color, size, logical_bytes,
    padding_bytes
  FROM padded_values
  WHERE module_id IN (SELECT module_id FROM wanted)
),
ranked AS (
  SELECT a.*, m.module_name
  FROM scoped AS a
  JOIN modules AS m
    ON m.module_id = a.module_id
  ORDER BY a.padding_bytes DESC, m.module_name, a.module_id, a.value_id
  LIMIT $top
),
ranked_modules AS (
  SELECT DISTINCT module_id FROM ranked
)
SELECT
  r.module_id,
  r.module_name,
  r.value_id,
  v.instruction,
  v.shape_index,
  al.category,
  r.color,
  v.shape,
  r.size,
  r.logical_bytes,
  r.padding_bytes,
  round(r.size / nullif(r.logical_bytes, 0), 2) AS expansion,
  i.op_name
FROM ranked AS r
JOIN hlo_values AS v
  ON v.module_id = r.module_id AND v.value_id = r.value_id
JOIN allocations AS al
  ON al.module_id = r.module_id
  AND al.allocation_index = r.allocation_index
LEFT JOIN (
  SELECT module_id, instruction, op_name
  FROM instructions
  WHERE module_id IN (SELECT module_id FROM ranked_modules)
) AS i
  ON i.module_id = r.module_id AND i.instruction = v.instruction
WHERE
  v.module_id IN (SELECT module_id FROM ranked_modules)
  AND al.module_id IN (SELECT module_id FROM ranked_modules)
ORDER BY r.padding_bytes DESC, r.module_name, r.module_id, r.value_id
