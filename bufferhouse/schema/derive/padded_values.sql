-- name: padded_values
-- description: Every value whose assigned size exceeds its logical bytes: the padding, with its instruction, shape, op and allocation.
-- param lo BIGINT = NULL: lowest module_id whose rows are derived
-- param hi BIGINT = NULL: highest module_id whose rows are derived
-- note: Reads only the base rows of the modules with ids in [$lo, $hi]; the caller inserts the result into the table of this name.
SELECT
  a.module_id,
  a.value_id,
  v.instruction,
  v.shape_index,
  a.allocation_index,
  al.category,
  al.color,
  v.shape,
  i.op_name,
  a.size,
  v.logical_bytes,
  a.size - v.logical_bytes AS padding_bytes
FROM assignments AS a
JOIN hlo_values AS v
  ON v.module_id = a.module_id AND v.value_id = a.value_id
JOIN (
  SELECT module_id, allocation_index, category, color
  FROM allocations
  WHERE module_id BETWEEN $lo AND $hi
) AS al
  ON al.module_id = a.module_id
  AND al.allocation_index = a.allocation_index
LEFT JOIN (
  SELECT module_id, instruction, op_name
  FROM instructions
  WHERE module_id BETWEEN $lo AND $hi
) AS i
  ON i.module_id = v.module_id AND i.instruction = v.instruction
WHERE
  a.module_id BETWEEN $lo AND $hi
  AND v.module_id BETWEEN $lo AND $hi
  AND a.size - v.logical_bytes > 0
